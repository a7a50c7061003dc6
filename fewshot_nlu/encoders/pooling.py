"""Pooling of token-level hidden states [B, L, H] into the vectors each method needs."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def mean_pool(hidden: jax.Array, attention_mask: jax.Array) -> jax.Array:
  """Masked mean over real tokens (sentence-transformers' ``pooling_mode_mean_tokens``). [B, H]."""
  mask = attention_mask.astype(jnp.float32)[..., None]
  summed = jnp.sum(hidden.astype(jnp.float32) * mask, axis=-2)
  return summed / jnp.maximum(jnp.sum(mask, axis=-2), 1e-9)


def packed_mean_pool(hidden: jax.Array, owner: jax.Array, num_items: int) -> jax.Array:
  """``mean_pool`` for packed rows: ``owner`` [R, L] names the item (0..num_items-1) each token belongs to, -1 for
  padding; item i's vector is the mean of its tokens. [num_items, H] (zero for an item without tokens)."""
  flat = owner.reshape(-1)
  ids = jnp.where(flat < 0, num_items, flat)  # padding goes to a dropped extra segment
  summed = jax.ops.segment_sum(hidden.reshape(flat.shape[0], -1).astype(jnp.float32), ids, num_items + 1)
  counts = jax.ops.segment_sum(jnp.ones_like(flat, jnp.float32), ids, num_items + 1)
  return summed[:num_items] / jnp.maximum(counts[:num_items], 1.0)[:, None]


def cls_pool(hidden: jax.Array, attention_mask: jax.Array | None = None) -> jax.Array:
  """The first ([CLS] / <s>) token's vector. [B, H]."""
  del attention_mask
  return hidden[..., 0, :].astype(jnp.float32)


def max_pool(hidden: jax.Array, attention_mask: jax.Array) -> jax.Array:
  """Element-wise maximum over real tokens (sentence-transformers' ``pooling_mode_max_tokens``, padding set to
  -1e9 before the max as there). [B, H]."""
  real = attention_mask.astype(bool)[..., None]
  return jnp.max(jnp.where(real, hidden.astype(jnp.float32), -1e9), axis=-2)


def token_matrix(hidden: jax.Array, attention_mask: jax.Array) -> tuple[jax.Array, jax.Array]:
  """All token vectors with padding zeroed, plus the mask (late interaction keeps both). [B, L, H], [B, L]."""
  mask = attention_mask.astype(hidden.dtype)[..., None]
  return hidden * mask, attention_mask


def span_first_last(hidden: jax.Array, starts: jax.Array, ends: jax.Array) -> jax.Array:
  """Span vectors: concatenation of the first and last word-piece vectors (Retriever §4). [B, S, 2H].

  ``starts``/``ends`` are [B, S] inclusive token indices into each row of ``hidden``.
  """
  first = jnp.take_along_axis(hidden, starts[..., None], axis=-2)
  last = jnp.take_along_axis(hidden, ends[..., None], axis=-2)
  return jnp.concatenate([first, last], axis=-1)


def l2_normalize(x: jax.Array, eps: float = 1e-12) -> jax.Array:
  """x / max(||x||, eps). Written with rsqrt of the squared norm so that all-zero rows (padding) get zero
  gradients instead of NaN (d||x||/dx is undefined at 0)."""
  squared = jnp.sum(jnp.square(x), axis=-1, keepdims=True)
  return x * jax.lax.rsqrt(jnp.maximum(squared, eps * eps))


POOLERS = {"mean": mean_pool, "cls": cls_pool, "max": max_pool}


def get_pooler(name: str):
  """A ``(hidden, mask) -> [B, H]`` pooler by name (``mean``, ``cls`` or ``max``)."""
  if name not in POOLERS:
    raise ValueError(f"unknown pooling {name!r}; choose one of {sorted(POOLERS)}")
  return POOLERS[name]
