"""The jitted train step, with explicit in/out shardings over the mesh."""

from __future__ import annotations

from typing import Any, Callable

import jax
import optax
from jax.sharding import Mesh

from fewshot_nlu import sharding
from fewshot_nlu.train.state import TrainState

# loss_fn(params, batch, rng) -> (scalar loss, dict of scalar metrics). ``batch`` is the GLOBAL batch.
LossFn = Callable[[Any, dict[str, jax.Array], jax.Array], tuple[jax.Array, dict[str, jax.Array]]]
# grads_fn(params, batch, rng) -> (loss, metrics, grads): for losses that compute their own gradients
# (e.g. gradient-cached MNEG, ``losses.ranking.cached_mneg_loss_and_grads``).
GradsFn = Callable[[Any, dict[str, jax.Array], jax.Array], tuple[jax.Array, dict[str, jax.Array], Any]]


def step_rng(seed: int, step: jax.Array) -> jax.Array:
  """Per-step randomness (dropout, masking) from (seed, step): identical after a resume."""
  return jax.random.fold_in(jax.random.key(seed), step)


def loss_and_grads(loss_fn: LossFn, params, batch, rng):
  (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch, rng)
  return loss, aux, grads


def make_train_step(loss_fn: LossFn, tx: optax.GradientTransformation, schedule: optax.Schedule,
                    mesh: Mesh, state_shardings: TrainState, seed: int = 0, grads_fn: GradsFn | None = None):
  """``step(state, batch) -> (state, metrics)``, jitted: state sharded by ``state_shardings``, batch split over
  the data axes, metrics replicated. The state argument is donated. ``grads_fn``, if given, replaces
  ``jax.value_and_grad(loss_fn)``."""
  if grads_fn is None:
    grads_fn = lambda params, batch, rng: loss_and_grads(loss_fn, params, batch, rng)  # noqa: E731

  def step(state: TrainState, batch):
    loss, aux, grads = grads_fn(state.params, batch, step_rng(seed, state.step))
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {"loss": loss, "grad_norm": optax.global_norm(grads),
               "learning_rate": schedule(state.step), **aux}
    return state.replace(step=state.step + 1, params=params, opt_state=opt_state), metrics

  return jax.jit(step, in_shardings=(state_shardings, sharding.batch_sharding(mesh)),
                 out_shardings=(state_shardings, sharding.replicated(mesh)), donate_argnums=(0,))
