"""AdamW with linear warm-up and linear / cosine / constant decay, clipping, and freezing by regex."""

from __future__ import annotations

import re
from typing import Any, Sequence

import flax
import jax
import optax

DECAYS = ("linear", "cosine", "constant")


def make_schedule(learning_rate: float, total_steps: int, warmup_fraction: float = 0.1,
                  decay: str = "linear") -> optax.Schedule:
  """Linear warm-up from 0 over ``warmup_fraction * total_steps``, then ``decay`` to 0 at ``total_steps``."""
  if decay not in DECAYS:
    raise ValueError(f"decay={decay!r} unknown; choose one of {DECAYS}")
  warmup = int(round(warmup_fraction * total_steps))
  rest = max(total_steps - warmup, 1)
  if decay == "cosine":
    after = optax.cosine_decay_schedule(learning_rate, rest)
  elif decay == "linear":
    after = optax.linear_schedule(learning_rate, 0.0, rest)
  else:
    after = optax.constant_schedule(learning_rate)
  if warmup == 0:
    return after
  return optax.join_schedules([optax.linear_schedule(0.0, learning_rate, warmup), after], [warmup])


def _paths(params: Any) -> dict[tuple[str, ...], str]:
  return {p: "/".join(p) for p in flax.traverse_util.flatten_dict(params)}


def freeze_labels(params: Any, trainable: Sequence[str] | None = None,
                  frozen: Sequence[str] = ()) -> Any:
  """'train' / 'freeze' per parameter. A param trains if it matches a ``trainable`` regex (all do when
  ``trainable`` is None) and no ``frozen`` regex. Regexes are matched in full against ``a/b/kernel``."""
  train_res = [re.compile(p) for p in trainable] if trainable is not None else None
  frozen_res = [re.compile(p) for p in frozen]
  labels = {}
  for path, name in _paths(params).items():
    trains = train_res is None or any(r.fullmatch(name) for r in train_res)
    labels[path] = "train" if trains and not any(r.fullmatch(name) for r in frozen_res) else "freeze"
  if train_res is not None and "train" not in labels.values():
    raise ValueError(f"no parameter matches trainable={list(trainable)} (minus frozen={list(frozen)})")
  return flax.traverse_util.unflatten_dict(labels)


def weight_decay_mask(params: Any) -> Any:
  """Decay matrices only; biases and LayerNorm scales are not decayed (as in BERT / sentence-transformers)."""
  def decays(path, _) -> bool:
    keys = [str(getattr(k, "key", getattr(k, "idx", k))) for k in path]
    return not (keys[-1] == "bias" or "norm" in "/".join(keys[:-1]).lower())

  return jax.tree_util.tree_map_with_path(decays, params)


def group_labels(params: Any, groups: Sequence[str], trainable: Sequence[str] | None = None,
                 frozen: Sequence[str] = ()) -> Any:
  """Per parameter: 'freeze' (see ``freeze_labels``), else ``group_<k>`` for the first of the ``groups``
  regexes that matches its ``a/b/kernel`` path in full, else 'default'."""
  frozen_labels = flax.traverse_util.flatten_dict(freeze_labels(params, trainable, frozen))
  group_res = [re.compile(g) for g in groups]
  labels = {}
  for path, name in _paths(params).items():
    match = next((k for k, r in enumerate(group_res) if r.fullmatch(name)), None)
    labels[path] = ("freeze" if frozen_labels[path] == "freeze" else
                    "default" if match is None else f"group_{match}")
  for k, g in enumerate(groups):
    if f"group_{k}" not in labels.values():
      raise ValueError(f"learning-rate group {g!r} matches no trainable parameter")
  return flax.traverse_util.unflatten_dict(labels)


def make_optimizer(params: Any, *, learning_rate: float, total_steps: int, warmup_fraction: float = 0.1,
                   decay: str = "linear", weight_decay: float = 0.01, grad_clip_norm: float | None = None,
                   trainable: Sequence[str] | None = None, frozen: Sequence[str] = (),
                   group_learning_rates: Sequence[tuple[str, float]] = ()
                   ) -> tuple[optax.GradientTransformation, optax.Schedule]:
  """The optimizer and its (default) schedule. Frozen params get zero updates, so they stay bit-identical.
  ``group_learning_rates``: (regex, learning rate) pairs; a parameter whose path matches a regex (the first
  that does) trains with that peak rate (same warm-up and decay), e.g. DSE's head at 3e-4 beside the encoder
  at 3e-6. Gradient clipping is over the global norm of all trainable gradients together."""
  def adamw(rate):
    return optax.adamw(make_schedule(rate, total_steps, warmup_fraction, decay), weight_decay=weight_decay,
                       mask=weight_decay_mask)

  schedule = make_schedule(learning_rate, total_steps, warmup_fraction, decay)
  clip = [optax.clip_by_global_norm(grad_clip_norm)] if grad_clip_norm else []
  if not group_learning_rates:
    tx = optax.chain(*clip, adamw(learning_rate))
    if trainable is not None or frozen:
      tx = optax.multi_transform({"train": tx, "freeze": optax.set_to_zero()},
                                 freeze_labels(params, trainable, frozen))
    return tx, schedule
  labels = group_labels(params, [g for g, _ in group_learning_rates], trainable, frozen)
  rates = {"default": learning_rate, **{f"group_{k}": rate for k, (_, rate) in enumerate(group_learning_rates)}}
  zero_frozen = optax.multi_transform({"freeze": optax.set_to_zero(), **{g: optax.identity() for g in rates}},
                                      labels)
  per_group = optax.multi_transform({"freeze": optax.set_to_zero(), **{g: adamw(r) for g, r in rates.items()}},
                                    labels)
  return optax.chain(zero_frozen, *clip, per_group), schedule
