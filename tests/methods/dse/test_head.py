"""DSE's contrastive head (``methods.dse.head``): dense -> ReLU -> dense, against numpy."""

import jax
import numpy as np

from fewshot_nlu.methods.dse import head as contrastive_head


def test_contrastive_head_is_dense_relu_dense():
  params = jax.device_get(contrastive_head.init(jax.random.key(0), 6, 4))
  x = np.random.default_rng(0).normal(size=(3, 6)).astype(np.float32)
  hidden = np.maximum(x @ params["dense_0"]["kernel"] + params["dense_0"]["bias"], 0)
  want = hidden @ params["dense_1"]["kernel"] + params["dense_1"]["bias"]
  np.testing.assert_allclose(contrastive_head.apply(params, x), want, rtol=1e-5, atol=1e-6)
  assert params["dense_0"]["kernel"].shape == (6, 6) and params["dense_1"]["kernel"].shape == (6, 4)
