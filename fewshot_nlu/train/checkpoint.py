"""Orbax checkpoints in ``<workdir>/checkpoints``: train state plus the data iterator's position.

Saves are atomic (orbax writes to a temporary directory and renames on completion), so a kill mid-save leaves
the previous checkpoint as the latest. Restoring returns arrays with the shardings of the given template.
``restore_newest`` falls back past checkpoints that do not restore (a truncated file, empty metadata, a disk that
filled up mid-write by another tool): each one skipped is logged with the reason and moved aside to
``<workdir>/checkpoints.skipped/`` (kept for a person to look at, out of orbax's way).
"""

from __future__ import annotations

import logging
import pathlib
import shutil
import time
from typing import Any

import jax
import orbax.checkpoint as ocp

from fewshot_nlu import workdirs
from fewshot_nlu.errors import UserError

log = logging.getLogger(__name__)


class CheckpointUnreadable(UserError, RuntimeError):
  """No checkpoint in the workdir restores."""


_ARRAY_HANDLERS: dict[bool, Any] = {}  # use_replica_parallel -> the orbax handler registered with it


class _RegistryOverrideNotice(logging.Filter):
  """Drops orbax's warning that a type handler was replaced: here that is the point."""

  def filter(self, record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("Type handler registry")


def _write_replicated_arrays_whole_in_one_process() -> None:
  """Orbax's jax.Array writer splits an array replicated over several devices into one slice per replica so
  that each replica's host writes a part (``use_replica_parallel``, its default off GPU). In one process the
  same host writes every part, so the split only adds an eager slice per array and replica: 6% of a tiny-model
  ConvFiT test with 8 host devices and saves every 2 steps. It stays on across processes, where it spreads the
  writing; either way the checkpoint restores the same arrays. Orbax keeps one handler per type for the process:
  registered once, without its warning."""
  parallel = jax.process_count() > 1
  handler = _ARRAY_HANDLERS.get(parallel)
  if handler is not None and ocp.type_handlers.get_type_handler(jax.Array) is handler:
    return
  handler = _ARRAY_HANDLERS.setdefault(parallel, ocp.type_handlers.ArrayHandler(use_replica_parallel=parallel))
  notice, absl_log = _RegistryOverrideNotice(), logging.getLogger("absl")
  absl_log.addFilter(notice)
  try:
    ocp.type_handlers.register_type_handler(jax.Array, handler, override=True)
  finally:
    absl_log.removeFilter(notice)


class Checkpointer:

  def __init__(self, workdir: str | pathlib.Path, save_every: int, keep: int = 2,
               async_save: bool = True):
    _write_replicated_arrays_whole_in_one_process()
    directory = f"{workdir}/checkpoints" if workdirs.is_remote(workdir) \
        else pathlib.Path(workdir).absolute() / "checkpoints"
    self.manager = ocp.CheckpointManager(
        directory,
        options=ocp.CheckpointManagerOptions(
            save_interval_steps=max(save_every, 1), max_to_keep=keep,
            enable_async_checkpointing=async_save, create=True))

  def latest_step(self) -> int | None:
    return self.manager.latest_step()

  def restore(self, abstract_state: Any, step: int | None = None) -> tuple[Any, dict]:
    """(state, data_state) from ``step`` (default: latest). ``abstract_state`` holds ShapeDtypeStructs with
    shardings, e.g. ``jax.eval_shape`` output with ``.sharding`` set."""
    step = self.latest_step() if step is None else step
    restored = self.manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract_state), data=ocp.args.JsonRestore()))
    return restored.state, restored.data

  def restore_newest(self, abstract_state: Any) -> tuple[int, Any, dict] | None:
    """``(step, state, data_state)`` of the newest checkpoint that restores cleanly, or None when there is none
    at all. A newer one that fails is logged (step, path, reason), moved aside (local workdirs) and skipped;
    raises ``CheckpointUnreadable`` naming every failure when none restores."""
    failures = []
    for step in sorted(self.manager.all_steps(), reverse=True):
      try:
        state, data_state = self.restore(abstract_state, step)
      except Exception as e:  # orbax raises whatever its reader met: OSError, ValueError, JSONDecodeError, ...
        reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        path = f"{self.manager.directory}/{step}"
        failures.append(f"step {step} ({path}): {reason}")
        log.warning("checkpoint of step %d (%s) does not restore (%s); trying the previous one", step, path, reason)
        self._set_aside(step)
        continue
      if failures:
        log.warning("resuming from step %d; skipped: %s", step, "; ".join(failures))
      return step, state, data_state
    if failures:
      raise CheckpointUnreadable(f"no checkpoint under {self.manager.directory} restores: " + "; ".join(failures)
                                 + "; rerun with --overwrite to start afresh")
    return None

  def _set_aside(self, step: int) -> None:
    """Moves a local step directory that does not restore to ``checkpoints.skipped/<step>-<time>``."""
    directory = pathlib.Path(str(self.manager.directory))
    source = directory / str(step)
    if workdirs.is_remote(str(self.manager.directory)) or not source.exists():
      return
    target = directory.parent / "checkpoints.skipped" / f"{step}-{time.strftime('%Y%m%d-%H%M%S')}"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(source), str(target))
    self.manager.reload()

  def should_save(self, step: int) -> bool:
    """Whether ``save(step, ...)`` without ``force`` would save (the interval has come round)."""
    return self.manager.should_save(step)

  def save(self, step: int, state: Any, data_state: dict, force: bool = False) -> bool:
    return self.manager.save(step, args=ocp.args.Composite(
        state=ocp.args.StandardSave(state), data=ocp.args.JsonSave(data_state)), force=force)

  def wait(self) -> None:
    self.manager.wait_until_finished()

  def close(self) -> None:
    self.manager.wait_until_finished()
    self.manager.close()

