"""Reader for the line-aligned intent layout: ``<split>/seq.in`` (one utterance per line) and
``<split>/label`` (its intent; multi-intent labels joined by ``#``). The raw format of BANKING77, CLINC150,
HWU64, SNIPS and MixATIS in ``shared/data``, and the bring-your-own-data format."""

from __future__ import annotations

import csv
import dataclasses
import io
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


# A table's label column or key: one intent (``label``; ``intent``, as annotated examples name it) or a set
# (``labels``)
LABEL_FIELDS = ("label", "labels", "intent")
CSV_DELIMITERS = (",", ";", "\t")  # a comma, or what spreadsheets write in locales whose decimal mark is a comma


def csv_rows(path: pathlib.Path) -> tuple[list[str], Iterator[tuple[str, dict[str, str]]]]:
  """(the header's column names, then ``(file:line, {column: cell})`` per row) of a CSV file in UTF-8 (a
  byte-order mark, as spreadsheets write one, is skipped), its cells separated by commas, or by semicolons or tabs
  where the header line holds one of those and no comma; a row's missing trailing cells are empty. Errors name
  the file and line: undecodable bytes, an empty row (every row holds one example), more cells than the header
  names."""
  path = pathlib.Path(path)
  raw = path.read_bytes()
  try:
    text = raw.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    line = raw[:e.start].count(b"\n") + 1
    raise DataError(f"{path}:{line}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
  first = text.split("\n", 1)[0]
  delimiter = next((d for d in CSV_DELIMITERS if d in first), ",")
  reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
  header = [name.strip() for name in next(reader, [])]

  def rows() -> Iterator[tuple[str, dict[str, str]]]:
    line = reader.line_num + 1
    for row in reader:
      where = f"{path}:{line}"
      if not row:
        raise DataError(f"{where}: empty line (every row must hold one example)")
      if len(row) > len(header):
        raise DataError(f"{where}: {len(row)} fields, but the header names {len(header)}")
      yield where, dict(zip(header, row + [""] * (len(header) - len(row))))  # trailing empty cells left out
      line = reader.line_num + 1

  return header, rows()


def read_intent_split(directory: str | pathlib.Path) -> IntentSplit:
  """Reads ``directory/seq.in`` and ``directory/label``; errors name the file and line at fault."""
  directory = pathlib.Path(directory)
  texts = read_lines(directory / "seq.in")
  labels = read_lines(directory / "label")
  if len(texts) != len(labels):
    raise DataError(f"{directory}: seq.in has {len(texts)} lines but label has {len(labels)}; "
                     "they must be line-aligned")
  return IntentSplit(texts, labels, directory)
