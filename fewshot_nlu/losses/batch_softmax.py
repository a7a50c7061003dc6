"""Retriever's batch softmax (Yu et al., 2021, §5.1, Eq. 1-5): every span of a batch against every label's spans.

A batch holds B spans for each of N labels. For the query span r_i^j, S_i^j (Eq. 1) is the B x N matrix of its
dot products with all spans of the batch; a reduction over each label's column gives one score per label
(Eq. 2), and the loss is softmax cross-entropy of those N scores against the query's gold label.

Reductions, for label column i' of query (i, j):
  * ``mean`` (Eq. 3):    (1/B) sum_{j'} s(z_i^j, z_{i'}^{j'})      -- Prototypical Networks (the query counts
                          in its own label's mean, as Eq. 3 is written);
  * ``max`` (Eq. 4):     max_{j'} s(z_i^j, z_{i'}^{j'}), excluding the query itself when i' = i;
  * ``min-max`` (Eq. 5): min_{j'} over the query's own label (the query included, as Eq. 5 is written),
                          max_{j'} over every other label.

Non-slot spans (an extension, ``retriever.negative_spans``; not in the paper): Yu et al.'s error analysis finds
that most errors come from invalid query spans ("book a", a word beside the gold span) retrieving a labelled
span with a high score, while training only ever sees gold spans. With ``negatives`` (vectors of spans of the
batch's utterances that are no gold slot) the softmax gets one more column, "none", scored by the most similar
of those spans (the ``max`` reduction over them); gold queries are trained to prefer their label over it, so
spans that are no slot are pushed away from every slot. Negatives are candidates only, never queries.

Written over labels rather than over a fixed [N, B] layout, so padding rows (``valid`` False) and a label with
fewer than B members in the batch are handled: a reduction runs over the valid members of each label only;
a label with no member (or, for ``max``, no member but the query itself) is left out of the softmax. The
GLOBAL batch is expected: under ``jax.jit`` on a mesh, the spans of all devices are the candidates.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

REDUCTIONS = ("mean", "max", "min-max")
_MASKED = -1e9


def reduce_label_scores(scores: jax.Array, labels: jax.Array, valid: jax.Array, num_labels: int,
                        reduction: str) -> tuple[jax.Array, jax.Array]:
  """Eq. (2): ([M, num_labels] reduced scores, [M, num_labels] which label columns exist for each query).

  ``scores`` [M, M] = s(z_row, z_col) over the batch's M spans; ``labels`` [M] in [0, num_labels); ``valid`` [M].
  """
  if reduction not in REDUCTIONS:
    raise ValueError(f"reduction {reduction!r} unknown; choose one of {REDUCTIONS}")
  m = scores.shape[0]
  scores = scores.astype(jnp.float32)
  member = jax.nn.one_hot(labels, num_labels, dtype=jnp.float32) * valid[:, None]  # [M (column span), N]
  counts = jnp.sum(member, axis=0)  # [N]
  if reduction == "mean":
    reduced = scores @ member / jnp.maximum(counts, 1)[None, :]
    return reduced, jnp.broadcast_to(counts[None, :] > 0, reduced.shape)
  own = jax.nn.one_hot(labels, num_labels, dtype=bool)  # [M (query), N]
  columns = jnp.where(valid, labels, num_labels)  # invalid spans go to an extra segment that is dropped
  by_label = lambda op, x: op(x.T, columns, num_segments=num_labels + 1)[:num_labels].T  # [M (query), N]
  if reduction == "max":
    # The diagonal is the query against itself, in the query's own label: masking it is Eq. (4)'s j' != j.
    reduced = by_label(jax.ops.segment_max, jnp.where(jnp.eye(m, dtype=bool), _MASKED, scores))
    present = (counts[None, :] - (own & valid[:, None])) > 0
    return reduced, present
  highest = by_label(jax.ops.segment_max, scores)
  lowest = by_label(jax.ops.segment_min, scores)
  return jnp.where(own, lowest, highest), jnp.broadcast_to(counts[None, :] > 0, own.shape)


def batch_softmax_loss(z: jax.Array, labels: jax.Array, valid: jax.Array, num_labels: int,
                       reduction: str = "max", negatives: jax.Array | None = None,
                       negatives_valid: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
  """Retriever's training loss (§5.1): mean over valid query spans of

      -log softmax(S_hat_i^j)[l_i],   S_hat_i^j = reduce_{label}(S_i^j)   (Eq. 1-5; s = dot product)

  ``z`` [M, D] span (or [CLS]) vectors of the global batch. Returns (loss, accuracy of argmax S_hat = gold).
  A query whose own label has no other member under ``max`` has no gold score and is skipped.
  ``negatives`` [P, D] (with ``negatives_valid`` [P]): non-slot spans, one more softmax column scored
  max_p s(z_i^j, z_p) (module docstring); a query is then also wrong when that column wins.
  """
  scores = jnp.einsum("md,nd->mn", z, z, preferred_element_type=jnp.float32)
  reduced, present = reduce_label_scores(scores, labels, valid, num_labels, reduction)
  logits = jnp.where(present, reduced, _MASKED)
  if negatives is not None:
    against = jnp.einsum("md,pd->mp", z, negatives, preferred_element_type=jnp.float32)
    none = jnp.max(jnp.where(negatives_valid[None, :], against, _MASKED), axis=1, keepdims=True)
    logits = jnp.concatenate([logits, none], axis=1)
  gold_present = jnp.take_along_axis(present, labels[:, None], axis=1)[:, 0]
  anchors = valid & gold_present
  log_prob = jax.nn.log_softmax(logits, axis=-1)
  gold = jnp.take_along_axis(log_prob, labels[:, None], axis=1)[:, 0]
  count = jnp.maximum(jnp.sum(anchors), 1)
  loss = -jnp.sum(jnp.where(anchors, gold, 0.0)) / count
  accuracy = jnp.sum(anchors & (jnp.argmax(logits, axis=-1) == labels)) / count
  return loss, accuracy
