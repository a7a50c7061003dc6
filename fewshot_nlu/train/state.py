"""Train state and its shardings."""

from __future__ import annotations

from typing import Any

import flax
import jax
import optax
from jax.sharding import PartitionSpec as P


@flax.struct.dataclass
class TrainState:
  """Everything a step changes. Dropout keys are derived from (seed, step), so no rng is carried."""

  step: jax.Array
  params: Any
  opt_state: Any

  @classmethod
  def create(cls, params: Any, tx: optax.GradientTransformation) -> "TrainState":
    return cls(step=jax.numpy.zeros((), jax.numpy.int32), params=params, opt_state=tx.init(params))


def _dict_keys(path) -> tuple[str, ...]:
  return tuple(str(k.key) for k in path if isinstance(k, jax.tree_util.DictKey))


def state_specs(state_shapes: TrainState, param_specs: Any) -> TrainState:
  """PartitionSpecs for a whole TrainState: optimizer moments follow their parameter's spec (matched by the
  trailing parameter path inside the optimizer state and by shape), everything else is replicated."""
  flat_params = {p: s for p, s in jax.tree_util.tree_flatten_with_path(
      param_specs, is_leaf=lambda x: isinstance(x, P))[0]}
  by_keys = {_dict_keys(p): s for p, s in flat_params.items()}
  param_shapes = {_dict_keys(p): leaf.shape
                  for p, leaf in jax.tree_util.tree_flatten_with_path(state_shapes.params)[0]}

  def opt_spec(path, leaf):
    keys = _dict_keys(path)
    for n in range(len(keys), 0, -1):
      suffix = keys[-n:]
      if suffix in by_keys and param_shapes[suffix] == getattr(leaf, "shape", None):
        return by_keys[suffix]
    return P()

  opt = jax.tree_util.tree_map_with_path(opt_spec, state_shapes.opt_state)
  return TrainState(step=P(), params=param_specs, opt_state=opt)
