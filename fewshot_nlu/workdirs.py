"""Work directories that may be local paths or remote URLs (``gs://bucket/runs/x`` on Cloud TPU).

Remote paths go through ``etils.epath`` (fsspec + gcsfs for ``gs://``; install ``fewshot_nlu[tpu]``); orbax
writes checkpoints there itself and tensorboardX writes event files to ``gs://`` natively. Exports are written
through ``atomic_folder``: into a temporary folder that replaces the export only once it is complete (copied up
for ``gs://``, where libraries such as safetensors and tokenizers cannot write).

A local workdir is locked for a run's life (``lock``: ``flock`` on ``<workdir>/.lock``, released by the OS when
the process ends, so a dead run's lock never blocks the next one); a second run on it is refused
(``WorkdirBusy``). Safetensors files are written through ``save_safetensors``, which gives them the mode of any
other file the run writes (``0o666`` less the umask) instead of the library's ``0o600``.

A workdir belongs to one config (``claim``): ``identity.json`` records every field that determines the trained
model (all but ``RESUMABLE_FIELDS``: evaluation, logging, checkpoint cadence, device layout) and a fingerprint
of a user's data folder. A rerun with the same identity resumes; one with another is refused before any file
is touched, naming the fields that differ, unless ``--overwrite`` (which deletes the old run's files).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import pathlib
import tempfile
from typing import Callable, Iterator, Sequence

from etils import epath

from fewshot_nlu.errors import UserError


def cache_root() -> pathlib.Path:
  """The library's own cache (``$FEWSHOT_NLU_CACHE``, default ``~/.cache/fewshot_nlu``): fit's training files,
  assembled packaged models, installed general span encoders."""
  return pathlib.Path(os.environ.get("FEWSHOT_NLU_CACHE", "~/.cache/fewshot_nlu")).expanduser()


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
def atomic_folder(target: str | os.PathLike | epath.Path) -> Iterator[pathlib.Path]:
  """A local folder to write ``target``'s files into (an export); they appear at ``target`` all at once, and only
  when the block finishes without error, so an interrupted export never leaves half a model behind.

  Local ``target``: a temporary sibling folder, renamed over ``target`` on success (an older ``target`` is
  renamed aside first and deleted after; its files stay readable until the rename). Remote ``target``
  (``gs://``): a temporary folder whose files are copied up on success. On error the temporary folder is
  deleted and ``target`` is left as it was; one left by a killed process is deleted by the next export."""
  import shutil
  if is_remote(target):
    with tempfile.TemporaryDirectory(prefix="fewshot_nlu_") as tmp:
      yield pathlib.Path(tmp)
      copy_tree(pathlib.Path(tmp), as_path(target))
    return
  target = pathlib.Path(os.fspath(target))
  target.parent.mkdir(parents=True, exist_ok=True)
  for stale in [*target.parent.glob(f".{target.name}.partial-*"), *target.parent.glob(f".{target.name}.old-*")]:
    shutil.rmtree(stale, ignore_errors=True)  # left by a process killed mid-export (the workdir lock keeps others out)
  partial = pathlib.Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
  try:
    yield partial
    partial.chmod(0o777 & ~_umask())  # mkdtemp makes it 0o700
    old = target.with_name(f".{target.name}.old-{os.getpid()}") if target.exists() else None
    if old is not None:
      os.replace(target, old)
    os.replace(partial, target)
    if old is not None:
      shutil.rmtree(old, ignore_errors=True)
  finally:
    if partial.exists():
      shutil.rmtree(partial, ignore_errors=True)


class WorkdirBusy(UserError, RuntimeError):
  """Another live process holds the workdir's lock."""


LOCK_FILE = ".lock"


@contextlib.contextmanager
def exclusive(path: pathlib.Path, busy: Callable[[str], Exception]) -> Iterator[None]:
  """Holds an exclusive ``flock`` on the file ``path`` (created if need be), which holds the holder's pid, for the
  block; raises ``busy(holder_pid)`` at once if another process holds it. A dead holder's lock is free (the
  kernel drops it with the process)."""
  path.parent.mkdir(parents=True, exist_ok=True)
  fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)  # no O_TRUNC: the holder's pid stays readable
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      raise busy(os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    try:
      yield
    finally:
      fcntl.flock(fd, fcntl.LOCK_UN)
  finally:
    os.close(fd)


@contextlib.contextmanager
def lock(workdir: str | os.PathLike) -> Iterator[None]:
  """Holds an exclusive lock on ``<workdir>/.lock`` (``exclusive``) for the block; raises ``WorkdirBusy`` at
  once, naming the holder, if another process holds it. A remote workdir (``gs://``) has no such lock: the block
  runs unlocked."""
  if is_remote(workdir):
    yield
    return
  path = pathlib.Path(workdir) / LOCK_FILE
  with exclusive(path, lambda holder: WorkdirBusy(
      f"--workdir={workdir} is in use by another run (pid {holder}, holding {path}); wait for it to finish or use "
      "another --workdir")):
    yield


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


def write_json(path, value) -> None:
  """``value`` as indented JSON at ``path``: locally a temporary file renamed over the old one, so an interrupted
  write never leaves half a file; a remote (gs://) object write is atomic already."""
  text = json.dumps(value, indent=2) + "\n"
  if isinstance(path, pathlib.Path):
    replace_file(path, text)
  else:
    path.write_text(text)


def replace_file(path: str | os.PathLike, text: str) -> None:
  """``text`` (UTF-8) written to a temporary file beside local ``path``, flushed to disk, then renamed over
  ``path``: a reader, or a process killed meanwhile, sees the old file or the new one, never part of one."""
  path = pathlib.Path(path)
  fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
  try:
    with os.fdopen(fd, "w", encoding="utf-8") as f:
      f.write(text)
      f.flush()
      os.fsync(f.fileno())
    make_readable(tmp)  # mkstemp makes it 0o600
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.unlink(tmp)
    raise


def append_record(path: str | os.PathLike, record: dict) -> None:
  """``record`` as one JSON line appended to local ``path``, flushed to disk before returning: a journal of
  finished work that a killed run leaves complete up to its last record (``read_records``). A record a kill
  cut short is dropped first, so the new one starts a line of its own."""
  path = pathlib.Path(os.fspath(path))
  if path.exists() and path.stat().st_size:
    with open(path, "r+b") as f:
      f.seek(-1, os.SEEK_END)
      if f.read(1) != b"\n":
        f.truncate(path.read_bytes().rfind(b"\n") + 1)
  with open(path, "ab") as f:
    f.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
    f.flush()
    os.fsync(f.fileno())


def read_records(path: str | os.PathLike) -> list[dict]:
  """The records ``append_record`` wrote to ``path`` (none if it does not exist), without a last line that a
  kill cut short."""
  path = pathlib.Path(os.fspath(path))
  if not path.exists():
    return []
  records = []
  for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
    if not line.endswith("\n"):
      break  # the write a kill interrupted
    if line.strip():
      records.append(json.loads(line))
  return records


def write_results(workdir, results: dict, name: str = "results.json") -> dict:
  """Writes ``results`` to ``workdir/name`` on process 0 (``write_json``); returns ``results``."""
  import jax
  if jax.process_index() == 0:
    write_json(workdir / name, results)
  # DEBUG: the command line prints the run's results once, at its end (``main.summary``)
  flat = {k: v for k, v in results.items() if not isinstance(v, (dict, list))}
  logging.getLogger(__name__).debug("results: %s", flat)
  return results


# ---------------------------------------------------------------------------------------------- identity

class WorkdirMismatch(UserError):
  """The workdir holds a run of another config (or other data) than this one."""


IDENTITY_FILE = "identity.json"
# Fields that cannot change the trained model: a run may resume under other values of these. Every other field
# (method, seed, model, data, every training and method field) is part of the workdir's identity.
RESUMABLE_FIELDS = ("compilation_cache_dir", "distributed.", "eval.", "mesh.", "sharding.", "data.tfds_dir",
                    "data.eval_split", "train.save_every", "train.keep_checkpoints", "train.log_every")
RUN_FILES = ("config.json", IDENTITY_FILE, "checkpoints")  # any of these: the folder holds a run


def _flat(node: dict) -> dict:
  """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
  from flax import traverse_util
  return traverse_util.flatten_dict(node, sep=".")


def _model_fields(flat: dict) -> dict:
  return {k: v for k, v in flat.items() if not any(k == f or k.startswith(f) for f in RESUMABLE_FIELDS)}


def identity(config) -> dict:
  """What determines the trained model: every config field but ``RESUMABLE_FIELDS`` (JSON values), and a
  fingerprint of the user's own data files (path, names, sizes, modification times): those the data's reader
  takes examples from (``annotated.files_read``: a Rasa project's NLU files, not its stories)."""
  from fewshot_nlu.data import annotated
  fields = _model_fields(_flat(json.loads(config.to_json_best_effort())))
  local = [pathlib.Path(fields[f]).expanduser() for f in DATA_PATH_FIELDS
           if fields.get(f) and not is_remote(fields[f]) and pathlib.Path(fields[f]).expanduser().exists()]
  data = ",".join(path_fingerprint(path, annotated.files_read(path)) for path in local) or None
  return {"fields": fields, "data_fingerprint": data}


DATA_PATH_FIELDS = ("data.raw_dir", "data.train", "data.eval")  # a user's own data: folders or files


def path_fingerprint(path: pathlib.Path, files: Sequence[pathlib.Path] | None = None) -> str:
  """sha1 over the absolute path and, for a file or every file of a folder (or ``files``, those of the folder
  that matter), its relative path, size and mtime: cheap (stats only), and different once a file changes."""
  path = pathlib.Path(path)
  digest = hashlib.sha1(str(path.resolve()).encode())
  if files is None:
    files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path] if path.is_file() else []
  for file in sorted(files):
    stat = file.stat()
    digest.update(f"{file.relative_to(path) if path.is_dir() else file.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
  return digest.hexdigest()[:16]


def _recorded_identity(workdir) -> dict | None:
  """The identity the workdir's run recorded: ``identity.json``, else (a run of an older version) the fields of
  its ``config.json``; None for a folder without a run. ``fields`` is None (and ``problem`` says why) when the
  record cannot be read or is missing beside checkpoints."""
  for name in (IDENTITY_FILE, "config.json"):
    path = workdir / name
    if path.exists():
      try:
        recorded = json.loads(path.read_text())
      except (OSError, ValueError) as e:
        return {"fields": None, "problem": f"{path} is unreadable ({e})"}
      if name == IDENTITY_FILE:
        return recorded
      return {"fields": _model_fields(_flat(recorded)), "data_fingerprint": None}
  if (workdir / "checkpoints").exists():
    return {"fields": None, "problem": "the workdir holds checkpoints but no config.json (a run whose config is "
                                       "unknown)"}
  return None


def differences(recorded: dict, current: dict) -> list[str]:
  """The fields (and data) whose values differ, as ``config.<field>: <recorded> -> <current>``."""
  if recorded["fields"] is None:
    return [recorded["problem"]]
  out = []
  for key in sorted(set(recorded["fields"]) | set(current["fields"])):
    before, now = recorded["fields"].get(key, "(absent)"), current["fields"].get(key, "(absent)")
    if before != now:
      out.append(f"config.{key}: {json.dumps(before)} -> {json.dumps(now)}")
  if recorded.get("data_fingerprint") and current["data_fingerprint"] \
      and recorded["data_fingerprint"] != current["data_fingerprint"]:
    named = "; ".join(f"config.{f}={current['fields'][f]}" for f in DATA_PATH_FIELDS if current["fields"].get(f))
    out.append(f"the files of {named} changed since the run began (names, sizes or modification times)")
  return out


def claim(workdir, config, overwrite: bool = False) -> bool:
  """Makes ``workdir`` this config's: a new or empty folder gets ``identity.json``; a folder holding a run of the
  same identity is resumed (only ``RESUMABLE_FIELDS`` may differ); one of another identity (or whose record is
  unreadable) is refused before any file is touched (``WorkdirMismatch`` naming the fields that differ), unless
  ``overwrite``, which deletes that run's files and starts afresh. Call it holding the workdir's lock, on
  process 0. Returns whether the folder is newly this config's (False: it held a run of the same identity already)."""
  workdir = as_path(workdir) if is_remote(workdir) else pathlib.Path(workdir)
  current = identity(config)
  recorded = _recorded_identity(workdir) if workdir.exists() else None
  if recorded is not None:
    changed = differences(recorded, current)
    if changed and not overwrite:
      shown = changed[:8] + ([f"... and {len(changed) - 8} more"] if len(changed) > 8 else [])
      raise WorkdirMismatch(
          f"--workdir={workdir} holds a run of another config, so resuming it would report one model under "
          f"another's config: {'; '.join(shown)}; use a new --workdir, or add --overwrite to delete that run and "
          "start afresh")
    if changed:
      logging.getLogger(__name__).warning("--overwrite: deleting the run in %s (%s)", workdir, "; ".join(changed))
      clear(workdir)
  elif overwrite and workdir.exists() and any(p.name != LOCK_FILE for p in workdir.iterdir()):
    raise WorkdirMismatch(f"--workdir={workdir}: --overwrite deletes only a folder holding a run (one of "
                          f"{', '.join(RUN_FILES)}), and this one holds other files; use another --workdir")
  workdir.mkdir(parents=True, exist_ok=True)
  write_json(workdir / IDENTITY_FILE, {**current, "fields": dict(sorted(current["fields"].items()))})
  return recorded is None or bool(differences(recorded, current))


def _has_checkpoint(workdir) -> bool:
  """Whether ``workdir/checkpoints`` holds a saved step (a run to resume)."""
  folder = workdir / "checkpoints"
  return folder.exists() and any(p.name.isdigit() for p in folder.iterdir())


def release(workdir) -> None:
  """Gives back a workdir that ``claim`` made this config's and whose run then failed before its first
  checkpoint: its files are deleted (the lock file stays), so the next run there starts afresh whatever its
  config. A workdir holding a checkpoint is kept."""
  workdir = as_path(workdir) if is_remote(workdir) else pathlib.Path(workdir)
  if workdir.exists() and not _has_checkpoint(workdir):
    clear(workdir)


def clear(workdir) -> None:
  """Deletes everything in the run folder ``workdir`` but its lock file."""
  import shutil
  for path in workdir.iterdir():
    if path.name == LOCK_FILE:
      continue
    if isinstance(path, pathlib.Path):
      shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    else:
      path.rmtree() if path.is_dir() else path.unlink()
