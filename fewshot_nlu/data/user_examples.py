"""Labelled examples handed to ``fewshot_nlu.fit``: checked, and written as ``intent_table`` files.

Three forms, one result (``Examples``: texts, one label or a label set per text, and whether it is multi-label):
  * two sequences, ``texts`` and ``labels``: a label is a string (single-label) or a list / tuple / set of
    strings (multi-label: a set of intents, possibly empty);
  * a pandas DataFrame, with a text column (default ``text``) and a label column (default ``label``, else
    ``labels``); list-valued label cells mean multi-label;
  * a path to a ``.csv`` or ``.jsonl`` file in the ``intent_table`` format (``data.builders.custom``: ``text``
    and ``label``, or ``labels`` for label sets), read by that builder's own readers.

Nothing is dropped or relabelled: a text that is not a non-empty string (NaN, None, blank), a label that is not
a non-empty string, labels of mixed kinds (strings and sets), sequences of different lengths, a missing column,
a single intent, or an unreadable file raise ``DataError`` (a ``ValueError``) naming the row, or the file and
line (a missing file: ``MissingDataFile``, a ``FileNotFoundError``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
from typing import Any, Sequence

from fewshot_nlu.data.intent_folder import LABEL_FIELDS
from fewshot_nlu.errors import DataError, MissingDataFile

SET_TYPES = (list, tuple, set, frozenset)


@dataclasses.dataclass(frozen=True)
class Examples:
  texts: tuple[str, ...]
  labels: tuple  # one string per text, or (multi_label) one tuple of strings per text
  multi_label: bool
  source: str  # what the examples came from, for messages

  @property
  def label_names(self) -> list[str]:
    if self.multi_label:
      return sorted({l for labels in self.labels for l in labels})
    return sorted(set(self.labels))

  def examples_per_label(self) -> dict[str, int]:
    counts: dict[str, int] = {}
    for labels in self.labels:
      for label in (labels if self.multi_label else (labels,)):
        counts[label] = counts.get(label, 0) + 1
    return counts

  def jsonl(self) -> str:
    """The examples as ``intent_table`` JSON lines (``label`` per line, or ``labels`` when multi-label)."""
    field = "labels" if self.multi_label else "label"
    return "".join(json.dumps({"text": t, field: list(l) if self.multi_label else l}, ensure_ascii=False) + "\n"
                   for t, l in zip(self.texts, self.labels))


def read(data: Any, labels: Sequence | None = None, *, text_column: str = "text", label_column: str | None = None,
         what: str = "examples") -> Examples:
  """``Examples`` from any of the three forms (module docstring); ``what`` names the argument in messages."""
  if isinstance(data, (str, os.PathLike)):
    if labels is not None:
      raise DataError(f"{what}: got one string ({str(data)[:40]!r}) and labels; pass a list of texts with their "
                      "labels, or the path of a .csv / .jsonl file (which holds its own labels) without labels")
    return from_file(pathlib.Path(data))
  if _is_dataframe(data):
    if labels is not None:
      raise DataError(f"{what}: a DataFrame holds its own labels (column {label_column or 'label'!r}); "
                      "pass labels=None with a DataFrame")
    return from_dataframe(data, text_column=text_column, label_column=label_column, what=what)
  if labels is None:
    raise DataError(f"{what}: labels missing; pass texts and labels, a DataFrame, or a .csv / .jsonl path")
  return from_lists(data, labels, what=what)


def _is_dataframe(data: Any) -> bool:
  """A pandas DataFrame, recognised without importing pandas (an optional dependency)."""
  return type(data).__name__ == "DataFrame" and type(data).__module__.startswith("pandas")


def _sequence(values: Any, name: str) -> list:
  if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__") or not hasattr(values, "__iter__"):
    raise DataError(f"{name}: expected a list (one item per example), got {type(values).__name__}")
  return list(values)


def from_lists(texts: Sequence[str], labels: Sequence, *, what: str = "examples",
               rows: Sequence[str] | None = None, columns: tuple[str, str] = ("text", "label"),
               min_labels: int = 2, multi_label: bool | None = None) -> Examples:
  """Checks and packs parallel sequences; messages name ``texts[i]`` / ``labels[i]``, or with ``rows`` (a
  DataFrame's) the row and its column (``columns``: the text and label columns). ``min_labels``: the distinct
  labels needed (2 to train; 1 to add examples to a model); ``multi_label``: the kind of label the caller
  needs (None: whatever the first example has)."""
  texts, labels = _sequence(texts, "texts"), _sequence(labels, "labels")
  if len(texts) != len(labels):
    raise DataError(f"{what}: {len(texts)} texts but {len(labels)} labels; pass one label (or label set) per text")
  if not texts:
    raise DataError(f"{what}: no examples")
  if rows:
    field_name = {"text": columns[0], "label": columns[1]}
    name = lambda field, i: f"{rows[i]}, column {field!r}"  # noqa: E731
  else:
    field_name = {"text": "texts", "label": "labels"}
    name = lambda field, i: f"{field}[{i}]"  # noqa: E731
  clean_texts = []
  for i, text in enumerate(texts):
    where = name(field_name["text"], i)
    if not isinstance(text, str):
      raise DataError(f"{where}: {describe(text)} is not a string (every example needs its text)")
    if not text.strip():
      raise DataError(f"{where}: empty text")
    clean_texts.append(text.strip())
  multi = isinstance(labels[0], SET_TYPES) or _is_array(labels[0])
  if multi_label is not None and multi != multi_label:
    needed = "label sets (a list of labels per text)" if multi_label else "one string label per text"
    raise DataError(f"{name(field_name['label'], 0)}: {describe(labels[0])}: this model takes {needed}")
  clean_labels = []
  for i, label in enumerate(labels):
    where = name(field_name["label"], i)
    is_set = isinstance(label, SET_TYPES) or _is_array(label)
    if is_set != multi:
      first = "label sets (multi-label)" if multi else "single labels"
      raise DataError(f"{where}: {describe(label)} mixes label kinds: the first example has {first}; give every "
                      "example a string label, or every example a list of labels")
    if multi:
      members = list(label)
      for member in members:
        _require_label(member, where)
      clean_labels.append(tuple(sorted({m.strip() for m in members})))
    else:
      _require_label(label, where)
      clean_labels.append(label.strip())
  examples = Examples(tuple(clean_texts), tuple(clean_labels), multi, what)
  if len(examples.label_names) < min_labels:
    raise DataError(f"{what}: only {len(examples.label_names)} intent ({', '.join(examples.label_names) or 'none'}); "
                    "intent detection needs examples of at least 2 intents")
  return examples


def _is_array(value: Any) -> bool:
  return type(value).__name__ == "ndarray"


def _require_label(label: Any, where: str) -> None:
  if not isinstance(label, str):
    raise DataError(f"{where}: label {describe(label)} is not a string (labels are intent names)")
  if not label.strip():
    raise DataError(f"{where}: empty label")


def describe(value: Any) -> str:
  if isinstance(value, float) and value != value:
    return "NaN (a missing value)"
  if value is None:
    return "None (a missing value)"
  return f"{value!r} ({type(value).__name__})"


def from_dataframe(frame, *, text_column: str = "text", label_column: str | None = None,
                   what: str = "examples") -> Examples:
  """The text and label columns of a DataFrame; messages name the row by position and index."""
  columns = [str(c) for c in frame.columns]
  if text_column not in frame.columns:
    raise DataError(f"{what}: DataFrame has no column {text_column!r} (columns: {columns}); pass "
                    "text_column=")
  if label_column is None:
    present = [c for c in LABEL_FIELDS if c in frame.columns]
    if len(present) != 1:
      raise DataError(f"{what}: DataFrame has " + ("no column 'label' (or 'intent') or 'labels'" if not present
                                                   else f"columns {' and '.join(map(repr, present))}")
                      + f" (columns: {columns}); pass label_column=")
    label_column = present[0]
  elif label_column not in frame.columns:
    raise DataError(f"{what}: DataFrame has no column {label_column!r} (columns: {columns})")
  rows = [f"{what}: DataFrame row {i} (index {index!r})" for i, index in enumerate(frame.index)]
  return from_lists(list(frame[text_column]), list(frame[label_column]), what=f"{what} (DataFrame)", rows=rows,
                    columns=(text_column, label_column))


def from_file(path: pathlib.Path) -> Examples:
  """A ``.csv`` / ``.jsonl`` file in the ``intent_table`` format, read by that builder's readers (errors name the
  file and line); a file whose lines mix ``label`` and ``labels`` is refused (mixed label kinds)."""
  from fewshot_nlu.data.builders import custom
  path = pathlib.Path(path).expanduser()
  if path.suffix not in custom.TABLE_SUFFIXES:
    raise DataError(f"{path}: expected a .csv or .jsonl file (the intent_table format: text and label / labels)")
  if not path.exists():
    raise MissingDataFile(f"{path}: no such file")
  try:
    if path.suffix == ".csv":
      field, examples = custom.read_csv_table(path)
      fields = [field] * len(examples)
    else:
      pairs = custom.read_jsonl_table(path)
      fields, examples = [f for f, _ in pairs], [e for _, e in pairs]
  except (IsADirectoryError, PermissionError) as e:
    raise DataError(f"{path}: cannot be read ({e.strerror})") from None
  if not examples:
    raise DataError(f"{path}: no examples")
  for line, field in enumerate(fields, start=1):
    if field != fields[0]:
      raise DataError(f"{path}:{line}: field {field!r}, but line 1 uses {fields[0]!r}; use 'label' on every line or "
                      "'labels' on every line (mixed label kinds)")
  multi = fields[0] == "labels"
  labels = [tuple(sorted(set(e["labels"]))) if multi else e["labels"][0] for e in examples]
  result = Examples(tuple(e["text"] for e in examples), tuple(labels), multi, str(path))
  if len(result.label_names) < 2:
    raise DataError(f"{path}: only {len(result.label_names)} intent ({', '.join(result.label_names) or 'none'}); "
                    "intent detection needs examples of at least 2 intents")
  return result


def write_table(splits: dict[str, Examples], root: pathlib.Path) -> pathlib.Path:
  """Writes ``<split>.jsonl`` files into a folder named by their content under ``root`` (the same examples: the
  same folder, its files untouched, so a rerun's data fingerprint is unchanged) and returns that folder."""
  return write_files({f"{name}.jsonl": examples.jsonl().encode("utf-8") for name, examples in splits.items()}, root)


def write_files(files: dict[str, bytes], root: pathlib.Path) -> pathlib.Path:
  """Writes ``files`` (name -> content) into a folder named by their content under ``root`` (written once, then
  left untouched) and returns that folder."""
  from fewshot_nlu import workdirs
  digest = hashlib.sha256()
  for name, content in sorted(files.items()):
    digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
  folder = pathlib.Path(root).expanduser() / digest.hexdigest()[:20]
  if not all((folder / name).is_file() and (folder / name).read_bytes() == content for name, content in files.items()):
    with workdirs.atomic_folder(folder) as partial:
      for name, content in files.items():
        (partial / name).write_bytes(content)
  return folder
