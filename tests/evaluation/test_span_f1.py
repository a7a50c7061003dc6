"""The span scorer (``evaluation.span_f1``) agrees with conlleval on a recorded fixture."""

import json
import pathlib

import pytest

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
