"""Pooling (``encoders.pooling``) against numpy: mean, CLS, token matrices, span first / last, L2 norm."""

import jax
import jax.numpy as jnp
import numpy as np

from fewshot_nlu.encoders import pooling


def test_pooling_against_numpy():
  rng = np.random.default_rng(0)
  hidden = rng.normal(size=(2, 5, 3)).astype(np.float32)
  mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
  np.testing.assert_allclose(pooling.mean_pool(hidden, mask)[0], hidden[0, :3].mean(0), rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(pooling.cls_pool(hidden, mask), hidden[:, 0])
  tokens, token_mask = pooling.token_matrix(hidden, mask)
  assert np.all(np.asarray(tokens)[0, 3:] == 0) and np.array_equal(token_mask, mask)
  spans = pooling.span_first_last(hidden, np.array([[1, 0]]).repeat(2, 0), np.array([[2, 4]]).repeat(2, 0))
  np.testing.assert_allclose(spans[1, 1], np.concatenate([hidden[1, 0], hidden[1, 4]]))
  zero_grad = jax.grad(lambda x: pooling.l2_normalize(x).sum())(jnp.zeros((2, 3)))
  assert np.all(np.isfinite(zero_grad))
