"""Users' own intent data (``IntentTable``), and the file-reading pieces the JSON and user-folder builders share.

``IntentTable`` reads a directory (``raw_dir=``) of ``<split>.csv`` or ``<split>.jsonl`` files, one split per
file (the file name without its extension names the split: letters, digits, ``_`` and ``-``):
  * CSV: a header row naming ``text`` and either ``label`` (one intent per row) or ``labels`` (intents joined
    by ``#``; an empty cell means no intent); other columns are ignored. UTF-8, a byte-order mark is allowed,
    quoted fields may span lines.
  * JSONL: one JSON object per line with ``text`` and either ``label`` (a string) or ``labels`` (a list of
    strings, possibly empty); other keys are ignored.
Features: ``index`` (the example's position in its file, from 0), ``text`` (stripped), ``labels``
(``Sequence(Text)``; ``[label]`` for a single-label file).

Nothing is skipped: errors name the file, the line and the field at fault (missing column or key, empty text,
empty label, invalid JSON, a row with too many or too few fields, an empty line).

Shared with the joint, slot and NLU++ builders: ``read_json`` (encoding-tolerant, errors at file:line:column),
``download_layout`` (original files -> the ``shared/data`` layout), ``indexed_features`` and
``UserFolderBuilder`` (a builder with no shipped folder, which needs ``raw_dir=``).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import pathlib
import re
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from fewshot_nlu.data.builders.base import RawFolderBuilder
from fewshot_nlu.data.intent_folder import read_lines

SPLIT_NAME = re.compile(r"[\w-]+")  # what TFDS accepts as a split name
TABLE_SUFFIXES = (".csv", ".jsonl")
LABEL_FIELDS = ("label", "labels")


def check_split_name(name: str, source: pathlib.Path) -> str:
  if not SPLIT_NAME.fullmatch(name):
    raise ValueError(f"{source}: split name {name!r} may hold only letters, digits, '_' and '-'")
  return name


def decode_text(raw: bytes, path: pathlib.Path) -> str:
  """Decodes a JSON file's bytes: UTF-8 with or without byte-order mark, or UTF-16/32 (JSON's own detection).
  Bytes that are not valid UTF-8 are read as Latin-1, with a warning naming the file and the first bad line
  (``SNIPS_nlu_benchmark`` ships one Latin-1 file)."""
  encoding = json.detect_encoding(raw)
  try:
    return raw.decode(encoding)
  except UnicodeDecodeError as e:
    line = raw[:e.start].count(b"\n") + 1
    if not encoding.startswith("utf-8"):
      raise ValueError(f"{path}:{line}: not valid {encoding} ({e.reason} at byte {e.start})") from None
    logging.warning("%s:%d: not valid UTF-8 (%s at byte %d); reading the file as Latin-1", path, line, e.reason,
                    e.start)
    return raw.decode("latin-1")


def read_json(path: str | os.PathLike) -> Any:
  """One JSON document from a file; errors name the file, line and column."""
  path = pathlib.Path(path)
  if not path.is_file():
    raise FileNotFoundError(f"{path}: missing")
  try:
    return json.loads(decode_text(path.read_bytes(), path))
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}:{e.lineno}:{e.colno}: invalid JSON ({e.msg})") from None


def download_layout(dl_manager: tfds.download.DownloadManager, files: dict[str, str], folder: str) -> pathlib.Path:
  """Downloads ``files`` ({path in the raw layout: url}) and copies them into ``download_dir/folder``, which is
  returned: a raw folder in the layout of ``shared/data``."""
  paths = dl_manager.download(files)
  root = pathlib.Path(dl_manager.download_dir) / folder
  for key, path in paths.items():
    (root / key).parent.mkdir(parents=True, exist_ok=True)
    (root / key).write_bytes(pathlib.Path(path).read_bytes())
  return root


def indexed_features(texts: tuple[str, ...] = (), text_lists: tuple[str, ...] = (),
                     **others: tfds.features.FeatureConnector) -> tfds.features.FeaturesDict:
  """An example's features: ``index`` (int64; every example carries one, see ``base``), each of ``texts`` a
  ``Text``, each of ``text_lists`` a ``Sequence(Text)``, then ``others``."""
  return tfds.features.FeaturesDict({
      "index": tfds.features.Scalar(np.int64),
      **{name: tfds.features.Text() for name in texts},
      **{name: tfds.features.Sequence(tfds.features.Text()) for name in text_lists},
      **others,
  })


class UserFolderBuilder(RawFolderBuilder, skip_registration=True):
  """A builder with no shipped raw folder (``RAW_FOLDER = ""``) needs ``raw_dir=``."""

  def __init__(self, *, raw_dir: str | os.PathLike | None = None, **kwargs):
    if raw_dir is None and not self.RAW_FOLDER:
      raise ValueError(f"{type(self).__name__} reads a folder of your own: pass raw_dir=")
    super().__init__(raw_dir=raw_dir, **kwargs)


def label_field(fields, where: str) -> str:
  """Which of ``label`` / ``labels`` a header or JSON object uses (exactly one, and ``text``, must be there)."""
  if "text" not in fields:
    raise ValueError(f"{where}: field 'text' missing")
  present = [f for f in LABEL_FIELDS if f in fields]
  if len(present) != 1:
    raise ValueError(f"{where}: field 'label' or 'labels' " + ("missing" if not present else "both present; keep one"))
  return present[0]


def table_example(index: int, text: Any, labels: Any, where: str) -> dict[str, Any]:
  if not isinstance(text, str) or not text.strip():
    raise ValueError(f"{where}: field 'text' is empty" if isinstance(text, str) else
                     f"{where}: field 'text' is {type(text).__name__}, not a string")
  if not isinstance(labels, list) or not all(isinstance(l, str) and l.strip() for l in labels):
    raise ValueError(f"{where}: field 'labels' must be a list of non-empty strings, got {labels!r}")
  return {"index": index, "text": text.strip(), "labels": [l.strip() for l in labels]}


def csv_labels(value: str, field: str, where: str) -> list[str]:
  if field == "label":
    if not value.strip():
      raise ValueError(f"{where}: field 'label' is empty")
    return [value]
  labels = value.split("#") if value.strip() else []
  if not all(l.strip() for l in labels):
    raise ValueError(f"{where}: field 'labels' {value!r} has an empty intent (intents are joined by '#')")
  return labels


def read_csv_split(path: pathlib.Path) -> list[dict[str, Any]]:
  raw = path.read_bytes()
  try:
    text = raw.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    line = raw[:e.start].count(b"\n") + 1
    raise ValueError(f"{path}:{line}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
  reader = csv.reader(io.StringIO(text, newline=""))
  header = [name.strip() for name in next(reader, [])]
  field = label_field(header, f"{path}:1 (header)")
  examples, line = [], reader.line_num + 1
  for row in reader:
    where = f"{path}:{line}"
    if not row:
      raise ValueError(f"{where}: empty line (every row must hold one example)")
    if len(row) != len(header):
      raise ValueError(f"{where}: {len(row)} fields, but the header names {len(header)}")
    record = dict(zip(header, row))
    examples.append(table_example(len(examples), record["text"], csv_labels(record[field], field, where), where))
    line = reader.line_num + 1
  return examples


def read_jsonl_split(path: pathlib.Path) -> list[dict[str, Any]]:
  examples = []
  for number, line in enumerate(read_lines(path), start=1):
    where = f"{path}:{number}"
    try:
      record = json.loads(line.lstrip("\ufeff") if number == 1 else line)
    except json.JSONDecodeError as e:
      raise ValueError(f"{where}: invalid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(record, dict):
      raise ValueError(f"{where}: expected a JSON object with 'text' and 'label' or 'labels'")
    field = label_field(record, where)
    labels = [record[field]] if field == "label" else record[field]
    if field == "label" and not (isinstance(record[field], str) and record[field].strip()):
      raise ValueError(f"{where}: field 'label' must be a non-empty string, got {record[field]!r}")
    examples.append(table_example(len(examples), record["text"], labels, where))
  return examples


def table_files(raw: pathlib.Path) -> dict[str, pathlib.Path]:
  """{split name: file} for the ``.csv`` / ``.jsonl`` files of ``raw``."""
  files = {}
  for path in sorted(p for p in raw.iterdir() if p.suffix in TABLE_SUFFIXES and p.is_file()):
    name = check_split_name(path.stem, path)
    if name in files:
      raise ValueError(f"{raw}: split {name!r} given twice ({files[name].name} and {path.name}); keep one")
    files[name] = path
  if not files:
    raise FileNotFoundError(f"{raw}: no <split>.csv or <split>.jsonl file")
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
