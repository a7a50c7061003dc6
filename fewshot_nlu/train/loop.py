"""The training loop: resume, step, log, checkpoint, survive interruption, stop when training diverges.

Divergence is checked where values reach the host anyway, so the loop adds no per-step sync: the logged
metrics (``loss``, ``grad_norm``) at each log step, and the parameters before each checkpoint save and at the
end (a save copies the state to the host already). A non-finite value raises ``TrainingDiverged`` naming the
step, before that state is checkpointed or returned, so nothing diverged is saved or exported.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from fewshot_nlu import console, sharding
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.errors import UserError
from fewshot_nlu.train.checkpoint import Checkpointer
from fewshot_nlu.train.setup import Training
from fewshot_nlu.train.metrics import MetricWriter

log = logging.getLogger(__name__)

CHECKED_METRICS = ("loss", "grad_norm")  # the metrics that must stay finite
DEFAULT_HINT = "lower train.learning_rate"


class TrainingDiverged(UserError, RuntimeError):
  """The loss, gradient norm or parameters became NaN / inf; the run stops and exports nothing."""


def check_metrics(first_step: int, pending: list[dict], hint: str = DEFAULT_HINT) -> None:
  """Raises ``TrainingDiverged`` at the first of ``pending`` (the metrics of steps ``first_step``, ``first_step
  + 1``, ...; values already on the host) whose loss or gradient norm is not finite."""
  for offset, metrics in enumerate(pending):
    values = {k: float(np.asarray(metrics[k])) for k in CHECKED_METRICS if k in metrics}
    bad = {k: v for k, v in values.items() if not np.isfinite(v)}
    if bad:
      found = ", ".join(f"{k} is {v}" for k, v in bad.items())
      raise TrainingDiverged(f"training diverged at step {first_step + offset}: {found}; {hint}; "
                             "nothing was checkpointed or exported from this step on")


def make_params_check(mesh) -> Callable[[Any], jax.Array]:
  """``all_finite(params)``: one replicated boolean, whether every float in ``params`` is finite."""
  def all_finite(params):
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(params) if jnp.issubdtype(x.dtype, jnp.inexact)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)
  return jax.jit(all_finite, out_shardings=sharding.replicated(mesh))


def check_params(all_finite, step: int, state, hint: str = DEFAULT_HINT) -> None:
  if not bool(jax.device_get(all_finite(state.params))):
    raise TrainingDiverged(f"training diverged at step {step}: the parameters are not finite (NaN / inf); "
                           f"{hint}; nothing was checkpointed or exported from this step on")


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
          callback: Callable[[int, Any], bool] | None = None, callback_every: int = 0,
          divergence_hint: str = DEFAULT_HINT) -> Any:
  """Runs ``training.step`` until ``total_steps``, resuming from the newest checkpoint that restores, if any.

  ``callback(step, state)`` runs every ``callback_every`` steps and at the last step (e.g. a development-set
  evaluation keeping the best model); when it returns True, training stops there (early stopping), with a
  checkpoint of that step.

  Checkpoints (state + stream position) every ``save_every`` steps (the checkpointer's interval), at the end,
  and on KeyboardInterrupt / SIGTERM before re-raising. Returns the final state. Raises ``TrainingDiverged``
  (its message ending in ``divergence_hint``) when a logged loss / gradient norm, or the parameters at a save or
  at the end, are not finite.
  """
  restored = checkpointer.restore_newest(training.abstract_state)
  if restored is not None:
    latest, state, data_state = restored
    stream.set_state(data_state)
    writer.truncate_after(latest)
    log.info("resumed from step %d (epoch %d, batch %d)", latest, stream.epoch, stream.batch)
  else:
    writer.discard_earlier()  # an attempt killed before its first checkpoint: its steps are redone
    state = training.init_state()
  step = int(jax.device_get(state.step))
  data_state = stream.get_state()  # position after the last *completed* step
  pending: list[dict] = []
  all_finite = make_params_check(mesh)
  checked = -1  # the last step whose parameters were checked

  def require_finite_params():
    nonlocal checked
    if checked != step:
      check_params(all_finite, step, state, divergence_hint)
      checked = step
  bar = console.bar(total=total_steps, initial=step, desc=description, unit="step", dynamic_ncols=True)

  def log_pending():
    nonlocal pending
    if pending:
      fetched, pending = jax.device_get(pending), []
      means = {k: float(np.mean([m[k] for m in fetched])) for k in fetched[0]}
      writer.write(step, means, prefix="train/")
      bar.set_postfix(loss=f"{means['loss']:.4f}", lr=f"{means['learning_rate']:.2e}")
      check_metrics(step - len(fetched) + 1, fetched, divergence_hint)

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
        force = step == total_steps or stop
        if force or checkpointer.should_save(step):
          require_finite_params()
        checkpointer.save(step, state, data_state, force=force)
        if stop:
          log.info("stopping early at step %d", step)
          break
  except KeyboardInterrupt:
    log.warning("interrupted at step %d: saving a checkpoint before stopping", step)
    try:
      log_pending()
      if checkpointer.latest_step() != step:
        require_finite_params()
        checkpointer.save(step, state, data_state, force=True)
      checkpointer.wait()
    except Exception as e:  # e.g. the interrupt hit while the state's buffers were donated to a step
      log.error("could not save at step %d (%s); the latest periodic checkpoint stands", step, e)
    raise
  finally:
    bar.close()
  checkpointer.wait()
  require_finite_params()  # also when nothing was left to train (a resumed run's restored state)
  return state
