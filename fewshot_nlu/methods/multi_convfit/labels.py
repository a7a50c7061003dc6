"""Multi-label intent detection arithmetic (Multi-ConvFiT §2.2, §3): label sets <-> multi-hot vectors, the
decision threshold theta, per-intent thresholds calibrated on out-of-fold predictions, and the two metrics
the paper reports: micro-averaged F1 over (example, intent) decisions and exact-match accuracy (the predicted
set equals the gold set).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

# Each training example's probabilities from a classifier trained without it (shared with the single-label
# models' rejection thresholds, so it lives in the core).
from fewshot_nlu.models.rejection import out_of_fold as out_of_fold_probabilities  # noqa: F401

LabelSet = tuple[str, ...]


def multi_hot(label_sets: Sequence[Sequence[str]], labels: Sequence[str]) -> np.ndarray:
  """[N, C] float32; labels outside ``labels`` are ignored (a gold intent never seen in training)."""
  column = {l: i for i, l in enumerate(labels)}
  out = np.zeros((len(label_sets), len(labels)), np.float32)
  for row, items in enumerate(label_sets):
    for label in items:
      if label in column:
        out[row, column[label]] = 1.0
  return out


def decide(probabilities: np.ndarray, thresholds: float | np.ndarray, labels: Sequence[str]) -> list[LabelSet]:
  """The intents whose probability is >= their threshold (theta, one per intent or shared), in label order."""
  chosen = probabilities >= np.broadcast_to(np.asarray(thresholds, np.float32), probabilities.shape[-1:])
  return [tuple(labels[c] for c in np.flatnonzero(row)) for row in chosen]


def scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict[str, float]:
  """Micro precision / recall / F1 over all (example, intent) decisions, and exact-match accuracy."""
  if len(gold) != len(predicted):
    raise ValueError(f"{len(gold)} gold label sets but {len(predicted)} predictions")
  tp = fp = fn = exact = 0
  for g, p in zip(gold, predicted):
    g, p = set(g), set(p)
    tp += len(g & p)
    fp += len(p - g)
    fn += len(g - p)
    exact += g == p
  precision = tp / (tp + fp) if tp + fp else 0.0
  recall = tp / (tp + fn) if tp + fn else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return {"f1": f1, "precision": precision, "recall": recall, "exact_match": exact / len(gold) if gold else 0.0}


def best_thresholds(probabilities: np.ndarray, targets: np.ndarray, default: float,
                    grid: Sequence[float] = tuple(np.round(np.arange(0.05, 0.96, 0.05), 2))) -> np.ndarray:
  """Per intent, the threshold of ``grid`` maximising that intent's F1 on (``probabilities``, ``targets``),
  ties broken towards ``default``; intents without a positive example keep ``default``."""
  grid = np.asarray(sorted(grid, key=lambda t: abs(t - default)), np.float32)
  out = np.full(targets.shape[1], default, np.float32)
  for c in range(targets.shape[1]):
    gold = targets[:, c] > 0
    if not gold.any():
      continue
    predicted = probabilities[:, c][None, :] >= grid[:, None]  # [thresholds, N]
    tp = (predicted & gold).sum(1)
    f1 = 2 * tp / np.maximum(predicted.sum(1) + gold.sum(), 1)
    out[c] = grid[int(np.argmax(f1))]  # argmax keeps the first maximum: the one nearest the default
  return out
