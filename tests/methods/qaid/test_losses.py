"""QAID's losses (``methods.qaid.losses``) against numpy: the supervised contrastive loss (Eq. 3, and Eq. 2 as
its special case; sharded vs one device), N-pairs and the pairwise softmax."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from fewshot_nlu import sharding
from fewshot_nlu.methods.qaid.late_interaction import maxsim_scores
from fewshot_nlu.methods.qaid.losses import npairs_loss, pairwise_softmax_loss, supcon_loss
from tests.methods.qaid.helpers import _tokens


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


def test_npairs_loss_matches_numpy_with_one_positive_and_same_intent_views_left_out():
  rng = np.random.default_rng(0)
  labels = np.array([0, 1, 0, -1, 0, 1, 0, -1])  # 4 queries (one padding) then their 4 intent names
  partner = np.array([4, 5, 6, 7, 0, 0, 0, 0])
  anchors = np.array([1, 1, 1, 1, 0, 0, 0, 0], bool)
  scores = rng.normal(0, 1, (8, 8))
  tau = 0.1
  losses = []
  for t in range(8):
    if not anchors[t] or labels[t] < 0:
      continue
    pool = [a for a in range(8) if a != t and labels[a] >= 0 and (a == partner[t] or labels[a] != labels[t])]
    losses.append(-(scores[t, partner[t]] / tau - np.log(np.sum(np.exp(scores[t, pool] / tau)))))
  got = npairs_loss(jnp.asarray(scores), jnp.asarray(labels), jnp.asarray(partner), jnp.asarray(anchors),
                    temperature=tau)
  np.testing.assert_allclose(got, np.mean(losses), rtol=1e-5, atol=1e-6)


def test_pairwise_softmax_loss_is_ce_over_the_positive_negative_pair():
  pos, neg = np.array([0.9, 0.2, 0.5]), np.array([0.1, 0.4, 0.5])
  want = np.mean([-np.log(np.exp(p) / (np.exp(p) + np.exp(n))) for p, n in zip(pos[:2], neg[:2])])
  got = pairwise_softmax_loss(jnp.asarray(pos), jnp.asarray(neg), jnp.array([1, 1, 0]))
  np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
