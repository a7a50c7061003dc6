"""Pair losses of ConvFiT Stage 2 (§2.2) over a batch of (x_i, x_j, is_positive) pairs.

All take the encodings of both sides, ``[B, d]`` each (after pooling and the d_o tanh down-projection), a
``positive`` flag per pair and a ``valid`` mask (padding rows of a short batch contribute nothing).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fewshot_nlu.encoders.pooling import l2_normalize


def _cosine(a: jax.Array, b: jax.Array) -> jax.Array:
  return jnp.sum(l2_normalize(a.astype(jnp.float32)) * l2_normalize(b.astype(jnp.float32)), axis=-1)


def _valid(positive, valid):
  return jnp.ones(positive.shape, bool) if valid is None else valid.astype(bool)


def cosine_pair_loss(a: jax.Array, b: jax.Array, positive: jax.Array, valid: jax.Array | None = None, *,
                     positive_target: float = 0.8, negative_target: float = 0.3) -> jax.Array:
  """COS: mean squared error between cos(x_i, x_j) and delta_l, with delta_l = 0.8 for pairs in PP and 0.3
  for pairs in NP (ConvFiT §2.2, Reimers & Gurevych 2019 defaults): mean over valid pairs of
  (delta_l - cos(x_i, x_j))^2."""
  valid = _valid(positive, valid)
  target = jnp.where(positive, positive_target, negative_target)
  squared = jnp.square(target - _cosine(a, b))
  return jnp.sum(jnp.where(valid, squared, 0.0)) / jnp.maximum(jnp.sum(valid), 1)


def online_contrastive_loss(a: jax.Array, b: jax.Array, positive: jax.Array, valid: jax.Array | None = None,
                            *, margin: float = 0.5) -> jax.Array:
  """OCL, ConvFiT Eq. (2) (Hadsell et al. 2006), in its *online* form (footnote 5):

      L = sum over hard positives of dcos(x_i, x_j)^2 + sum over hard negatives of ReLU(delta_m - dcos)^2,

  dcos = 1 - cos, delta_m = 0.5. As in sentence-transformers' OnlineContrastiveLoss: hard positives are the
  positive pairs farther apart than the closest negative pair; hard negatives are the negative pairs closer
  than the farthest positive pair (with fewer than two pairs of the other kind, the threshold is the mean
  distance of the own kind). Summed over the batch's selected pairs, as there.
  """
  valid = _valid(positive, valid)
  distance = 1.0 - _cosine(a, b)
  pos = positive.astype(bool) & valid
  neg = ~positive.astype(bool) & valid
  n_pos, n_neg = jnp.sum(pos), jnp.sum(neg)
  mean_of = lambda mask: jnp.sum(jnp.where(mask, distance, 0.0)) / jnp.maximum(jnp.sum(mask), 1)
  closest_negative = jnp.where(n_neg > 1, jnp.min(jnp.where(neg, distance, jnp.inf)), mean_of(pos))
  farthest_positive = jnp.where(n_pos > 1, jnp.max(jnp.where(pos, distance, -jnp.inf)), mean_of(neg))
  hard_pos = pos & (distance > closest_negative)
  hard_neg = neg & (distance < farthest_positive)
  return (jnp.sum(jnp.where(hard_pos, jnp.square(distance), 0.0))
          + jnp.sum(jnp.where(hard_neg, jnp.square(jax.nn.relu(margin - distance)), 0.0)))


def softmax_pair_loss(a: jax.Array, b: jax.Array, positive: jax.Array, valid: jax.Array | None,
                      classifier: dict) -> jax.Array:
  """SMAX: softmax(W (x_i ⊕ x_j ⊕ |x_i - x_j|)) with W in R^{3 d_o x 2}, trained with cross-entropy on
  positive (class 1) vs negative (class 0) pairs (ConvFiT §2.2, Reimers & Gurevych 2019). ``classifier``
  holds ``kernel`` [3d, 2] and ``bias`` [2]; mean over valid pairs."""
  valid = _valid(positive, valid)
  features = jnp.concatenate([a, b, jnp.abs(a - b)], axis=-1).astype(jnp.float32)
  logits = features @ classifier["kernel"] + classifier["bias"]
  log_probs = jax.nn.log_softmax(logits, axis=-1)
  nll = -jnp.take_along_axis(log_probs, positive.astype(jnp.int32)[:, None], axis=-1)[:, 0]
  return jnp.sum(jnp.where(valid, nll, 0.0)) / jnp.maximum(jnp.sum(valid), 1)
