"""Supervised batch-contrastive loss (Khosla et al. 2020) on a score matrix: QAID Eq. (2) and (3)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

_MASKED = -1e9


def supcon_loss(scores: jax.Array, labels: jax.Array, valid: jax.Array | None = None, *,
                temperature: float = 0.07) -> jax.Array:
  """QAID Eq. (3) over a batch of N views (queries and intent names alike):

      L = sum_t  -1/|P(t)| sum_{p in P(t)} log( exp(S(t, p)/tau) / sum_{a in A(t)} exp(S(t, a)/tau) )

  with S(t, a) = ``scores[t, a]`` (QAID: the late-interaction Score(q^t, q^a), row = anchor's tokens),
  A(t) = every other valid view, P(t) = the other valid views with the same label. Eq. (2), the
  self-supervised loss, is the case where the two augmented views of one query share a label of their own
  (P(t) = {J(t)}).

  Deviations, as in Khosla et al.'s reference code: the sum over anchors is a mean over the anchors that have
  at least one positive (so the learning rate does not depend on the batch size, and an anchor without a
  positive, e.g. a padding row or a lone view, adds nothing instead of dividing by |P(t)| = 0).
  ``valid`` [N] marks real rows; the GLOBAL batch is expected (jit gathers a sharded one).
  """
  n = scores.shape[0]
  valid = jnp.ones((n,), bool) if valid is None else valid.astype(bool)
  logits = scores.astype(jnp.float32) / temperature
  others = valid[None, :] & ~jnp.eye(n, dtype=bool)
  log_denominator = jax.nn.logsumexp(jnp.where(others, logits, _MASKED), axis=-1, keepdims=True)
  log_prob = logits - log_denominator
  positive = others & (labels[:, None] == labels[None, :])
  count = jnp.sum(positive, axis=-1)
  per_anchor = -jnp.sum(jnp.where(positive, log_prob, 0.0), axis=-1) / jnp.maximum(count, 1)
  anchors = valid & (count > 0)
  return jnp.sum(jnp.where(anchors, per_anchor, 0.0)) / jnp.maximum(jnp.sum(anchors), 1)
