"""DSE's hard-negative weighted contrastive loss (Eq. 1-3) against a plain numpy transcription."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from fewshot_nlu import sharding
from fewshot_nlu.methods.dse.losses import hard_negative_loss


def numpy_eq123(first, second, tau, valid=None, weighted=True):
  """Eq. (1)-(3) written out anchor by anchor with explicit alphas (no log-space tricks)."""
  m = len(first)
  valid = np.ones(m, bool) if valid is None else valid
  e = np.concatenate([first, second]).astype(np.float64)
  e /= np.linalg.norm(e, axis=1, keepdims=True)
  ok = np.concatenate([valid, valid])
  total, anchors = 0.0, 0
  for i in range(2 * m):
    if not ok[i]:
      continue
    p = (i + m) % (2 * m)
    negatives = [j for j in range(2 * m) if ok[j] and j not in (i, p)]
    pos = np.exp(e[i] @ e[p] / tau)
    neg = np.array([np.exp(e[i] @ e[j] / tau) for j in negatives])
    alpha = neg / neg.mean() if weighted else np.ones_like(neg)  # Eq. (2): averaged over the 2M-2 negatives
    total += -np.log(pos / (pos + np.sum(alpha * neg)))  # Eq. (1)
    anchors += 1
  return total / anchors  # Eq. (3): 1/(2M) sum (l_i + l_i')


@pytest.mark.parametrize("weighted", [True, False])
def test_matches_equations(weighted):
  rng = np.random.default_rng(0)
  a, b = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
  got = hard_negative_loss(jnp.asarray(a), jnp.asarray(b), temperature=0.05, weighted=weighted)
  np.testing.assert_allclose(got, numpy_eq123(a, b, 0.05, weighted=weighted), rtol=1e-4, atol=1e-6)


def test_alpha_up_weights_hard_negatives():
  """A negative close to the anchor costs more under alpha-weighting than under plain NT-Xent; with every
  negative equally similar alpha is 1 and the two losses agree."""
  a = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
  b = a + 0.1
  near = a.copy()
  near[1] = [0.9, 0.2, 0.0]  # pair 1 now sits close to anchor 0
  w = hard_negative_loss(jnp.asarray(near), jnp.asarray(b), temperature=0.5)
  u = hard_negative_loss(jnp.asarray(near), jnp.asarray(b), temperature=0.5, weighted=False)
  assert w > u
  same = np.eye(2)  # M = 1 pair per side would leave no negatives; two orthogonal pairs
  np.testing.assert_allclose(hard_negative_loss(jnp.asarray(same), jnp.asarray(same)),
                             hard_negative_loss(jnp.asarray(same), jnp.asarray(same), weighted=False), rtol=1e-6,
                             atol=1e-6)


def test_padding_rows_are_ignored_and_tau_small_is_finite():
  rng = np.random.default_rng(1)
  a, b = rng.normal(size=(8, 6)), rng.normal(size=(8, 6))
  valid = np.array([1, 1, 1, 1, 1, 0, 0, 0], bool)
  got = hard_negative_loss(jnp.asarray(a), jnp.asarray(b), jnp.asarray(valid), temperature=0.05)
  np.testing.assert_allclose(got, numpy_eq123(a[:5], b[:5], 0.05), rtol=1e-4, atol=1e-6)
  grads = jax.grad(lambda x: hard_negative_loss(x, jnp.asarray(b), jnp.asarray(valid), temperature=0.01))(
      jnp.asarray(a))
  assert np.all(np.isfinite(grads)) and np.all(np.asarray(grads)[5:] == 0)
  single = hard_negative_loss(jnp.asarray(a[:1]), jnp.asarray(b[:1]))  # one pair: no negatives, zero loss
  assert np.isfinite(single) and float(single) == pytest.approx(0.0, abs=1e-6)


def test_sharded_equals_single_device():
  rng = np.random.default_rng(2)
  a, b = rng.normal(size=(16, 8)).astype(np.float32), rng.normal(size=(16, 8)).astype(np.float32)
  valid = np.arange(16) < 13
  mesh = sharding.make_mesh({"data": 8})
  rows = NamedSharding(mesh, P(("data", "fsdp")))
  fn = jax.jit(jax.value_and_grad(lambda x, y, v: hard_negative_loss(x, y, v), argnums=(0, 1)))
  loss_1, grads_1 = fn(a, b, valid)
  loss_8, grads_8 = fn(*(jax.device_put(x, rows) for x in (a, b, valid)))
  np.testing.assert_allclose(loss_8, loss_1, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(loss_1, numpy_eq123(a[:13], b[:13], 0.05), rtol=1e-4, atol=1e-6)
  for g8, g1 in zip(grads_8, grads_1):
    np.testing.assert_allclose(g8, g1, rtol=1e-5, atol=1e-6)
