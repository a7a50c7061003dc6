"""Common machinery of fewshot_nlu's TFDS builders.

Every builder is a ``tfds.core.GeneratorBasedBuilder`` writing ``array_record`` files, read back through
``as_data_source()`` (random access, no TensorFlow). Raw files are found, in this order:
  1. ``raw_dir=`` given to the builder (a user's own folder);
  2. ``$FEWSHOT_NLU_DATA/<RAW_FOLDER>`` (in this repository's CI: ``../shared/data/<RAW_FOLDER>``);
  3. ``../shared/data/<RAW_FOLDER>`` relative to the working directory;
  4. the public download URLs of the original files (``DOWNLOAD_URLS``), fetched by TFDS's download manager
     when online.
Prepared datasets go to ``data_dir=`` or ``$FEWSHOT_NLU_TFDS_DIR`` (default ``~/tensorflow_datasets``).

Every example carries an ``index`` (its position in the raw file, or a running number), because array_record
files are written in hashed-key order: ``load_split`` returns examples in raw order, decoded to Python str.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import re
from typing import Any, ClassVar

import numpy as np
import tensorflow_datasets as tfds

from fewshot_nlu import workdirs
from fewshot_nlu.errors import DataError, MissingDataFile

DATA_ENV = "FEWSHOT_NLU_DATA"
TFDS_ENV = "FEWSHOT_NLU_TFDS_DIR"
DEFAULT_RAW_ROOT = pathlib.Path("..") / "shared" / "data"
SPLIT_NAME = re.compile(r"[\w-]+")  # what TFDS accepts as a split name


def raw_root() -> pathlib.Path:
  """The folder holding the raw dataset folders (``BANKING77/``, ``CLINC150/``, ...)."""
  return pathlib.Path(os.environ.get(DATA_ENV, DEFAULT_RAW_ROOT)).expanduser()


def tfds_dir() -> str:
  return os.path.expanduser(os.environ.get(TFDS_ENV, "~/tensorflow_datasets"))


class RawFolderBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """Base of all builders: resolves the raw folder (see module docstring)."""

  RAW_FOLDER: ClassVar[str] = ""
  # Public URLs of the original files: {path in the raw layout: url}.
  DOWNLOAD_URLS: ClassVar[dict[str, str]] = {}
  MANUAL_DOWNLOAD_INSTRUCTIONS = (
      "Point raw_dir= (or $FEWSHOT_NLU_DATA) at the folder holding the raw files; see "
      "shared/data/README.md for the layout.")

  def __init__(self, *, raw_dir: str | os.PathLike | None = None, **kwargs):
    kwargs.setdefault("file_format", "array_record")
    kwargs["data_dir"] = kwargs.get("data_dir") or tfds_dir()
    self._raw_dir_arg = pathlib.Path(raw_dir).expanduser() if raw_dir is not None else None
    if self._raw_dir_arg is not None:
      # A user's folder can change under the same builder name: key the prepared files by its contents'
      # fingerprint, so an edited folder is rebuilt instead of silently served from the old build.
      kwargs["data_dir"] = os.path.join(kwargs["data_dir"], "by_raw_dir", workdirs.path_fingerprint(self._raw_dir_arg))
    super().__init__(**kwargs)

  def raw_dir(self, dl_manager: tfds.download.DownloadManager | None = None) -> pathlib.Path:
    """The local folder with the raw files (downloading them if needed and possible)."""
    if self._raw_dir_arg is not None:
      if not self._raw_dir_arg.is_dir():
        raise MissingDataFile(f"raw_dir {str(self._raw_dir_arg)!r} is not a directory")
      return self._raw_dir_arg
    candidate = raw_root() / self.RAW_FOLDER
    if candidate.is_dir():
      return candidate
    if self.DOWNLOAD_URLS and dl_manager is not None:
      return self._download_raw(dl_manager)
    raise MissingDataFile(
        f"{self.name}: raw folder {str(candidate)!r} not found. Set ${DATA_ENV} to the folder holding "
        f"{self.RAW_FOLDER}/, or pass raw_dir=" + (", or build online to download it" if self.DOWNLOAD_URLS
                                                   else ""))

  def _download_raw(self, dl_manager: tfds.download.DownloadManager) -> pathlib.Path:
    """Downloads ``DOWNLOAD_URLS`` ({path in the raw layout: url}) into a folder in the raw layout."""
    return download_layout(dl_manager, self.DOWNLOAD_URLS, f"{self.name}_raw")


def check_split_name(name: str, source: pathlib.Path) -> str:
  if not SPLIT_NAME.fullmatch(name):
    raise DataError(f"{source}: split name {name!r} may hold only letters, digits, '_' and '-'")
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
      raise DataError(f"{path}:{line}: not valid {encoding} ({e.reason} at byte {e.start})") from None
    logging.warning("%s:%d: not valid UTF-8 (%s at byte %d); reading the file as Latin-1", path, line, e.reason,
                    e.start)
    return raw.decode("latin-1")


def read_json(path: str | os.PathLike) -> Any:
  """One JSON document from a file; errors name the file, line and column."""
  path = pathlib.Path(path)
  if not path.is_file():
    raise MissingDataFile(f"{path}: missing")
  try:
    return json.loads(decode_text(path.read_bytes(), path))
  except json.JSONDecodeError as e:
    raise DataError(f"{path}:{e.lineno}:{e.colno}: invalid JSON ({e.msg})") from None


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
      raise DataError(f"{type(self).__name__} reads a folder of your own: pass raw_dir=")
    super().__init__(raw_dir=raw_dir, **kwargs)


def decode(value: Any) -> Any:
  """TFDS data-source values -> plain Python (bytes -> str, arrays -> lists, recursively)."""
  if isinstance(value, bytes):
    return value.decode("utf-8")
  if isinstance(value, dict):
    return {k: decode(v) for k, v in value.items()}
  if isinstance(value, np.ndarray):
    if value.dtype.kind in "SO":
      return [decode(v) for v in value.tolist()]
    return value.tolist() if value.ndim else value.item()
  if isinstance(value, (list, tuple)):
    return [decode(v) for v in value]
  if isinstance(value, np.generic):
    return value.item()
  return value


def prepare(builder: tfds.core.DatasetBuilder) -> tfds.core.DatasetBuilder:
  """Builds the array_record files once (a no-op when they exist)."""
  from fewshot_nlu import console
  with console.quiet():  # TFDS's "Downloading and preparing dataset" and shuffling bars, for a few rows
    builder.download_and_prepare(file_format="array_record")
  return builder


def load_split(builder: tfds.core.DatasetBuilder, split: str) -> list[dict[str, Any]]:
  """All examples of ``split`` as decoded dicts, in raw-file order (by ``index``)."""
  source = prepare(builder).as_data_source(split=split)
  examples = []
  for start in range(0, len(source), 4096):  # batched reads: ~3x faster than one record at a time
    examples.extend(decode(e) for e in source.__getitems__(list(range(start, min(start + 4096, len(source))))))
  return sorted(examples, key=lambda e: e["index"])


def read_text_pairs(builder, split: str, separator: str) -> tuple[list[str], list[str]]:
  """(queries, responses) of a dialogue-pair split: ``dialogue_pairs``' query turns joined by
  `` <separator> `` (oldest first), or Reddit's ``context``."""
  queries, responses = [], []
  for e in load_split(builder, split):
    queries.append(f" {separator} ".join(e["query"]) if "query" in e else e["context"])
    responses.append(e["response"])
  return queries, responses
