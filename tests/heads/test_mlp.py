"""The MLP head (``heads.mlp``): its loss (single-label and Multi-ConvFiT's Eq. (1) smoothing) against numpy,
training on separable classes and label sets, save / load, class weights, and its config checks."""

import dataclasses
import re

import ml_collections
import numpy as np
import pytest

from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.heads import mlp as mlp_head


def test_mlp_loss_matches_numpy():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(4, 3)).astype(np.float32)
  onehot = np.eye(3, dtype=np.float32)[[0, 2, 1, 1]]
  weights = np.array([1, 1, 1, 0], np.float32)
  eps = 0.1
  smooth = onehot * (1 - eps) + eps / 3
  log_softmax = logits - np.log(np.exp(logits).sum(1, keepdims=True))
  expected = -(smooth * log_softmax).sum(1)[:3].mean()
  got = mlp_head.loss(logits, onehot, weights, multilabel=False, label_smoothing=eps)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
  multi = np.array([[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0]], np.float32)
  # Multi-ConvFiT Eq. (1), ls = 1 - eps: positives ls, negatives (1 - ls) * M_i / |C|
  t = np.array([[1 - eps, 2 * eps / 3, 1 - eps], [eps / 3, eps / 3, 1 - eps], [1 - eps, 1 - eps, 2 * eps / 3],
                [eps / 3, 1 - eps, eps / 3]], np.float32)
  p = 1 / (1 + np.exp(-logits))
  expected = -(t * np.log(p) + (1 - t) * np.log(1 - p)).sum(1)[:3].mean()
  got = mlp_head.loss(logits, multi, weights, multilabel=True, label_smoothing=eps)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_mlp_learns_separable_classes_and_round_trips(tmp_path):
  rng = np.random.default_rng(0)
  centres = rng.normal(size=(3, 16)) * 3
  labels = np.repeat(np.arange(3), 20)
  features = (centres[labels] + rng.normal(size=(60, 16))).astype(np.float32)
  layers = mlp_head.train(features, np.eye(3, dtype=np.float32)[labels],
                          mlp_head.MLPConfig(hidden=(32, 32), epochs=30, dropout=0.5, learning_rate=0.1))
  probs = mlp_head.predict_proba(layers, features)
  assert (probs.argmax(1) == labels).mean() == 1.0
  np.testing.assert_allclose(probs.sum(1), 1, rtol=1e-5)
  mlp_head.save(tmp_path, layers)
  again = mlp_head.load(tmp_path)
  np.testing.assert_array_equal(mlp_head.predict_proba(again, features), probs)


def test_class_weights_make_every_class_weigh_the_same():
  onehot = np.eye(4, dtype=np.float32)[[0, 1, 1, 1, 3, 3]]  # class 2 has no rows: 3 classes present
  weights = mlp_head.class_weights(onehot)
  np.testing.assert_allclose(weights, [6 / 3, 6 / 9, 6 / 9, 6 / 9, 6 / 6, 6 / 6])
  np.testing.assert_allclose([weights[onehot[:, c] > 0].sum() for c in (0, 1, 3)], 2.0)
  assert (mlp_head.class_weights(np.eye(3, dtype=np.float32)[[0, 1, 2, 2, 1, 0]]) == 1.0).all()
  with pytest.raises(ValueError, match="single-label"):
    mlp_head.MLPConfig(multilabel=True, class_balanced=True)


def test_class_balanced_head_is_the_plain_head_on_a_balanced_pool_and_lifts_a_rare_class():
  rng = np.random.default_rng(0)
  centres = rng.normal(size=(3, 8))
  linear = dict(hidden=(), dropout=0.0, optimizer="adamw", learning_rate=1e-2, epochs=50, decay="constant")
  labels = np.repeat(np.arange(3), 4)
  features = (centres[labels] + rng.normal(size=(12, 8))).astype(np.float32)
  targets = np.eye(3, dtype=np.float32)[labels]
  plain = mlp_head.train(features, targets, mlp_head.MLPConfig(**linear))
  balanced = mlp_head.train(features, targets, mlp_head.MLPConfig(**linear, class_balanced=True))
  np.testing.assert_array_equal(balanced[0]["kernel"], plain[0]["kernel"])  # weights of 1.0: the same steps
  # one example of class 2 among 20 of classes 0 and 1, which overlap it: balancing raises its probability
  labels = np.array([0] * 20 + [1] * 20 + [2])
  features = (centres[labels] * 0.3 + rng.normal(size=(41, 8))).astype(np.float32)
  targets = np.eye(3, dtype=np.float32)[labels]
  probe = (centres[2] * 0.3)[None].astype(np.float32)
  rare = [mlp_head.predict_proba(mlp_head.train(features, targets, mlp_head.MLPConfig(**linear, class_balanced=b)),
                                 probe)[0, 2] for b in (False, True)]
  assert rare[1] > rare[0]


