"""TSV files: reading small user-written ones (labelled examples ``text<TAB>label``, intent descriptions
``label<TAB>description``; errors name the file and line), and writing a run's predictions files."""

from __future__ import annotations

import pathlib
from typing import Sequence

from fewshot_nlu.errors import DataError


def read_two_columns(path: str | pathlib.Path, columns: tuple[str, str]) -> list[tuple[str, str, int]]:
  """(first, second, line number) of every non-blank line; each line must hold exactly two non-empty
  tab-separated fields, named ``columns`` in the error message."""
  path = pathlib.Path(path)
  rows = []
  with open(path, encoding="utf-8") as f:
    for number, line in enumerate(f, 1):
      line = line.rstrip("\n")
      if not line.strip():
        continue
      fields = line.split("\t")
      if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
        raise DataError(f"{path}, line {number}: expected '{columns[0]}<TAB>{columns[1]}', got {line!r}")
      rows.append((fields[0], fields[1], number))
  return rows


def _cell(text: str) -> str:
  return text.replace("\t", " ").replace("\n", " ")


def write_tsv(path: pathlib.Path, header: Sequence[str], rows) -> None:
  """A header line and one line per row, every cell ``str``-ed and cleaned of tabs and newlines."""
  with open(path, "w", encoding="utf-8") as f:
    f.write("\t".join(header) + "\n")
    for row in rows:
      f.write("\t".join(_cell(str(c)) for c in row) + "\n")
