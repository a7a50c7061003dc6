"""Orbax checkpoints in ``<workdir>/checkpoints``: train state plus the data iterator's position.

Saves are atomic (orbax writes to a temporary directory and renames on completion), so a kill mid-save leaves
the previous checkpoint as the latest. Restoring returns arrays with the shardings of the given template.
"""

from __future__ import annotations

import pathlib
from typing import Any

import orbax.checkpoint as ocp

from fewshot_nlu import workdirs


class Checkpointer:

  def __init__(self, workdir: str | pathlib.Path, save_every: int, keep: int = 2,
               async_save: bool = True):
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

