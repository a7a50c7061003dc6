"""Users' own intent data in CSV / JSON-lines tables (``IntentTable``).

``IntentTable`` reads a directory (``raw_dir=``) of ``<split>.csv`` or ``<split>.jsonl`` files, one split per
file (the file name without its extension names the split: letters, digits, ``_`` and ``-``):
  * CSV: a header row naming ``text`` and either ``label`` (one intent per row; or ``intent``, as annotated
    examples name it) or ``labels`` (intents joined by ``#``; an empty cell means no intent); other columns are
    ignored. UTF-8, a byte-order mark is allowed, commas or (a header without one) semicolons or tabs between
    cells, quoted fields may span lines (``intent_folder.csv_rows``).
  * JSONL: one JSON object per line with ``text`` and either ``label`` (a string; or ``intent``) or ``labels``
    (a list of strings, possibly empty); other keys are ignored.
Features: ``index`` (the example's position in its file, from 0), ``text`` (stripped), ``labels``
(``Sequence(Text)``; ``[label]`` for a single-label file).

Nothing is skipped: errors name the file, the line and the field at fault (missing column or key, empty text,
empty label, invalid JSON, a row with more fields than the header (missing trailing cells are empty), an empty line).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import tensorflow_datasets as tfds

from fewshot_nlu.data.builders.base import UserFolderBuilder, check_split_name, indexed_features
from fewshot_nlu.data.intent_folder import LABEL_FIELDS, csv_rows, read_lines
from fewshot_nlu.errors import DataError, MissingDataFile

TABLE_SUFFIXES = (".csv", ".jsonl")


def label_field(fields, where: str) -> str:
  """Which of ``label`` / ``labels`` / ``intent`` (``label`` by another name) a header or JSON object uses
  (exactly one, and ``text``, must be there)."""
  if "text" not in fields:
    raise DataError(f"{where}: field 'text' missing")
  present = [f for f in LABEL_FIELDS if f in fields]
  if len(present) != 1:
    raise DataError(f"{where}: " + ("field 'label' (or 'intent') or 'labels' missing" if not present else
                                    f"fields {' and '.join(map(repr, present))} both present; keep one"))
  return present[0]


def table_example(index: int, text: Any, labels: Any, where: str) -> dict[str, Any]:
  if not isinstance(text, str) or not text.strip():
    raise DataError(f"{where}: field 'text' is empty" if isinstance(text, str) else
                     f"{where}: field 'text' is {type(text).__name__}, not a string")
  if not isinstance(labels, list) or not all(isinstance(l, str) and l.strip() for l in labels):
    raise DataError(f"{where}: field 'labels' must be a list of non-empty strings, got {labels!r}")
  return {"index": index, "text": text.strip(), "labels": [l.strip() for l in labels]}


def csv_labels(value: str, field: str, where: str) -> list[str]:
  if field != "labels":
    if not value.strip():
      raise DataError(f"{where}: field {field!r} is empty")
    return [value]
  labels = value.split("#") if value.strip() else []
  if not all(l.strip() for l in labels):
    raise DataError(f"{where}: field 'labels' {value!r} has an empty intent (intents are joined by '#')")
  return labels


def read_csv_split(path: pathlib.Path) -> list[dict[str, Any]]:
  return read_csv_table(path)[1]


def read_csv_table(path: pathlib.Path) -> tuple[str, list[dict[str, Any]]]:
  """(the header's label field, 'label' or 'labels'; the examples) of a CSV split file (``csv_rows``)."""
  header, rows = csv_rows(path)
  field = label_field(header, f"{path}:1 (header)")
  examples = [table_example(i, record["text"], csv_labels(record[field], field, where), where)
              for i, (where, record) in enumerate(rows)]
  return field, examples


def read_jsonl_split(path: pathlib.Path) -> list[dict[str, Any]]:
  return [example for _, example in read_jsonl_table(path)]


def read_jsonl_table(path: pathlib.Path) -> list[tuple[str, dict[str, Any]]]:
  """(the label field the line uses, 'label' or 'labels'; the example) per line of a JSONL split file."""
  examples = []
  for number, line in enumerate(read_lines(path), start=1):
    where = f"{path}:{number}"
    try:
      record = json.loads(line.lstrip("\ufeff") if number == 1 else line)
    except json.JSONDecodeError as e:
      raise DataError(f"{where}: invalid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(record, dict):
      raise DataError(f"{where}: expected a JSON object with 'text' and 'label' or 'labels'")
    field = label_field(record, where)
    labels = [record[field]] if field != "labels" else record[field]
    if field != "labels" and not (isinstance(record[field], str) and record[field].strip()):
      raise DataError(f"{where}: field {field!r} must be a non-empty string, got {record[field]!r}")
    examples.append((field, table_example(len(examples), record["text"], labels, where)))
  return examples


def table_files(raw: pathlib.Path) -> dict[str, pathlib.Path]:
  """{split name: file} for the ``.csv`` / ``.jsonl`` files of ``raw``."""
  files = {}
  for path in sorted(p for p in raw.iterdir() if p.suffix in TABLE_SUFFIXES and p.is_file()):
    name = check_split_name(path.stem, path)
    if name in files:
      raise DataError(f"{raw}: split {name!r} given twice ({files[name].name} and {path.name}); keep one")
    files[name] = path
  if not files:
    raise MissingDataFile(f"{raw}: no <split>.csv or <split>.jsonl file")
  return files


class IntentTable(UserFolderBuilder):
  """A user's own (multi-)label intent data: ``<split>.csv`` / ``<split>.jsonl`` files in ``raw_dir=``."""
  VERSION = tfds.core.Version("1.0.0")

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(features=indexed_features(("text",), ("labels",)))

  def _split_generators(self, dl_manager):
    return {name: self._generate_examples(path) for name, path in table_files(self.raw_dir(dl_manager)).items()}

  def _generate_examples(self, path):
    examples = read_csv_split(path) if path.suffix == ".csv" else read_jsonl_split(path)
    for example in examples:
      yield example["index"], example
