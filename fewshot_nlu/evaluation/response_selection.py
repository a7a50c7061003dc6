"""Response selection by similarity (DSE §4.2.2, "Top-k-100 accuracy"; ConvFiT Stage 1's R@1 among 100)."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

Encode = Callable[[Sequence[str]], np.ndarray]


def true_response_ranks(queries: np.ndarray, responses: np.ndarray, group: int = 100) -> np.ndarray:
  """Rank (1 = best) of each query's true response (same row) among the ``group`` responses of its block of
  consecutive rows: the true one and ``group - 1`` others. Ties count in the true response's favour.
  Rows past the last whole block are not scored."""
  ranks = []
  for start in range(0, len(queries) // group * group, group):
    scores = queries[start:start + group] @ responses[start:start + group].T
    ranks.extend(1 + np.sum(scores > np.diag(scores)[:, None], axis=1))
  return np.asarray(ranks, int)


def response_selection(encode: Encode, queries: Sequence[str], responses: Sequence[str], *, group: int = 100,
                       ks: Sequence[int] = (1, 3, 10), seed: int = 0) -> dict:
  """Top-k-of-``group`` accuracy (``r<k>_at_<group>``) and MRR: every query ranks its true response among it
  and ``group - 1`` responses of other pairs, by the cosine of ``encode``d vectors (unit length).

  Pairs are shuffled (fixed ``seed``) before cutting blocks: consecutive pairs of one dialogue overlap (a
  response is the next pair's query), so blocks in raw order would hold near-copies of the answer; after the
  shuffle the ``group - 1`` distractors are a random sample of the other pairs' responses."""
  order = np.random.default_rng(seed).permutation(len(queries))
  n = len(queries) // group * group
  if n == 0:
    return {}
  q = encode([queries[i] for i in order[:n]])
  r = encode([responses[i] for i in order[:n]])
  ranks = true_response_ranks(q, r, group)
  results = {f"r{k}_at_{group}": float(np.mean(ranks <= k)) for k in ks}
  results.update(mrr=float(np.mean(1.0 / ranks)), num_eval=int(n))
  return results
