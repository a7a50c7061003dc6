"""Wires params, optimizer, mesh and shardings into a ready-to-run train state and step."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import ml_collections
from jax.sharding import Mesh

from fewshot_nlu import sharding
from fewshot_nlu.encoders import frozen_prefix
from fewshot_nlu.train import optimizer as optimizer_lib
from fewshot_nlu.train.state import TrainState, state_specs
from fewshot_nlu.train.step import GradsFn, LossFn, make_train_step


@dataclasses.dataclass
class Training:
  init_state: Callable[[], TrainState]  # builds the sharded initial state (not called on resume)
  abstract_state: TrainState  # ShapeDtypeStructs with shardings: the restore template
  shardings: TrainState
  step: Any  # the jitted step
  schedule: Any


def build_training(params: Any, logical_axes: Any, loss_fn: LossFn, total_steps: int, mesh: Mesh,
                   config: ml_collections.ConfigDict, grads_fn: GradsFn | None = None) -> Training:
  """Uses ``config.train`` (optimizer), ``config.sharding`` (rules) and ``config.seed``. What the layers above
  a frozen prefix carry read-only (``frozen_prefix.read_only_patterns``) is frozen as ``train.frozen`` is."""
  t = config.train
  tx, schedule = optimizer_lib.make_optimizer(
      params, learning_rate=t.learning_rate, total_steps=total_steps,
      warmup_fraction=t.warmup_fraction, decay=t.decay, weight_decay=t.weight_decay,
      grad_clip_norm=t.grad_clip_norm or None, trainable=tuple(t.trainable) or None,
      frozen=tuple(t.frozen) + frozen_prefix.read_only_patterns(params.get("encoder", {})),
      group_learning_rates=tuple((str(g), float(r)) for g, r in t.get("group_learning_rates", ())))
  specs = sharding.param_specs(params, logical_axes, mesh, rules=tuple(map(tuple, config.sharding.rules)))
  sharding.log_param_shardings(specs)
  shapes = jax.eval_shape(lambda p: TrainState.create(p, tx), params)
  shardings = sharding.shardings_from_specs(state_specs(shapes, specs), mesh)

  def init_state() -> TrainState:
    placed = sharding.place(params, shardings.params)
    return jax.jit(lambda p: TrainState.create(p, tx), out_shardings=shardings)(placed)

  abstract = jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), shapes, shardings)
  step = make_train_step(loss_fn, tx, schedule, mesh, shardings, seed=config.seed, grads_fn=grads_fn)
  return Training(init_state, abstract, shardings, step, schedule)
