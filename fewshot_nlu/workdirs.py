"""Work directories that may be local paths or remote URLs (``gs://bucket/runs/x`` on Cloud TPU).

Remote paths go through ``etils.epath`` (fsspec + gcsfs for ``gs://``; install ``fewshot_nlu[tpu]``); orbax
writes checkpoints there itself and tensorboardX writes event files to ``gs://`` natively. Files that a
library can only write locally (safetensors, tokenizers) are written to a temporary folder and copied up.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import tempfile
from typing import Iterator

from etils import epath


def as_path(workdir: str | os.PathLike) -> epath.Path:
  return epath.Path(workdir)


def is_remote(path: str | os.PathLike) -> bool:
  return "://" in os.fspath(path)


def copy_tree(source: pathlib.Path, target: epath.Path) -> None:
  """Copies the files under local ``source`` to ``target`` (local or remote), keeping the layout."""
  for file in sorted(p for p in pathlib.Path(source).rglob("*") if p.is_file()):
    destination = target / file.relative_to(source).as_posix()
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_bytes(file.read_bytes())


@contextlib.contextmanager
def local_folder(target: epath.Path) -> Iterator[pathlib.Path]:
  """A local folder to write ``target``'s files into: ``target`` itself when it is local, else a temporary
  folder whose files are copied to ``target`` on exit (only when the block finished without error)."""
  if not is_remote(target):
    local = pathlib.Path(os.fspath(target))
    local.mkdir(parents=True, exist_ok=True)
    yield local
    return
  with tempfile.TemporaryDirectory(prefix="fewshot_nlu_") as tmp:
    yield pathlib.Path(tmp)
    copy_tree(pathlib.Path(tmp), target)


def write_results(workdir, results: dict, name: str = "results.json") -> dict:
  """Writes ``results`` as indented JSON to ``workdir/name`` on process 0 (a temporary file renamed over the
  old one, so an interrupted write never leaves half a file); returns ``results``."""
  import jax
  if jax.process_index() == 0:
    path = workdir / name
    text = json.dumps(results, indent=2) + "\n"
    if isinstance(path, pathlib.Path):
      tmp = path.with_name(f".{name}.tmp")
      tmp.write_text(text)
      os.replace(tmp, path)
    else:  # a remote (gs://) path: object writes are atomic already
      path.write_text(text)
  logging.getLogger(__name__).info("results: %s", {k: v for k, v in results.items() if not isinstance(v, (dict, list))})
  return results
