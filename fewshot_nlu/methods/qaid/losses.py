"""QAID's contrastive losses on a score matrix: supervised batch-contrastive (Khosla et al. 2020; QAID Eq. 2
and 3), the N-pairs ablation (Table 3) and ColBERT's pairwise softmax for the triplet baseline (§3.3.1)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

_MASKED = -1e9


def _mean_positive_log_prob(scores, positive, candidates, anchors, temperature):
  """mean over ``anchors`` with a positive of  -1/|P(t)| sum_{p in P(t)} log softmax_{a in A(t)}(S/tau)[p]."""
  logits = scores.astype(jnp.float32) / temperature
  log_denominator = jax.nn.logsumexp(jnp.where(candidates, logits, _MASKED), axis=-1, keepdims=True)
  log_prob = logits - log_denominator
  count = jnp.sum(positive, axis=-1)
  per_anchor = -jnp.sum(jnp.where(positive, log_prob, 0.0), axis=-1) / jnp.maximum(count, 1)
  anchors = anchors & (count > 0)
  return jnp.sum(jnp.where(anchors, per_anchor, 0.0)) / jnp.maximum(jnp.sum(anchors), 1)


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
  others = valid[None, :] & ~jnp.eye(n, dtype=bool)
  positive = others & (labels[:, None] == labels[None, :])
  return _mean_positive_log_prob(scores, positive, others, valid, temperature)


def npairs_loss(scores: jax.Array, labels: jax.Array, partner: jax.Array, anchors: jax.Array, *,
                temperature: float = 0.07) -> jax.Array:
  """The "QAID - N-pairs loss" ablation (§4.1, Table 3): each anchor query t has ONE positive, its intent name
  ``partner[t]`` (an index into the batch), and the other views of the batch, queries or intent names, as
  in-batch negatives (DPR's loss):

      L = mean_t  -log( exp(S(t, J(t))/tau) / sum_{a in A(t)} exp(S(t, a)/tau) )

  ``anchors`` [N] marks the anchor rows (valid queries); the other views of the anchor's own intent (which
  may be the very same intent-name text) are left out of A(t), since they are not negatives — the paper does
  not say how it treats them. Rows that are not anchors still serve as negatives when valid (``labels`` < 0
  marks padding).
  """
  n = scores.shape[0]
  valid = labels >= 0
  index = jnp.arange(n)
  positive = index[None, :] == partner[:, None]
  same = labels[:, None] == labels[None, :]
  candidates = valid[None, :] & (index[None, :] != index[:, None]) & (positive | ~same)
  return _mean_positive_log_prob(scores, positive, candidates, anchors.astype(bool) & valid, temperature)


def pairwise_softmax_loss(positive_scores: jax.Array, negative_scores: jax.Array,
                          valid: jax.Array | None = None) -> jax.Array:
  """ColBERT v1's triplet loss (Khattab & Zaharia 2020, §3.4): softmax cross-entropy of the positive over the
  pair (positive, negative) of scores, i.e. mean softplus(S(q, d-) - S(q, d+)), over ``valid`` triplets."""
  losses = jax.nn.softplus(negative_scores.astype(jnp.float32) - positive_scores.astype(jnp.float32))
  if valid is None:
    return jnp.mean(losses)
  valid = valid.astype(jnp.float32)
  return jnp.sum(losses * valid) / jnp.maximum(jnp.sum(valid), 1.0)
