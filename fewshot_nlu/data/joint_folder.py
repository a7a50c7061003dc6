"""Line-aligned joint intent + slot folders (``seq.in``, ``seq.out``, ``label``; SNIPS / ATIS ship them so), read
and validated without TFDS: what the ``joint_nlu_folder`` builder, a slot filler's support sets
(``data.support``) and ``fit``'s annotated examples (``data.annotated``) share. Errors name the file and line."""

from __future__ import annotations

import pathlib
from typing import Any

from fewshot_nlu.data.bio import validate_bio
from fewshot_nlu.data.intent_folder import read_lines
from fewshot_nlu.errors import DataError

FILES = ("seq.in", "seq.out", "label")


def check_aligned(directory: pathlib.Path, columns: dict[str, list[str]]) -> None:
  """Errors at the first line one of the files (``columns``: file name -> its lines) lacks."""
  counts = {name: len(lines) for name, lines in columns.items()}
  shortest = min(counts, key=counts.get)
  if len(set(counts.values())) > 1:
    sizes = ", ".join(f"{name} {count}" for name, count in counts.items())
    raise DataError(f"{directory / shortest}:{counts[shortest] + 1}: line missing (line counts: {sizes}); "
                     f"{', '.join(columns)} must be line-aligned")


def joint_example(directory: pathlib.Path, index: int, text: str, tag_line: str, label: str) -> dict[str, Any]:
  line = index + 1
  tokens, tags = text.split(), tag_line.split()
  if len(tags) != len(tokens):
    raise DataError(f"{directory / 'seq.out'}:{line}: {len(tags)} tags for the {len(tokens)} tokens of "
                     f"seq.in line {line}")
  validate_bio(tags, f"{directory / 'seq.out'}:{line}")
  intents = label.split("#")
  if not all(intents):
    raise DataError(f"{directory / 'label'}:{line}: empty intent in {label!r} (intents are joined by '#')")
  return {"index": index, "text": text, "tokens": tokens, "tags": tags, "intents": intents}


def read_joint_split(directory: str | pathlib.Path) -> list[dict[str, Any]]:
  """The examples of one split folder (``seq.in``, ``seq.out``, ``label``), validated (see module docstring)."""
  directory = pathlib.Path(directory)
  columns = {name: read_lines(directory / name) for name in FILES}
  check_aligned(directory, columns)
  return [joint_example(directory, index, *row) for index, row in enumerate(zip(*columns.values()))]
