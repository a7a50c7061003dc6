"""Reader for the line-aligned intent layout: ``<split>/seq.in`` (one utterance per line) and
``<split>/label`` (its intent; multi-intent labels joined by ``#``). The raw format of BANKING77, CLINC150,
HWU64, SNIPS and MixATIS in ``shared/data``, and the bring-your-own-data format."""

from __future__ import annotations

import dataclasses
import pathlib


@dataclasses.dataclass(frozen=True)
class IntentSplit:
  texts: list[str]
  labels: list[str]
  source: pathlib.Path

  @property
  def label_names(self) -> list[str]:
    return sorted(set(self.labels))


def _read_lines(path: pathlib.Path) -> list[str]:
  if not path.exists():
    raise FileNotFoundError(f"{path}: missing (expected one line per example)")
  lines = path.read_text(encoding="utf-8").split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  for number, line in enumerate(lines, start=1):
    if not line.strip():
      raise ValueError(f"{path}:{number}: empty line (every line must hold one example)")
  return [line.strip() for line in lines]


def read_intent_split(directory: str | pathlib.Path) -> IntentSplit:
  """Reads ``directory/seq.in`` and ``directory/label``; errors name the file and line at fault."""
  directory = pathlib.Path(directory)
  texts = _read_lines(directory / "seq.in")
  labels = _read_lines(directory / "label")
  if len(texts) != len(labels):
    raise ValueError(f"{directory}: seq.in has {len(texts)} lines but label has {len(labels)}; "
                     "they must be line-aligned")
  return IntentSplit(texts, labels, directory)
