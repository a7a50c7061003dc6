"""Out-of-scope detection metrics of any single-label intent model whose predictions carry a score: the DSE
suite's four (``prototypes.oos_metrics``: accuracy, in-scope accuracy, binary accuracy, OOS recall) plus OOS
precision and F1 (Larson et al. 2019 report recall; precision says how much in-scope traffic a threshold throws
away with it)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from fewshot_nlu.models import prototypes
from fewshot_nlu.models.protocol import OUT_OF_SCOPE


def detection_metrics(predicted: Sequence[str], scores: np.ndarray, gold: Sequence[str], threshold: float,
                      oos_label: str = OUT_OF_SCOPE) -> dict[str, float]:
  """Queries scoring under ``threshold`` are rejected (called ``oos_label``); ``gold`` holds ``oos_label`` for
  the out-of-scope queries. ``in_accuracy``: right intent and not rejected, over the in-scope queries;
  ``oos_recall`` / ``oos_precision`` / ``oos_f1``: of rejection as the detector of out-of-scope queries;
  ``rejected``: how many queries were rejected."""
  scores = np.asarray(scores, np.float64)
  out = prototypes.oos_metrics(np.asarray(predicted), scores, gold, threshold, oos_label)
  rejected = scores < threshold
  is_oos = np.asarray(gold) == oos_label
  caught = int(np.sum(rejected & is_oos))
  precision = caught / int(rejected.sum()) if rejected.any() else 0.0
  recall = out["oos_recall"]
  out.update(oos_precision=precision, rejected=int(rejected.sum()),
             oos_f1=2 * precision * recall / (precision + recall) if precision + recall else 0.0)
  return out
