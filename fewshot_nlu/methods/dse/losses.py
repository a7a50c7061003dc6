"""Symmetric in-batch contrastive loss with hard-negative weighting (DSE §3.2; PairSupCon, Zhang et al. 2021a)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fewshot_nlu.encoders.pooling import l2_normalize

_MASKED = -1e9


def hard_negative_loss(first: jax.Array, second: jax.Array, valid: jax.Array | None = None, *,
                       temperature: float = 0.05, weighted: bool = True) -> jax.Array:
  """DSE Eq. (1)-(3). Rows i of ``first`` and ``second`` ([M, d], the GLOBAL batch) are a positive pair
  (x_i, x_i'). The 2M vectors are stacked; each one is an anchor whose positive is its partner and whose
  negatives are the other 2M - 2 vectors of the batch (every device's, when the batch is sharded: jit
  gathers them). With s = cosine similarity and tau the temperature:

      l_i   = -log  exp(s(i, i')/tau) / ( exp(s(i, i')/tau) + sum_{j != i, i'} alpha_ij exp(s(i, j)/tau) )  (1)
      alpha_ij = exp(s(i, j)/tau) / ( 1/(2M-2) sum_{k != i, i'} exp(s(i, k)/tau) )                        (2)
      L     = 1/(2M) sum_i (l_i + l_i')                                                                    (3)

  Notes on reading the equations:
    * Eq. (1) prints the positive term only in the numerator; its denominator "sum over the batch" includes
      the positive, as in the authors' PairSupCon code (``-log(pos / (pos + Ng))``), which is what this
      implements; alpha is averaged over the 2M - 2 negatives only, as §3.2 says.
    * alpha is not detached: gradients flow through it, as in the PairSupCon implementation.
    * ``weighted=False`` sets every alpha to 1: plain NT-Xent / SimCLR over the same 2M - 2 negatives.
  Computed in log space: sum_j alpha_ij e^{s_ij/tau} = N * sum_j e^{2 s_ij/tau} / sum_j e^{s_ij/tau} with
  N the number of negatives, so tau = 0.05 cannot overflow. ``valid`` [M] marks real pairs; padding pairs
  are neither anchors nor negatives, and N counts the valid negatives only.
  """
  m = first.shape[0]
  valid = jnp.ones((m,), bool) if valid is None else valid.astype(bool)
  vectors = l2_normalize(jnp.concatenate([first, second]).astype(jnp.float32))
  logits = vectors @ vectors.T / temperature  # [2M, 2M]
  rows = jnp.arange(2 * m)
  partner = (rows + m) % (2 * m)
  both_valid = jnp.concatenate([valid, valid])
  positive = logits[rows, partner]
  negative = both_valid[None, :] & (rows[None, :] != rows[:, None]) & (rows[None, :] != partner[:, None])
  count = jnp.sum(negative, axis=-1)
  log_sum = jax.nn.logsumexp(jnp.where(negative, logits, _MASKED), axis=-1)
  if weighted:
    log_weighted = jnp.log(jnp.maximum(count, 1)) + jax.nn.logsumexp(
        jnp.where(negative, 2.0 * logits, _MASKED), axis=-1) - log_sum
  else:
    log_weighted = log_sum
  log_weighted = jnp.where(count > 0, log_weighted, _MASKED)  # no negatives: the loss of that anchor is 0
  per_anchor = jnp.logaddexp(positive, log_weighted) - positive
  return jnp.sum(jnp.where(both_valid, per_anchor, 0.0)) / jnp.maximum(jnp.sum(both_valid), 1)
