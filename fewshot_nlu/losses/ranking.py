"""Response-ranking losses over the global in-batch negatives."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fewshot_nlu.encoders.pooling import l2_normalize


_MASKED = -1e9


def scaled_cosine(queries: jax.Array, candidates: jax.Array, scale: float) -> jax.Array:
  """S(c, r) = D * cos(c, r) for every query/candidate pair: [B_q, H] x [B_c, H] -> [B_q, B_c]."""
  q = l2_normalize(queries.astype(jnp.float32))
  c = l2_normalize(candidates.astype(jnp.float32))
  return scale * q @ c.T


def mneg_loss(contexts: jax.Array, responses: jax.Array, valid: jax.Array | None = None,
              labels: jax.Array | None = None, *, scale: float = 20.0,
              exclude_positive: bool = True) -> jax.Array:
  """Multiple negatives ranking loss, ConvFiT Eq. (1):

      L = - sum_i S(c_i, r_i) + sum_i log sum_{j != i} exp S(c_i, r_j),   S = D * cos.

  Deviations, on purpose:
    * the sum over i is a mean over the valid rows (Eq. 1 / B), so the learning rate does not depend on
      the batch size;
    * ``exclude_positive=False`` gives sentence-transformers' MultipleNegativesRankingLoss, whose
      denominator also contains j = i (a plain softmax cross-entropy). The default follows Eq. (1).

  ``contexts``/``responses`` are the GLOBAL batch [B, H] (row i of each is a positive pair); when they
  are sharded over devices, jit gathers the responses so every context ranks against all B responses.
  ``valid`` [B] marks real rows (padding rows are neither anchors nor negatives). ``labels`` [B], when
  given, removes same-label responses j != i from row i's negatives (they are false negatives when pairs
  come from labelled data; Eq. 1 assumes none exist).
  """
  b = contexts.shape[0]
  valid = jnp.ones((b,), bool) if valid is None else valid.astype(bool)
  scores = scaled_cosine(contexts, responses, scale)
  positive = jnp.diagonal(scores)
  allowed = valid[None, :] & valid[:, None]
  diagonal = jnp.eye(b, dtype=bool)
  if labels is not None:
    allowed = allowed & ((labels[:, None] != labels[None, :]) | diagonal)
  if exclude_positive:
    allowed = allowed & ~diagonal
  # A large finite negative instead of -inf keeps gradients finite for all-padding rows.
  denominator = jax.nn.logsumexp(jnp.where(allowed, scores, _MASKED), axis=-1)
  per_row = -positive + denominator
  return jnp.sum(jnp.where(valid, per_row, 0.0)) / jnp.maximum(jnp.sum(valid), 1)
