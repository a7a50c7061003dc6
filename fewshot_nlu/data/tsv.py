"""Small user-written TSV files: labelled examples (``text<TAB>label``), intent descriptions
(``label<TAB>description``). Errors name the file and line."""

from __future__ import annotations

import pathlib


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
        raise ValueError(f"{path}, line {number}: expected '{columns[0]}<TAB>{columns[1]}', got {line!r}")
      rows.append((fields[0], fields[1], number))
  return rows
