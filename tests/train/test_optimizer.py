"""The optimizer (``train.optimizer``): schedules, weight decay mask, frozen parameters, group learning rates."""

import jax
import numpy as np
import optax
import pytest

from fewshot_nlu.encoders import transformer
from fewshot_nlu.train import optimizer
from tests import tiny


def test_schedules():
  linear = optimizer.make_schedule(1.0, 100, 0.1, "linear")
  assert linear(0) == 0 and np.isclose(linear(5), 0.5) and np.isclose(linear(10), 1.0)
  assert np.isclose(linear(55), 0.5) and np.isclose(linear(100), 0.0)
  cosine = optimizer.make_schedule(1.0, 100, 0.1, "cosine")
  assert np.isclose(cosine(10), 1.0) and np.isclose(cosine(55), 0.5, atol=1e-6) and cosine(100) < 1e-6
  assert np.isclose(optimizer.make_schedule(2.0, 10, 0.0, "constant")(7), 2.0)
  with pytest.raises(ValueError, match="decay"):
    optimizer.make_schedule(1.0, 10, 0.1, "exponential")


def test_weight_decay_mask_and_freeze_labels():
  cfg = transformer.EncoderConfig.from_hf(tiny.hf_config("bert", 50))
  params = transformer.init_params(cfg, jax.random.key(0))
  mask = optimizer.weight_decay_mask(params)
  assert mask["layer_0"]["intermediate"]["kernel"] and not mask["layer_0"]["intermediate"]["bias"]
  assert not mask["layer_0"]["output_norm"]["scale"] and not mask["embeddings"]["LayerNorm"]["scale"]
  labels = optimizer.freeze_labels(params, trainable=["layer_1/.*"], frozen=[".*/bias"])
  assert labels["layer_1"]["output"]["kernel"] == "train" and labels["layer_1"]["output"]["bias"] == "freeze"
  assert labels["layer_0"]["output"]["kernel"] == "freeze"
  with pytest.raises(ValueError, match="no parameter matches"):
    optimizer.freeze_labels(params, trainable=["adapter/.*"])


def test_frozen_params_stay_bit_identical():
  cfg = transformer.EncoderConfig.from_hf(tiny.hf_config("bert", 50))
  params = transformer.init_params(cfg, jax.random.key(0))
  tx, _ = optimizer.make_optimizer(params, learning_rate=1e-2, total_steps=5, weight_decay=0.1,
                                   grad_clip_norm=1.0, frozen=["embeddings/.*", "layer_0/.*"])
  opt_state = tx.init(params)
  grads = jax.tree.map(np.ones_like, params)
  new = params
  for _ in range(3):
    updates, opt_state = tx.update(grads, opt_state, new)
    new = optax.apply_updates(new, updates)
  jax.tree.map(np.testing.assert_array_equal, new["embeddings"], params["embeddings"])
  jax.tree.map(np.testing.assert_array_equal, new["layer_0"], params["layer_0"])
  assert not np.array_equal(new["layer_1"]["output"]["kernel"], params["layer_1"]["output"]["kernel"])


def test_group_learning_rates_scale_each_group_and_keep_frozen_params():
  """Adam's first step moves every param by ~its learning rate (sign of the gradient): the head group by 3e-2,
  the rest by 3e-4, frozen params not at all; clipping spans all groups together."""
  params = {"encoder": {"w": np.ones((3,), np.float32), "b": np.ones((2,), np.float32)},
            "head": {"w": np.ones((4,), np.float32)}}
  tx, _ = optimizer.make_optimizer(params, learning_rate=3e-4, total_steps=10, warmup_fraction=0.0,
                                   decay="constant", weight_decay=0.0, grad_clip_norm=1.0,
                                   frozen=["encoder/b"], group_learning_rates=[("head/.*", 3e-2)])
  grads = jax.tree.map(lambda x: np.full_like(x, 5.0), params)
  updates, _ = tx.update(grads, tx.init(params), params)
  np.testing.assert_allclose(updates["head"]["w"], -3e-2, rtol=1e-3)
  np.testing.assert_allclose(updates["encoder"]["w"], -3e-4, rtol=1e-3)
  np.testing.assert_array_equal(updates["encoder"]["b"], 0.0)
  with pytest.raises(ValueError, match="matches no trainable"):
    optimizer.make_optimizer(params, learning_rate=1e-3, total_steps=5, group_learning_rates=[("nope/.*", 1.0)])
