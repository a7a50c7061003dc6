"""The Retriever's batch-softmax loss (``losses.batch_softmax``): label reductions (Eq. 3-5) against numpy loops,
the "none" column of non-slot spans, padding rows and a lone span."""

import jax.numpy as jnp
import numpy as np
import pytest

from fewshot_nlu.losses.batch_softmax import batch_softmax_loss, reduce_label_scores


def numpy_reduce(scores, labels, reduction):
  """Eq. (3)-(5) by loops: [M, N] per query and label column."""
  m, n = scores.shape[0], labels.max() + 1
  out = np.zeros((m, n))
  for q in range(m):
    for label in range(n):
      members = [c for c in range(m) if labels[c] == label]
      if reduction == "mean":
        out[q, label] = np.mean([scores[q, c] for c in members])
      elif reduction == "max":
        out[q, label] = max(scores[q, c] for c in members if c != q)
      else:
        pick = min if label == labels[q] else max
        out[q, label] = pick(scores[q, c] for c in members)
  return out


def hand_built():
  """3 labels x B = 2 spans, 2-d vectors; every span's own score (||z||^2) is the largest in its row, so a
  max that did not exclude the query itself would differ."""
  z = np.array([[3.0, 0.1], [2.0, 0.5], [0.2, 3.0], [-0.4, 2.2], [-2.5, -1.0], [-1.0, -2.0]], np.float32)
  return z, np.array([0, 0, 1, 1, 2, 2], np.int32)


@pytest.mark.parametrize("reduction", ["mean", "max", "min-max"])
def test_reductions_match_numpy(reduction):
  z, labels = hand_built()
  scores = z @ z.T
  reduced, present = reduce_label_scores(jnp.asarray(scores), jnp.asarray(labels), jnp.ones(6, bool), 3, reduction)
  np.testing.assert_allclose(np.asarray(reduced), numpy_reduce(scores, labels, reduction), rtol=1e-6, atol=1e-6)
  assert np.asarray(present).all()


def test_max_excludes_the_query_itself():
  z, labels = hand_built()
  scores = z @ z.T
  reduced, _ = reduce_label_scores(jnp.asarray(scores), jnp.asarray(labels), jnp.ones(6, bool), 3, "max")
  assert float(reduced[0, 0]) == pytest.approx(scores[0, 1])  # the other span of label 0, not ||z_0||^2 = 9.01
  assert scores[0, 0] > scores[0, 1]
  # mean (Eq. 3) keeps the query in its own label's mean; min-max's min over the own label includes it too
  mean, _ = reduce_label_scores(jnp.asarray(scores), jnp.asarray(labels), jnp.ones(6, bool), 3, "mean")
  assert float(mean[0, 0]) == pytest.approx((scores[0, 0] + scores[0, 1]) / 2, rel=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "max", "min-max"])
def test_loss_is_softmax_cross_entropy_of_reduced_scores(reduction):
  z, labels = hand_built()
  reference = numpy_reduce(z @ z.T, labels, reduction)
  log_prob = reference - np.log(np.exp(reference).sum(1, keepdims=True))
  expected = -np.mean(log_prob[np.arange(6), labels])
  loss, accuracy = batch_softmax_loss(jnp.asarray(z), jnp.asarray(labels), jnp.ones(6, bool), 3, reduction)
  assert float(loss) == pytest.approx(expected, rel=1e-5)
  assert float(accuracy) == pytest.approx(np.mean(reference.argmax(1) == labels))


def test_none_column_of_non_slot_spans_matches_numpy():
  """The "none" column: max over the non-slot spans' dot products, one more softmax class (losses docstring)."""
  z, labels = hand_built()
  negatives = np.array([[1.0, 1.0], [2.9, 0.0], [0.0, 0.0]], np.float32)
  valid = np.array([True, True, False])  # the third is padding and must not count
  reference = numpy_reduce(z @ z.T, labels, "max")
  none = (z @ negatives[:2].T).max(1, keepdims=True)
  logits = np.concatenate([reference, none], 1)
  log_prob = logits - np.log(np.exp(logits).sum(1, keepdims=True))
  loss, accuracy = batch_softmax_loss(jnp.asarray(z), jnp.asarray(labels), jnp.ones(6, bool), 3, "max",
                                      jnp.asarray(negatives), jnp.asarray(valid))
  assert float(loss) == pytest.approx(-np.mean(log_prob[np.arange(6), labels]), rel=1e-5)
  assert float(accuracy) == pytest.approx(np.mean(logits.argmax(1) == labels))
  assert (logits.argmax(1) == 3).any()  # span 0 is nearer the negative [2.9, 0] than its own label: a miss


def test_padding_rows_and_a_lone_span_are_left_out():
  z, labels = hand_built()
  valid = np.array([1, 1, 1, 1, 1, 0], bool)  # label 2 keeps one span: under max it has no gold column
  loss, _ = batch_softmax_loss(jnp.asarray(z), jnp.asarray(labels), jnp.asarray(valid), 3, "max")
  scores = z[:5] @ z[:5].T
  expected = []
  for q in range(4):  # queries of labels 0 and 1; span 4 (label 2, alone) is a candidate only
    cols = [max(scores[q, c] for c in range(5) if labels[c] == l and c != q) for l in range(3)]
    expected.append(-(cols[labels[q]] - np.log(np.sum(np.exp(cols)))))
  assert float(loss) == pytest.approx(np.mean(expected), rel=1e-5)
