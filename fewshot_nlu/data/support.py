"""A slot filler's support set from the user's files: BIO-labelled utterances, validated with errors that name
the file, the line and the field.

Two layouts:
  * a folder with ``seq.in`` (one whitespace-tokenised utterance per line) and ``seq.out`` (its BIO tags, one
    per token), as SNIPS / ATIS ship them (a ``label`` file beside them is ignored);
  * a JSONL file, one ``{"tokens": [...], "tags": [...]}`` object per line (``tokens`` / ``tags`` may also be
    whitespace-separated strings).

``read_support(path)`` returns ``[{"tokens": [...], "tags": [...]}, ...]``, what ``SlotFillerModel`` indexes.
"""

from __future__ import annotations

import pathlib
from typing import Any

from fewshot_nlu.data.bio import validate_bio
from fewshot_nlu.data.joint_folder import check_aligned
from fewshot_nlu.data.intent_folder import json_objects, read_lines
from fewshot_nlu.errors import DataError, MissingDataFile


def _words(value: Any, where: str, field: str) -> list[str]:
  if isinstance(value, str):
    value = value.split()
  if not isinstance(value, list) or not all(isinstance(v, str) and v and v.split() == [v] for v in value):
    raise DataError(f"{where}: field {field!r} must be a list of non-empty strings without whitespace "
                     f"(or one whitespace-separated string), got {value!r}")
  return value


def utterance(tokens: Any, tags: Any, where: str, tags_where: str | None = None) -> dict[str, list[str]]:
  """One validated support utterance; ``where`` names its file and line (``tags_where`` the tags' own)."""
  tokens, tags = _words(tokens, where, "tokens"), _words(tags, tags_where or where, "tags")
  if not tokens:
    raise DataError(f"{where}: field 'tokens' is empty")
  if len(tags) != len(tokens):
    raise DataError(f"{tags_where or where}: field 'tags': {len(tags)} tags for {len(tokens)} tokens")
  validate_bio(tags, f"{tags_where or where}: field 'tags'")
  return {"tokens": tokens, "tags": tags}


def read_support(path: str | pathlib.Path) -> list[dict[str, list[str]]]:
  """The support utterances of a ``seq.in``/``seq.out`` folder or a JSONL file (module docstring)."""
  path = pathlib.Path(path)
  if path.is_dir():
    columns = {name: read_lines(path / name) for name in ("seq.in", "seq.out")}
    check_aligned(path, columns)
    rows = [utterance(text, tags, f"{path / 'seq.in'}:{line}", f"{path / 'seq.out'}:{line}")
            for line, (text, tags) in enumerate(zip(*columns.values()), start=1)]
  elif path.is_file():
    rows = []
    for where, record in json_objects(path, "fields 'tokens' and 'tags'"):
      if {"tokens", "tags"} - set(record):
        raise DataError(f"{where}: expected an object with fields 'tokens' and 'tags'")
      rows.append(utterance(record["tokens"], record["tags"], where))
  else:
    raise MissingDataFile(f"{path}: no such support set (a folder with seq.in + seq.out, or a .jsonl file)")
  if not rows:
    raise DataError(f"{path}: the support set is empty")
  if not any(tag != "O" for row in rows for tag in row["tags"]):
    raise DataError(f"{path}: no utterance holds a labelled slot (every tag is O): nothing to retrieve")
  return rows
