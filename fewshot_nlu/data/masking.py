"""BERT's token masking (Devlin et al., 2018, §3.1 and ``create_pretraining_data.py``), inside jit.

QAID uses it twice (§2.1 and §3.2): as the augmentation that makes a query's two views differ (with encoder
dropout), and as the masked-language-modelling input whose masked tokens the MLM loss predicts.

Per sequence, ``max(1, round(rate * n))`` of its ``n`` maskable tokens (real tokens that are not special) are
chosen uniformly at random; each chosen token becomes [MASK] with probability 0.8, a random vocabulary token
with probability 0.1, and stays itself with probability 0.1. As in BERT's data pipeline the count per
sequence is fixed (not Bernoulli per token) and capped by ``max_predictions``, so the MLM targets have the
static shape [B, max_predictions] and the decoder runs on those positions only, never on [B, L, vocab].
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp

RATE = 0.15


class Masked(NamedTuple):
  input_ids: jax.Array  # [B, L] the corrupted tokens
  positions: jax.Array  # [B, P] positions chosen for prediction (int32)
  targets: jax.Array  # [B, P] their original token ids
  weights: jax.Array  # [B, P] 1.0 where a prediction is real, 0.0 for unused slots


def max_predictions(length: int, rate: float = RATE) -> int:
  """Prediction slots for sequences padded to ``length``: enough for ``round(rate * length)``."""
  return max(1, math.ceil(rate * length))


def bert_mask(rng: jax.Array, input_ids: jax.Array, attention_mask: jax.Array, *, mask_id: int,
              vocab_size: int, special_ids: Sequence[int], rate: float = RATE,
              num_predictions: int | None = None) -> Masked:
  """Masks ``input_ids`` [B, L] by the 80/10/10 scheme; see the module docstring."""
  input_ids = jnp.asarray(input_ids)
  batch, length = input_ids.shape
  slots = num_predictions or max_predictions(length, rate)
  choose_rng, kind_rng, random_rng = jax.random.split(rng, 3)
  maskable = attention_mask.astype(bool)
  for special in special_ids:
    maskable &= input_ids != special
  count = jnp.sum(maskable, axis=-1)
  wanted = jnp.minimum(jnp.maximum(1, jnp.round(rate * count)).astype(jnp.int32), jnp.minimum(count, slots))
  # A random order of the maskable positions: the first ``wanted`` of them are predicted.
  keys = jnp.where(maskable, jax.random.uniform(choose_rng, (batch, length)), 2.0)
  _, positions = jax.lax.top_k(-keys, slots)
  weights = (jnp.arange(slots)[None, :] < wanted[:, None]).astype(jnp.float32)
  targets = jnp.take_along_axis(input_ids, positions, axis=-1)
  kind = jax.random.uniform(kind_rng, (batch, slots))
  random_tokens = jax.random.randint(random_rng, (batch, slots), 0, vocab_size, dtype=input_ids.dtype)
  replacement = jnp.where(kind < 0.8, jnp.asarray(mask_id, input_ids.dtype),
                          jnp.where(kind < 0.9, random_tokens, targets))
  rows = jnp.arange(batch)[:, None]
  corrupted = input_ids.at[rows, positions].set(jnp.where(weights > 0, replacement, targets))
  return Masked(corrupted, positions.astype(jnp.int32), targets, weights)
