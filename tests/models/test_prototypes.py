"""Prototypes (``models.prototypes``): support sampling, class means as unit vectors classifying by cosine, and
the out-of-scope metrics, on hand-made vectors."""

import numpy as np
import pytest

from fewshot_nlu.models import prototypes


def test_sample_support_takes_k_per_label_deterministically():
  labels = ["a"] * 5 + ["b"] * 2 + ["c"] * 4
  idx = prototypes.sample_support(labels, 3, seed=0)
  picked = [labels[i] for i in idx]
  assert picked.count("a") == 3 and picked.count("b") == 2 and picked.count("c") == 3
  np.testing.assert_array_equal(idx, prototypes.sample_support(labels, 3, seed=0))
  assert any(not np.array_equal(idx, prototypes.sample_support(labels, 3, seed=s)) for s in range(1, 6))


def test_prototypes_are_mean_unit_vectors_and_classify_by_cosine():
  vectors = np.array([[2.0, 0.0], [0.0, 1.0], [0.0, -3.0], [0.0, 5.0]])
  names, protos = prototypes.prototypes(vectors, ["x", "y", "y", "y"])
  assert names == ["x", "y"]
  np.testing.assert_allclose(protos, [[1, 0], [0, 1]], atol=1e-12)  # y: mean of (0,1), (0,-1), (0,1)
  predicted, best = prototypes.best_prototype(np.array([[1.0, 0.1], [0.2, 3.0]]), names, protos)
  assert list(predicted) == ["x", "y"]
  np.testing.assert_allclose(best, [1 / np.sqrt(1.01), 3 / np.sqrt(9.04)])


def test_oos_metrics_by_hand():
  predicted = np.array(["a", "b", "a", "b", "a"])
  best = np.array([0.9, 0.8, 0.3, 0.2, 0.7])
  gold = ["a", "a", "oos", "oos", "oos"]
  m = prototypes.oos_metrics(predicted, best, gold, threshold=0.5)
  # final: a, b, oos, oos, a -> right: 1, 0, 1, 1, 0
  assert m["accuracy"] == pytest.approx(3 / 5) and m["in_accuracy"] == pytest.approx(1 / 2)
  assert m["oos_accuracy"] == pytest.approx(4 / 5)  # rejected F F T T F vs oos F F T T T
  assert m["oos_recall"] == pytest.approx(2 / 3)
  t = prototypes.oos_thresholds(best)
  assert t["mean"] == pytest.approx(best.mean()) and t["mean-std"] == pytest.approx(best.mean() - best.std())
