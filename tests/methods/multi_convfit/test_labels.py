"""Multi-label decisions (``methods.multi_convfit.labels``): micro F1 and exact match, thresholds (global and
per intent), out-of-fold probabilities."""

import numpy as np
import pytest

from fewshot_nlu.methods.multi_convfit import labels as multilabel


def test_scores_micro_f1_and_exact_match():
  gold = [("a", "b"), ("c",), (), ("a",)]
  predicted = [("a",), ("c",), ("b",), ("a",)]
  s = multilabel.scores(gold, predicted)
  # tp = 3 (a, c, a), fp = 1 (b), fn = 1 (b)
  assert s["precision"] == pytest.approx(0.75) and s["recall"] == pytest.approx(0.75)
  assert s["f1"] == pytest.approx(0.75) and s["exact_match"] == pytest.approx(0.5)


def test_decide_and_per_intent_thresholds():
  probs = np.array([[0.9, 0.35, 0.1], [0.2, 0.31, 0.6], [0.5, 0.1, 0.25]], np.float32)
  assert multilabel.decide(probs, 0.3, ["a", "b", "c"]) == [("a", "b"), ("b", "c"), ("a",)]
  assert multilabel.decide(probs, np.array([0.95, 0.3, 0.2]), ["a", "b", "c"]) == [("b",), ("b", "c"), ("c",)]
  targets = np.array([[1, 0, 0], [0, 0, 1], [1, 0, 1]], np.float32)
  best = multilabel.best_thresholds(probs, targets, default=0.3)
  # a: any threshold in (0.2, 0.5] separates -> nearest to 0.3 is 0.3; b never positive -> default;
  # c: positives 0.6 and 0.25, negative 0.1 -> a threshold in (0.1, 0.25], nearest to 0.3 is 0.25
  np.testing.assert_allclose(best, [0.3, 0.3, 0.25])


def test_out_of_fold_probabilities_never_see_their_own_example():
  features = np.arange(10, dtype=np.float32)[:, None]
  targets = np.zeros((10, 1), np.float32)
  seen = []

  def fit_predict(x, y, held):
    seen.append((set(x[:, 0]), set(held[:, 0])))
    return np.full((len(held), 1), len(x), np.float32)

  out = multilabel.out_of_fold_probabilities(features, targets, 5, 0, fit_predict)
  assert len(seen) == 5 and all(not (train & held) for train, held in seen)
  np.testing.assert_array_equal(out[:, 0], 8)