def test_multilabel_smoothing_is_eq1():
  """y' = ls for positives, (1 - ls) M_i / |C| otherwise (M_i labels of row i); ls = 0.95."""
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(3, 4)).astype(np.float32)
  targets = np.array([[1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]], np.float32)
  ls = 0.95
  smoothed = np.where(targets == 1, ls, (1 - ls) * targets.sum(1, keepdims=True) / 4)
  assert smoothed[0, 2] == pytest.approx(0.025) and smoothed[1, 0] == 0 and smoothed[2, 0] == pytest.approx(0.0125)
  p = 1 / (1 + np.exp(-logits))
  expected = -(smoothed * np.log(p) + (1 - smoothed) * np.log(1 - p)).sum(1).mean()
  got = mlp_head.loss(logits, targets, np.ones(3, np.float32), multilabel=True, label_smoothing=1 - ls)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_multilabel_mlp_with_adamw_learns_label_sets():
  rng = np.random.default_rng(0)
  centres = rng.normal(size=(3, 16)) * 3
  targets = rng.integers(0, 2, size=(90, 3)).astype(np.float32)
  features = targets @ centres + rng.normal(size=(90, 16)) * 0.3
  config = mlp_head.MLPConfig(hidden=(32,), dropout=0.1, learning_rate=3e-3, epochs=60, batch_size=16,
                              multilabel=True, label_smoothing=0.05, optimizer="adamw", weight_decay=0.02,
                              warmup_fraction=0.1, decay="cosine")
  layers = mlp_head.train(features, targets, config)
  predicted = mlp_head.predict_proba(layers, features, multilabel=True) >= 0.3
  assert (predicted == (targets > 0)).all(1).mean() > 0.9
  with pytest.raises(ValueError, match="optimizer"):
    mlp_head.MLPConfig(optimizer="lbfgs")


def test_mlp_head_weight_decay_must_not_be_negative():
  from configs import common
  config = ml_collections.ConfigDict({"classifier": {"mlp": common.mlp_classifier(weight_decay=-0.01)}})
  with pytest.raises(ConfigError, match=re.escape("config.classifier.mlp.weight_decay: must be a number >= 0")):
    mlp_head.validate_config(config, "classifier.mlp")


def test_dropout_site_is_the_input_of_every_hidden_layer_or_the_output_of_every_hidden_activation():
  """Casanueva et al.'s released MLP drops units of each hidden layer's *input* (the encoding itself, for the
  first); ``hidden_outputs`` drops hidden activations instead. One hidden unit summing 8 ones shows which: a
  dropped input moves the sum by 2 (= 1 / (1 - 0.5)) per unit kept, a dropped activation makes it 0 or 16."""
  import jax
  layers = [{"kernel": np.ones((8, 1), np.float32), "bias": np.zeros(1, np.float32)},
            {"kernel": np.ones((1, 1), np.float32), "bias": np.zeros(1, np.float32)}]
  x = np.ones((1, 8), np.float32)
  sums = {site: {float(mlp_head.logits(layers, x, 0.5, jax.random.key(k), site)[0, 0]) for k in range(20)}
          for site in mlp_head.DROPOUT_SITES}
  assert sums["hidden_outputs"] <= {0.0, 16.0}
  assert sums["hidden_inputs"] <= set(range(0, 17, 2)) and sums["hidden_inputs"] - {0.0, 16.0}
  assert float(mlp_head.logits(layers, x, 0.5)[0, 0]) == 8.0  # no rng: no dropout (inference)
  linear = layers[:1]  # no hidden layer (logistic regression): nothing is dropped at either site
  for site in mlp_head.DROPOUT_SITES:
    assert float(mlp_head.logits(linear, x, 0.5, jax.random.key(0), site)[0, 0]) == 8.0
  with pytest.raises(ValueError, match="dropout_site"):
    mlp_head.MLPConfig(dropout_site="everywhere")
  from configs import common
  config = ml_collections.ConfigDict({"classifier": {"mlp": common.mlp_classifier(dropout_site="everywhere")}})
  with pytest.raises(ConfigError, match=re.escape("config.classifier.mlp.dropout_site")):
    mlp_head.validate_config(config, "classifier.mlp")


@pytest.mark.parametrize("multilabel", [False, True])
def test_a_few_rows_scored_on_the_host_equal_the_jitted_head(multilabel, monkeypatch):
  """``predict_proba`` of up to ``HOST_ROWS`` rows runs in numpy, more in one jitted program: the same numbers."""
  rng = np.random.default_rng(0)
  layers = [{"kernel": rng.normal(size=(6, 5)).astype(np.float32), "bias": rng.normal(size=5).astype(np.float32)},
            {"kernel": rng.normal(size=(5, 3)).astype(np.float32), "bias": rng.normal(size=3).astype(np.float32)}]
  features = rng.normal(size=(3, 6)).astype(np.float32)
  host = mlp_head.predict_proba(layers, features, multilabel)
  monkeypatch.setattr(mlp_head, "HOST_ROWS", 0)
  jitted = mlp_head.predict_proba(layers, features, multilabel)
  np.testing.assert_allclose(host, jitted, rtol=1e-5, atol=1e-6)
  assert host.dtype == np.float32 and host.shape == (3, 3)


def test_the_config_default_of_every_mlp_field_is_the_head_default():
  """``defaults.common.mlp_classifier`` spells the head's defaults out (config files import no jax): they agree."""
  from configs import common
  defaults = common.mlp_classifier()
  for field in dataclasses.fields(mlp_head.MLPConfig):
    if field.name in defaults:
      assert defaults[field.name] == field.default, field.name
