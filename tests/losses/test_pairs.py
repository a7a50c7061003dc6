"""ConvFiT Stage 2 pair losses against plain numpy transcriptions of §2.2 / Eq. (2)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot_nlu.losses.pairs import cosine_pair_loss, online_contrastive_loss, softmax_pair_loss


def _cos(a, b):
  return np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _data(seed, n=12, d=6):
  rng = np.random.default_rng(seed)
  a, b = rng.normal(size=(n, d)), rng.normal(size=(n, d))
  positive = rng.random(n) < 0.5
  positive[:2] = [True, False]
  valid = np.ones(n, bool)
  valid[-2:] = False
  return a, b, positive, valid


def numpy_cos(a, b, positive, valid):
  target = np.where(positive, 0.8, 0.3)
  return np.mean(((target - _cos(a, b)) ** 2)[valid])


def numpy_ocl(a, b, positive, valid, margin=0.5):
  """Eq. (2) on the hard pairs, following sentence-transformers' OnlineContrastiveLoss."""
  d = 1 - _cos(a, b)
  poss, negs = d[positive & valid], d[~positive & valid]
  negative_pairs = negs[negs < (poss.max() if len(poss) > 1 else negs.mean())]
  positive_pairs = poss[poss > (negs.min() if len(negs) > 1 else poss.mean())]
  return np.sum(positive_pairs ** 2) + np.sum(np.maximum(margin - negative_pairs, 0) ** 2)


def numpy_smax(a, b, positive, valid, w, bias):
  logits = np.concatenate([a, b, np.abs(a - b)], 1) @ w + bias
  logp = logits - np.log(np.sum(np.exp(logits), 1, keepdims=True))
  return np.mean(-logp[np.arange(len(a)), positive.astype(int)][valid])


@pytest.mark.parametrize("seed", range(5))
def test_cos_loss(seed):
  a, b, positive, valid = _data(seed)
  got = cosine_pair_loss(jnp.asarray(a), jnp.asarray(b), jnp.asarray(positive), jnp.asarray(valid))
  np.testing.assert_allclose(got, numpy_cos(a, b, positive, valid), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_ocl_loss(seed):
  a, b, positive, valid = _data(seed)
  got = online_contrastive_loss(jnp.asarray(a), jnp.asarray(b), jnp.asarray(positive), jnp.asarray(valid))
  np.testing.assert_allclose(got, numpy_ocl(a, b, positive, valid), rtol=1e-5, atol=1e-6)


def test_ocl_is_eq2_when_every_pair_is_hard():
  # positives far apart and negatives close together: every pair is hard, so the loss is Eq. (2) summed
  distances = np.array([1.0, 0.9, 0.05, 0.1])
  angles = np.arccos(1 - distances)
  a = np.tile([1.0, 0.0], (4, 1))
  b = np.stack([np.cos(angles), np.sin(angles)], 1)
  positive, valid = np.array([True, True, False, False]), np.ones(4, bool)
  expected = 1.0 ** 2 + 0.9 ** 2 + (0.5 - 0.05) ** 2 + (0.5 - 0.1) ** 2
  got = online_contrastive_loss(jnp.asarray(a), jnp.asarray(b), jnp.asarray(positive), jnp.asarray(valid))
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
  # an easy pair (a positive closer than every negative) drops out
  easy = np.concatenate([b, [[1.0, 0.0]]])
  got = online_contrastive_loss(jnp.asarray(np.tile([1.0, 0.0], (5, 1))), jnp.asarray(easy),
                                jnp.asarray(np.append(positive, True)), jnp.asarray(np.ones(5, bool)))
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_smax_loss(seed):
  a, b, positive, valid = _data(seed)
  rng = np.random.default_rng(100 + seed)
  w, bias = rng.normal(size=(18, 2)), rng.normal(size=2)
  got = softmax_pair_loss(jnp.asarray(a), jnp.asarray(b), jnp.asarray(positive), jnp.asarray(valid),
                          {"kernel": jnp.asarray(w), "bias": jnp.asarray(bias)})
  np.testing.assert_allclose(got, numpy_smax(a, b, positive, valid, w, bias), rtol=1e-5, atol=1e-6)


def test_padding_rows_get_no_gradient():
  a, b, positive, valid = _data(0)
  for loss in (cosine_pair_loss, online_contrastive_loss):
    grads = jax.grad(lambda x: loss(x, jnp.asarray(b), jnp.asarray(positive), jnp.asarray(valid)))(jnp.asarray(a))
    assert np.all(np.isfinite(grads)) and np.all(np.asarray(grads)[-2:] == 0)
