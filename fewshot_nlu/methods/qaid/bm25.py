"""Okapi BM25 (Robertson & Zaragoza 2009) over a small document set, for the hard negatives of QAID's ColBERT
triplet baseline (§3.3.1: "we run the query against all answers using bm25 and select the negatives from the
most similar answers").

    score(q, d) = sum_{w in q} idf(w) * f(w, d) (k1 + 1) / (f(w, d) + k1 (1 - b + b |d| / avgdl))
    idf(w) = ln(1 + (N - n(w) + 0.5) / (n(w) + 0.5))          (the non-negative Lucene form)

Words: lower-cased runs of letters and digits.
"""

from __future__ import annotations

import collections
import math
import re
from typing import Sequence

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
  return _WORD.findall(text.lower())


class BM25:

  def __init__(self, documents: Sequence[str], *, k1: float = 1.2, b: float = 0.75):
    self.k1, self.b = k1, b
    self.docs = [collections.Counter(words(d)) for d in documents]
    self.lengths = np.array([sum(c.values()) for c in self.docs], np.float64)
    self.avgdl = max(float(self.lengths.mean()), 1e-9) if len(self.docs) else 1.0
    df = collections.Counter(w for c in self.docs for w in c)
    n = len(self.docs)
    self.idf = {w: math.log(1.0 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

  def scores(self, query: str) -> np.ndarray:
    """[num documents] BM25 scores of ``query`` (each query word counted once per occurrence)."""
    out = np.zeros(len(self.docs))
    norm = self.k1 * (1 - self.b + self.b * self.lengths / self.avgdl)
    for w in words(query):
      if w not in self.idf:
        continue
      tf = np.array([c.get(w, 0) for c in self.docs], np.float64)
      out += self.idf[w] * tf * (self.k1 + 1) / (tf + norm)
    return out

  def hard_negatives(self, query: str, positive: int, count: int) -> list[int]:
    """The ``count`` highest-scoring documents other than ``positive`` (ties: lower index first), cycling
    through them when fewer exist."""
    ranked = [int(i) for i in np.argsort(-self.scores(query), kind="stable") if i != positive]
    if not ranked:
      raise ValueError("BM25 hard negatives need at least two documents")
    return [ranked[i % len(ranked)] for i in range(count)]
