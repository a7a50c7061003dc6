"""QAID's pieces: MaxSim (Eq. 1) against a numpy loop, chunked and sharded scoring against the dense one, and
the supervised contrastive loss (Eq. 3, and Eq. 2 as its special case) against a numpy reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from fewshot_nlu import sharding
from fewshot_nlu.methods.qaid.late_interaction import maxsim_scores, token_vectors
from fewshot_nlu.methods.qaid.losses import supcon_loss


def _tokens(rng, b, length, d=8):
  x = rng.normal(size=(b, length, d)).astype(np.float32)
  x /= np.linalg.norm(x, axis=-1, keepdims=True)
  mask = np.zeros((b, length), bool)
  for i in range(b):
    mask[i, :rng.integers(1, length + 1)] = True
  return x * mask[..., None], mask


def numpy_maxsim(q, qm, d, dm):
  """Score(u, v) = 1/|u| sum_{i in u} max_{j in v} u_i . v_j, padding excluded, written as loops."""
  out = np.zeros((len(q), len(d)))
  for a in range(len(q)):
    for b in range(len(d)):
      u, v = q[a][qm[a]], d[b][dm[b]]
      out[a, b] = sum(max(float(ui @ vj) for vj in v) for ui in u) / len(u)
  return out


def test_maxsim_matches_the_loop_and_is_not_symmetric():
  rng = np.random.default_rng(0)
  q, qm = _tokens(rng, 5, 6)
  d, dm = _tokens(rng, 7, 4)
  np.testing.assert_allclose(maxsim_scores(q, qm, d, dm), numpy_maxsim(q, qm, d, dm), rtol=1e-5, atol=1e-6)
  s = np.asarray(maxsim_scores(q, qm, q, qm))
  assert not np.allclose(s, s.T)


@pytest.mark.parametrize("chunk", [1, 3, 7, 16])
def test_chunked_equals_dense(chunk):
  rng = np.random.default_rng(1)
  q, qm = _tokens(rng, 6, 5)
  d, dm = _tokens(rng, 7, 5)
  np.testing.assert_allclose(maxsim_scores(q, qm, d, dm, chunk=chunk), maxsim_scores(q, qm, d, dm), rtol=1e-6,
                             atol=1e-6)


def test_sharded_chunked_equals_single_device_dense():
  rng = np.random.default_rng(2)
  q, qm = _tokens(rng, 16, 6)
  d, dm = _tokens(rng, 16, 6)
  mesh = sharding.make_mesh({"data": 8})
  rows = NamedSharding(mesh, P(("data", "fsdp")))
  sharded = jax.jit(lambda *a: maxsim_scores(*a, chunk=4))(*(jax.device_put(x, rows) for x in (q, qm, d, dm)))
  # scores are means of cosines (|s| <= 1): atol for float32 reduction order, e.g. 1.5e-8 on a score of 0.006
  np.testing.assert_allclose(sharded, maxsim_scores(q, qm, d, dm), rtol=1e-6, atol=1e-6)


def test_token_vectors_are_unit_and_zero_at_padding():
  rng = np.random.default_rng(3)
  proj = {"kernel": rng.normal(size=(6, 4)).astype(np.float32), "bias": np.zeros(4, np.float32)}
  hidden = rng.normal(size=(2, 3, 6)).astype(np.float32)
  mask = np.array([[1, 1, 0], [1, 0, 0]], bool)
  z = np.asarray(token_vectors(proj, hidden, mask))
  np.testing.assert_allclose(np.linalg.norm(z, axis=-1), mask.astype(float), atol=1e-6)


def numpy_supcon(scores, labels, valid, tau):
  """Eq. (3) anchor by anchor: -1/|P(t)| sum_p log softmax over A(t) = all other valid rows; mean over anchors
  with positives."""
  losses = []
  for t in range(len(labels)):
    if not valid[t]:
      continue
    others = [a for a in range(len(labels)) if a != t and valid[a]]
    positives = [p for p in others if labels[p] == labels[t]]
    if not positives:
      continue
    denominator = np.sum([np.exp(scores[t, a] / tau) for a in others])
    losses.append(-np.mean([np.log(np.exp(scores[t, p] / tau) / denominator) for p in positives]))
  return np.mean(losses)


def test_supcon_matches_numpy_with_multiple_positives_and_padding():
  rng = np.random.default_rng(4)
  scores = rng.uniform(-1, 1, size=(9, 9))
  labels = np.array([0, 0, 0, 1, 1, 2, 3, 0, 1])  # class 0: 4 views (|P| = 3), class 3: a lone view
  valid = np.array([1, 1, 1, 1, 1, 1, 1, 1, 0], bool)  # the last row is padding
  got = supcon_loss(jnp.asarray(scores), jnp.asarray(labels), jnp.asarray(valid), temperature=0.07)
  np.testing.assert_allclose(got, numpy_supcon(scores, labels, valid, 0.07), rtol=1e-5, atol=1e-6)


def test_eq2_is_supcon_with_one_positive_per_anchor():
  """Self-supervised Eq. (2): the two views of query i (rows i and n + i) are each other's only positive."""
  rng = np.random.default_rng(5)
  n = 4
  scores = rng.uniform(-1, 1, size=(2 * n, 2 * n))
  labels = np.concatenate([np.arange(n), np.arange(n)])
  want = np.mean([-np.log(np.exp(scores[t, (t + n) % (2 * n)] / 0.07)
                          / np.sum([np.exp(scores[t, a] / 0.07) for a in range(2 * n) if a != t]))
                  for t in range(2 * n)])
  np.testing.assert_allclose(supcon_loss(jnp.asarray(scores), jnp.asarray(labels)), want, rtol=1e-5, atol=1e-6)


def test_supcon_sharded_equals_single_device():
  rng = np.random.default_rng(6)
  q, qm = _tokens(rng, 16, 5)
  labels = rng.integers(0, 4, size=16)
  mesh = sharding.make_mesh({"data": 8})
  rows = NamedSharding(mesh, P(("data", "fsdp")))

  def loss(tokens, mask, y):
    return supcon_loss(maxsim_scores(tokens, mask, tokens, mask, chunk=4), y)

  fn = jax.jit(jax.value_and_grad(loss))
  value_1, grad_1 = fn(q, qm, labels)
  value_8, grad_8 = fn(*(jax.device_put(x, rows) for x in (q, qm, labels)))
  np.testing.assert_allclose(value_8, value_1, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(grad_8, grad_1, rtol=1e-5, atol=1e-6)
