"""Work directories that may be local paths or remote URLs (``gs://bucket/runs/x`` on Cloud TPU).

Remote paths go through ``etils.epath`` (fsspec + gcsfs for ``gs://``; install ``fewshot_nlu[tpu]``); orbax
writes checkpoints there itself and tensorboardX writes event files to ``gs://`` natively. Files that a
library can only write locally (safetensors, tokenizers) are written to a temporary folder and copied up.

A local workdir is locked for a run's life (``lock``: ``flock`` on ``<workdir>/.lock``, released by the OS when
the process ends, so a dead run's lock never blocks the next one); a second run on it is refused
(``WorkdirBusy``). Safetensors files are written through ``save_safetensors``, which gives them the mode of any
other file the run writes (``0o666`` less the umask) instead of the library's ``0o600``.
"""

from __future__ import annotations

import contextlib
import fcntl
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


class WorkdirBusy(RuntimeError):
  """Another live process holds the workdir's lock."""


LOCK_FILE = ".lock"


@contextlib.contextmanager
def lock(workdir: str | os.PathLike) -> Iterator[None]:
  """Holds an exclusive ``flock`` on ``<workdir>/.lock`` (created with the workdir if need be) for the block,
  the file holding the holder's pid; raises ``WorkdirBusy`` at once, naming the holder, if another process holds
  it. A remote workdir (``gs://``) has no such lock: the block runs unlocked."""
  if is_remote(workdir):
    yield
    return
  path = pathlib.Path(workdir) / LOCK_FILE
  path.parent.mkdir(parents=True, exist_ok=True)
  fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)  # no O_TRUNC: the holder's pid stays readable
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
      raise WorkdirBusy(f"--workdir={workdir} is in use by another run (pid {holder}, holding {path}); wait "
                        "for it to finish or use another --workdir") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    try:
      yield
    finally:
      fcntl.flock(fd, fcntl.LOCK_UN)
  finally:
    os.close(fd)


def _umask() -> int:
  """The process umask, read without changing it where Linux shows it (``os.umask`` sets it, racing threads
  that create files meanwhile, e.g. orbax's)."""
  try:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
      if line.startswith("Umask:"):
        return int(line.split()[1], 8)
  except OSError:
    pass
  mask = os.umask(0o022)
  os.umask(mask)
  return mask


def make_readable(path: str | os.PathLike) -> None:
  """Gives ``path`` the mode a plain ``open(path, "w")`` would: ``0o666`` less the umask."""
  os.chmod(path, 0o666 & ~_umask())


def save_safetensors(tensors: dict, path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
  """``safetensors.numpy.save_file``, then the file made readable like the run's other files (safetensors
  writes ``0o600``, which other users of a shared export cannot read). Every safetensors file is written here."""
  from safetensors.numpy import save_file
  save_file(tensors, os.fspath(path), metadata=metadata)
  make_readable(path)


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
