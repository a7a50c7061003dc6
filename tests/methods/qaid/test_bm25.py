"""BM25 (``methods.qaid.bm25``) by hand, and hard negatives that skip the positive."""

import math

import numpy as np

from fewshot_nlu.methods.qaid.bm25 import BM25


def test_bm25_by_hand_and_hard_negatives_skip_the_positive():
  docs = ["card arrival", "card not working", "top up failed", "lost or stolen card card"]
  bm25 = BM25(docs)
  n, avgdl, k1, b = 4, (2 + 3 + 3 + 5) / 4, 1.2, 0.75
  idf_card = math.log(1 + (n - 3 + 0.5) / (3 + 0.5))
  idf_once = math.log(1 + (n - 1 + 0.5) / (1 + 0.5))  # "not", "working": one document each
  term = lambda tf, dl: tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))  # noqa: E731
  want = [idf_card * term(1, 2), idf_card * term(1, 3) + 2 * idf_once * term(1, 3), 0.0, idf_card * term(2, 5)]
  np.testing.assert_allclose(bm25.scores("my card is not working"), want, rtol=1e-12)
  assert bm25.hard_negatives("my card is not working", positive=1, count=5) == [3, 0, 2, 3, 0]
