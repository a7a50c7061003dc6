"""The training loop: resume, step, log, checkpoint, survive interruption."""

from __future__ import annotations

import contextlib
import logging
import signal
from typing import Any, Callable

import jax
import numpy as np
import tqdm

from fewshot_nlu import sharding
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.train.checkpoint import Checkpointer
from fewshot_nlu.train.setup import Training
from fewshot_nlu.train.metrics import MetricWriter

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _sigterm_as_interrupt():
  """Preemption (SIGTERM, e.g. a TPU VM maintenance event) is handled like Ctrl-C: checkpoint, then stop."""
  def handler(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")
  try:
    previous = signal.signal(signal.SIGTERM, handler)
  except ValueError:  # not the main thread
    yield
    return
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, previous)


def train(*, training: Training, stream: EpochStream,
          total_steps: int, mesh, checkpointer: Checkpointer, writer: MetricWriter,
          log_every: int = 10, description: str = "train",
          callback: Callable[[int, Any], bool] | None = None, callback_every: int = 0) -> Any:
  """Runs ``training.step`` until ``total_steps``, resuming from the latest checkpoint if there is one.

  ``callback(step, state)`` runs every ``callback_every`` steps and at the last step (e.g. a development-set
  evaluation keeping the best model); when it returns True, training stops there (early stopping), with a
  checkpoint of that step.

  Checkpoints (state + stream position) every ``save_every`` steps (the checkpointer's interval), at the end,
  and on KeyboardInterrupt / SIGTERM before re-raising. Returns the final state.
  """
  latest = checkpointer.latest_step()
  if latest is not None:
    state, data_state = checkpointer.restore(training.abstract_state, latest)
    stream.set_state(data_state)
    writer.truncate_after(latest)
    log.info("resumed from step %d (epoch %d, batch %d)", latest, stream.epoch, stream.batch)
  else:
    state = training.init_state()
  step = int(jax.device_get(state.step))
  data_state = stream.get_state()  # position after the last *completed* step
  pending: list[dict] = []
  bar = tqdm.tqdm(total=total_steps, initial=step, desc=description, unit="step",
                  disable=jax.process_index() != 0, dynamic_ncols=True)

  def log_pending():
    nonlocal pending
    if pending:
      means = {k: float(np.mean([jax.device_get(m[k]) for m in pending])) for k in pending[0]}
      writer.write(step, means, prefix="train/")
      bar.set_postfix(loss=f"{means['loss']:.4f}", lr=f"{means['learning_rate']:.2e}")
      pending = []

  try:
    with _sigterm_as_interrupt():
      while step < total_steps:
        batch = sharding.global_batch(next(stream), mesh)
        state, metrics = training.step(state, batch)
        step += 1
        data_state = stream.get_state()
        pending.append(metrics)
        bar.update(1)
        if step % log_every == 0 or step == total_steps:
          log_pending()
        stop = (callback is not None and (step == total_steps or (callback_every and step % callback_every == 0))
                and bool(callback(step, state)))
        checkpointer.save(step, state, data_state, force=step == total_steps or stop)
        if stop:
          log.info("stopping early at step %d", step)
          break
  except KeyboardInterrupt:
    log.warning("interrupted at step %d: saving a checkpoint before stopping", step)
    try:
      log_pending()
      if checkpointer.latest_step() != step:
        checkpointer.save(step, state, data_state, force=True)
      checkpointer.wait()
    except Exception as e:  # e.g. the interrupt hit while the state's buffers were donated to a step
      log.error("could not save at step %d (%s); the latest periodic checkpoint stands", step, e)
    raise
  finally:
    bar.close()
  checkpointer.wait()
  return state
