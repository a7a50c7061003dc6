"""Reader for the line-aligned intent layout: ``<split>/seq.in`` (one utterance per line) and
``<split>/label`` (its intent; multi-intent labels joined by ``#``). The raw format of BANKING77, CLINC150,
HWU64, SNIPS and MixATIS in ``shared/data``, and the bring-your-own-data format."""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Iterator

from fewshot_nlu.errors import DataError, MissingDataFile


@dataclasses.dataclass(frozen=True)
class IntentSplit:
  texts: list[str]
  labels: list[str]
  source: pathlib.Path | str  # the folder, or a builder/split name

  @property
  def label_names(self) -> list[str]:
    return sorted(set(self.labels))


@dataclasses.dataclass(frozen=True)
class LabelSetSplit:
  """Multi-label examples: each text with its set of intents (possibly empty)."""
  texts: list[str]
  label_sets: list[tuple[str, ...]]
  source: pathlib.Path | str

  @property
  def label_names(self) -> list[str]:
    return sorted({l for labels in self.label_sets for l in labels})


def read_lines(path: pathlib.Path, keep_blank: bool = False) -> list[str]:
  """Stripped lines of a UTF-8 file; errors name the file and line (missing file, undecodable bytes, and an
  empty line unless ``keep_blank``, which keeps it as ``""``)."""
  path = pathlib.Path(path)
  if not path.exists():
    raise MissingDataFile(f"{path}: missing (expected one line per example)")
  raw = path.read_bytes().split(b"\n")
  if raw and raw[-1] in (b"", b"\r"):
    raw.pop()
  lines = []
  for number, line in enumerate(raw, start=1):
    try:
      text = line.decode("utf-8").strip()
    except UnicodeDecodeError as e:
      raise DataError(f"{path}:{number}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
    if not text and not keep_blank:
      raise DataError(f"{path}:{number}: empty line (every line must hold one example)")
    lines.append(text)
  return lines


def json_objects(path: pathlib.Path, expected: str) -> Iterator[tuple[str, dict]]:
  """(``file:line``, the object) per non-blank line of a JSON-lines file; a line that is not JSON, or not an
  object, is an error naming the file and line (``expected`` says what the object should hold)."""
  path = pathlib.Path(path)
  for line, raw in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
    if not raw.strip():
      continue
    where = f"{path}:{line}"
    try:
      record = json.loads(raw)
    except json.JSONDecodeError as e:
      raise DataError(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(record, dict):
      raise DataError(f"{where}: expected an object with {expected}")
    yield where, record


def read_intent_split(directory: str | pathlib.Path) -> IntentSplit:
  """Reads ``directory/seq.in`` and ``directory/label``; errors name the file and line at fault."""
  directory = pathlib.Path(directory)
  texts = read_lines(directory / "seq.in")
  labels = read_lines(directory / "label")
  if len(texts) != len(labels):
    raise DataError(f"{directory}: seq.in has {len(texts)} lines but label has {len(labels)}; "
                     "they must be line-aligned")
  return IntentSplit(texts, labels, directory)
