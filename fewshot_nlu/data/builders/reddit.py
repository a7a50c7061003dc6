"""Reddit (context, response) pairs in PolyAI's conversational-datasets JSON-lines format: the input of ConvFiT
Stage 1 (response ranking on a fraction of Reddit).

Format (https://github.com/PolyAI-LDN/conversational-datasets, ``reddit/create_data.py --dataset_format JSON``):
one JSON object a line, ``{"context": str, "response": str, "context/0": str, "context/1": str, ...}``, where
``context`` is the comment that ``response`` replies to and ``context/i`` the i-th further-back comment
(``context/0`` is the parent of ``context``). Other keys (``subreddit``, ``thread_id``, ``context_author``,
``response_author``) are not kept. PolyAI writes ``train-NNNNN-of-NNNNN.json`` and ``test-...json`` shards.

Where the files are: ``config.paths`` (``train`` split) and ``config.test_paths`` (``test`` split, left out when
empty) are file globs, local or ``gs://`` (read through ``etils.epath``; ``gs://`` needs ``gcsfs`` or
``tensorflow`` installed). A config with no ``paths`` reads ``train-*.json`` and, if present, ``test-*.json``
from the raw folder (``raw_dir=``, else ``$FEWSHOT_NLU_DATA/Reddit``). There is no download: PolyAI publishes
the scripts that create the data, not the data.

Features: ``index`` (running number over the split's files in glob order, files by name, then lines),
``context``, ``extra_contexts`` (``context/0``, ``context/1``, ... in that order, i.e. going back in time) and
``response``. A malformed line (bad UTF-8 or JSON, not an object, a missing, non-string or empty ``context`` /
``response``, a gap in the ``context/N`` numbering, an empty line) is an error naming file, line and field;
nothing is skipped. Examples are generated in one process (``GeneratorBasedBuilder``) and written as TFDS
``array_record`` shards: fine for the fraction of Reddit ConvFiT uses (<= 1% of the 700M+ pairs).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from typing import Any, Iterator

import tensorflow_datasets as tfds
from etils import epath

from fewshot_nlu.data.builders.base import RawFolderBuilder
from fewshot_nlu.data.builders.base import indexed_features
from fewshot_nlu.errors import DataError, MissingDataFile

log = logging.getLogger(__name__)

_EXTRA_CONTEXT = re.compile(r"context/(\d+)")
_GLOB_CHARS = re.compile(r"[*?\[]")
DEFAULT_GLOBS = {"train": "train-*.json", "test": "test-*.json"}


@dataclasses.dataclass(eq=False)
class RedditConfig(tfds.core.BuilderConfig):
  paths: tuple[str, ...] = ()  # file globs of the train split; empty: <raw folder>/train-*.json
  # File globs of the test split; empty: no test split with paths, else <raw folder>/test-*.json if any.
  test_paths: tuple[str, ...] = ()


def expand_glob(pattern: str) -> list[epath.Path]:
  """The files matching ``pattern`` (local or ``gs://``), sorted; a pattern without wildcards names one
  file, which must exist."""
  parts = pattern.split("/")
  first = next((i for i, part in enumerate(parts) if _GLOB_CHARS.search(part)), None)
  if first is None:
    return [epath.Path(pattern)] if epath.Path(pattern).is_file() else []
  root = "/".join(parts[:first]) or ("/" if pattern.startswith("/") else ".")
  return sorted(p for p in epath.Path(root).glob("/".join(parts[first:])) if p.is_file())


def expand_globs(patterns: tuple[str, ...] | list[str]) -> list[epath.Path]:
  """All files of ``patterns`` in pattern order; a pattern matching nothing, or a file matched twice, is an
  error."""
  files: dict[str, str] = {}
  for pattern in patterns:
    matched = expand_glob(pattern)
    if not matched:
      raise MissingDataFile(f"no file matches {pattern!r}")
    for path in matched:
      if str(path) in files:
        raise DataError(f"{path} is matched by both {files[str(path)]!r} and {pattern!r}")
      files[str(path)] = pattern
  return [epath.Path(p) for p in files]


def _text_field(record: dict[str, Any], key: str, where: str, required: bool) -> str:
  if key not in record:
    raise DataError(f"{where}: missing field {key!r}")
  value = record[key]
  if not isinstance(value, str):
    raise DataError(f"{where}: field {key!r} must be a string, got {type(value).__name__}")
  if required and not value.strip():
    raise DataError(f"{where}: field {key!r} is empty")
  return value


def parse_line(line: bytes, where: str) -> dict[str, Any]:
  """One JSON line -> ``{"context", "extra_contexts", "response"}``; ``where`` is ``"<file>:<line>"``."""
  try:
    record = json.loads(line.decode("utf-8"))
  except UnicodeDecodeError as e:
    raise DataError(f"{where}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
  except json.JSONDecodeError as e:
    raise DataError(f"{where}: invalid JSON ({e.msg} at column {e.colno})") from None
  if not isinstance(record, dict):
    raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}")
  numbers = sorted(int(m.group(1)) for key in record if (m := _EXTRA_CONTEXT.fullmatch(key)))
  if numbers != list(range(len(numbers))):
    gap = next(i for i in range(len(numbers) + 1) if i not in numbers)
    raise DataError(f"{where}: missing field 'context/{gap}' (extra contexts must be numbered "
                     f"0, 1, ... without gaps; found {['context/%d' % n for n in numbers]})")
  return {
      "context": _text_field(record, "context", where, required=True),
      "extra_contexts": [_text_field(record, f"context/{i}", where, required=False) for i in numbers],
      "response": _text_field(record, "response", where, required=True),
  }


def read_jsonl(path: epath.Path) -> Iterator[dict[str, Any]]:
  """The parsed examples of one JSON-lines file, in line order; an empty line is an error."""
  with path.open("rb") as f:
    for number, line in enumerate(f, start=1):
      line = line.rstrip(b"\r\n")
      if not line.strip():
        raise DataError(f"{path}:{number}: empty line (every line must hold one JSON example)")
      yield parse_line(line, f"{path}:{number}")


class RedditConversational(RawFolderBuilder):
  """PolyAI conversational-datasets JSON lines (see module docstring)."""

  VERSION = tfds.core.Version("1.0.0")
  RAW_FOLDER = "Reddit"
  BUILDER_CONFIGS = [RedditConfig(name="default", description="train-*.json / test-*.json of the raw folder")]
  MANUAL_DOWNLOAD_INSTRUCTIONS = (
      "Create the data with PolyAI-LDN/conversational-datasets (reddit/create_data.py --dataset_format JSON), "
      "then pass raw_dir= (or $FEWSHOT_NLU_DATA/Reddit) holding train-*.json, or a config with paths=(globs,).")

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
        features=indexed_features(texts=("context", "response"), text_lists=("extra_contexts",)),
        homepage="https://github.com/PolyAI-LDN/conversational-datasets",
    )

  def split_globs(self, dl_manager=None) -> dict[str, tuple[str, ...]]:
    """{split: globs}: the config's paths, else the raw folder's PolyAI shards (test only when present)."""
    config = self.builder_config
    if config.paths:
      return {"train": config.paths, **({"test": config.test_paths} if config.test_paths else {})}
    if config.test_paths:
      raise DataError(f"RedditConfig {config.name!r}: test_paths given without paths (the train globs)")
    raw = self.raw_dir(dl_manager)
    globs = {split: (str(raw / pattern),) for split, pattern in DEFAULT_GLOBS.items()}
    if expand_glob(globs["test"][0]):
      return globs
    log.info("%s: no %s in %s; building the train split only", self.name, DEFAULT_GLOBS["test"], raw)
    return {"train": globs["train"]}

  def _split_generators(self, dl_manager):
    return {split: self._generate_examples(expand_globs(globs))
            for split, globs in self.split_globs(dl_manager).items()}

  def _generate_examples(self, files: list[epath.Path]):
    index = 0
    for path in files:
      for example in read_jsonl(path):
        yield index, {"index": index, **example}
        index += 1
