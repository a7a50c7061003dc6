"""``reports.metrics``: per-intent numbers and confusions by hand, single- and multi-label."""

import pytest

from fewshot_nlu.methods.multi_convfit import labels as multilabel
from fewshot_nlu.reports import metrics


def test_single_label_numbers_by_hand():
  gold = ["a", "a", "a", "b", "b", "c"]
  predicted = ["a", "a", "b", "b", "c", "c"]
  r = metrics.single_label(gold, predicted, texts=[f"t{i}" for i in range(6)])
  a, b, c = (r.label_scores(l) for l in "abc")
  assert (a.precision, a.recall, a.f1, a.support, a.predicted) == (1.0, pytest.approx(2 / 3), pytest.approx(0.8), 3, 2)
  assert (b.precision, b.recall, b.f1) == (0.5, 0.5, 0.5)
  assert (c.precision, c.recall, c.f1) == (0.5, 1.0, pytest.approx(2 / 3))
  assert r.accuracy == pytest.approx(4 / 6) and r.averages["micro"]["f1"] == pytest.approx(4 / 6)
  assert r.averages["macro"]["recall"] == pytest.approx((2 / 3 + 0.5 + 1.0) / 3)
  assert r.averages["weighted"]["recall"] == pytest.approx((3 * 2 / 3 + 2 * 0.5 + 1.0) / 6)
  assert [(x.gold, x.predicted, x.count, x.example) for x in r.confusions] == [("a", "b", 1, "t2"), ("b", "c", 1, "t4")]
  assert r.matrix.tolist() == [[2, 1, 0], [0, 1, 1], [0, 0, 1]]


def test_multi_label_pairs_misses_with_spurious_intents_and_agrees_with_multilabel_scores():
  gold = [("a", "b"), ("a",), ("c",), (), ("b",)]
  predicted = [("a", "c"), (), ("c", "b"), ("a",), ("b",)]
  r = metrics.multi_label(gold, predicted)
  expected = multilabel.scores(gold, predicted)
  assert r.averages["micro"]["f1"] == pytest.approx(expected["f1"]) and r.accuracy == expected["exact_match"]
  pairs = {(x.gold, x.predicted): x.count for x in r.confusions}
  assert pairs == {("b", "c"): 1, ("a", metrics.NONE): 1, (metrics.NONE, "b"): 1, (metrics.NONE, "a"): 1}
  assert r.label_scores("b").support == 2 and r.label_scores("b").predicted == 2 and r.label_scores("b").recall == 0.5
  with pytest.raises(ValueError, match="mix strings and label sets"):
    metrics.build(["a", ("b",)], ["a", ("b",)])
