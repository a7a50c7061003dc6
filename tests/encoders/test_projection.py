"""The down-projection (``encoders.projection``): tanh(dense) with torch's Linear init, against numpy."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from fewshot_nlu.encoders import projection as projection_head


def test_projection_is_tanh_dense_with_torch_linear_init():
  params = projection_head.init(jax.random.key(0), 384, 512)
  assert params["kernel"].shape == (384, 512) and float(jnp.abs(params["kernel"]).max()) <= 1 / math.sqrt(384)
  x = np.random.default_rng(0).normal(size=(3, 384)).astype(np.float32)
  expected = np.tanh(x @ np.asarray(params["kernel"]) + np.asarray(params["bias"]))
  np.testing.assert_allclose(projection_head.apply(params, x), expected, rtol=1e-5, atol=1e-6)
