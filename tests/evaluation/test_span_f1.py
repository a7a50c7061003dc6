"""The span scorer (``evaluation.span_f1``) agrees with conlleval on a recorded fixture."""

import json
import pathlib

import numpy as np
import pytest

from fewshot_nlu.evaluation import span_f1
from fewshot_nlu.evaluation.span_f1 import SpanCounts

FIXTURES = pathlib.Path(__file__).parents[1] / "fixtures"


def test_span_scorer_agrees_with_conlleval():
  fixture = json.loads((FIXTURES / "conlleval_spans.json").read_text())
  counts = SpanCounts()
  for gold, predicted in fixture["sentences"]:
    counts.add(gold, predicted)
  expected = fixture["conlleval"]
  assert (counts.correct, counts.gold, counts.predicted) == (expected["correct"], expected["found_gold"],
                                                             expected["found_guessed"])
  p, r = 100 * expected["correct"] / expected["found_guessed"], 100 * expected["correct"] / expected["found_gold"]
  assert counts.f1 == pytest.approx(2 * p * r / (p + r))
  assert SpanCounts().f1 == 0.0


def test_f1_of_pooled_counts_is_span_counts_f1():
  rng = np.random.default_rng(0)
  rows = rng.integers(0, 6, size=(50, 3))
  rows[:, 0] = np.minimum(rows[:, 0], rows[:, 1:].min(1))  # correct <= gold, predicted
  c, g, p = rows.sum(0)
  expected = 2 * (c / p) * (c / g) / (c / p + c / g) * 100  # F1 = 2PR / (P + R)
  np.testing.assert_allclose(span_f1.f1_of(rows.sum(0)), expected, rtol=1e-12)
  np.testing.assert_allclose(span_f1.SpanCounts(int(c), int(g), int(p)).f1, expected, rtol=1e-12)
  assert span_f1.f1_of(np.zeros(3)) == 0.0  # nothing predicted, nothing gold
  np.testing.assert_allclose(span_f1.f1_of([[2, 4, 4], [0, 0, 3]]), [50.0, 0.0])


def test_paired_bootstrap_lead_against_a_plain_loop():
  """The share of resamples in which the first system's pooled F1 is above the second's, against a loop of
  resamples drawn from the same generator state."""
  rng = np.random.default_rng(1)
  gold = rng.integers(1, 4, size=30)
  first = np.stack([np.minimum(gold, rng.integers(0, 4, 30)), gold, rng.integers(1, 4, 30)], 1)
  second = np.stack([np.minimum(gold, rng.integers(0, 3, 30)), gold, rng.integers(1, 4, 30)], 1)
  first[:, 0] = np.minimum(first[:, 0], first[:, 2])
  second[:, 0] = np.minimum(second[:, 0], second[:, 2])
  lead = span_f1.paired_bootstrap_lead(first, second, 200, np.random.default_rng(7))
  draws = np.random.default_rng(7).integers(0, 30, size=(200, 30))
  wins = sum(span_f1.SpanCounts(*map(int, first[d].sum(0))).f1 > span_f1.SpanCounts(*map(int, second[d].sum(0))).f1
             for d in draws)
  assert lead == wins / 200
  assert span_f1.paired_bootstrap_lead(first, first, 50, rng) == 0.0  # a tie is no lead
  better = second.copy(); better[:, 0] = np.minimum(better[:, 1], better[:, 2])  # every predicted span it can get
  assert span_f1.paired_bootstrap_lead(better, second, 100, rng) > 0.9
  with pytest.raises(ValueError, match="utterances, 3"):
    span_f1.paired_bootstrap_lead(first, second[:, :2], 10, rng)


def test_counts_by_label_split_the_utterance_counts_by_each_chunk_label():
  gold = ["B-a", "I-a", "O", "B-b", "O", "B-a"]
  predicted = ["B-a", "I-a", "O", "B-a", "O", "B-c"]  # a right; b read as a; the last a read as c
  labels = {"a": 0, "b": 1}  # c is not counted
  counts = span_f1.counts_by_label(gold, predicted, labels)
  np.testing.assert_array_equal(counts, [[1, 2, 2], [0, 1, 0]])
  whole = span_f1.SpanCounts().add(gold, predicted)
  assert (whole.correct, whole.gold) == tuple(counts.sum(0)[:2]) and whole.predicted == counts[:, 2].sum() + 1
