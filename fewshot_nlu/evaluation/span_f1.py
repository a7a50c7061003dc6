"""Span-level precision / recall / F1 as conlleval computes them (CoNLL-2000 ``conlleval``, 2004-01-26), the
scorer of Hou et al. (2020) and Retriever (App. A.1).

A chunk is a maximal run opened by ``B-X``, or by an ``I-X`` that cannot continue an ``X`` chunk (conlleval's
startOfChunk), read by ``data.builders.joint.bio_spans``; a predicted chunk is correct when a gold chunk has
the same label, start and end. Few-shot slot filling reports F1 per episode (over all its query utterances)
averaged over episodes.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from fewshot_nlu.data.bio import bio_spans


@dataclasses.dataclass
class SpanCounts:
  correct: int = 0
  gold: int = 0
  predicted: int = 0

  def add(self, gold_tags: Sequence[str], predicted_tags: Sequence[str]) -> "SpanCounts":
    """Counts one utterance's chunks (both tag sequences cover the same words)."""
    if len(gold_tags) != len(predicted_tags):
      raise ValueError(f"{len(gold_tags)} gold tags but {len(predicted_tags)} predicted tags")
    return self.add_spans(set(bio_spans(gold_tags)), set(bio_spans(predicted_tags)))

  def add_spans(self, gold: set, predicted: set) -> "SpanCounts":
    """Counts one utterance's chunks given as sets of (label, start, end) (word or character positions)."""
    self.correct += len(gold & predicted)
    self.gold += len(gold)
    self.predicted += len(predicted)
    return self

  @property
  def precision(self) -> float:
    return 100.0 * self.correct / self.predicted if self.predicted else 0.0

  @property
  def recall(self) -> float:
    return 100.0 * self.correct / self.gold if self.gold else 0.0

  @property
  def f1(self) -> float:
    return float(f1_of((self.correct, self.gold, self.predicted)))


def counts_by_label(gold_tags: Sequence[str], predicted_tags: Sequence[str], labels: dict[str, int]) -> np.ndarray:
  """One utterance's chunk counts per label, ``[len(labels), 3]`` = (correct, gold, predicted) (``SpanCounts``'
  counts split by the chunk's label; a label not in ``labels`` is not counted)."""
  out = np.zeros((len(labels), 3), np.int64)
  gold, predicted = set(bio_spans(gold_tags)), set(bio_spans(predicted_tags))
  for column, spans in ((0, gold & predicted), (1, gold), (2, predicted)):
    for label, _, _ in spans:
      if label in labels:
        out[labels[label], column] += 1
  return out


def f1_of(counts: np.ndarray) -> np.ndarray:
  """Micro F1 (in %) of pooled span counts, ``counts[..., :]`` = (correct, gold, predicted), for each leading
  index (``SpanCounts.f1`` for one)."""
  counts = np.asarray(counts, dtype=np.float64)
  correct, gold, predicted = counts[..., 0], counts[..., 1], counts[..., 2]
  with np.errstate(divide="ignore", invalid="ignore"):
    precision = np.where(predicted > 0, 100.0 * correct / predicted, 0.0)
    recall = np.where(gold > 0, 100.0 * correct / gold, 0.0)
    return np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)


def paired_bootstrap_lead(first: np.ndarray, second: np.ndarray, resamples: int, rng: np.random.Generator) -> float:
  """The share of paired bootstrap resamples of the utterances (Efron & Tibshirani, 1993; Koehn, 2004) in which
  ``first``'s pooled micro F1 is above ``second``'s: ``first`` and ``second`` are [utterances, 3] per-utterance
  counts (correct, gold, predicted) of two systems on the same utterances; each resample draws as many utterances
  with replacement and pools both systems' counts over the same draw."""
  first, second = np.asarray(first), np.asarray(second)
  if first.shape != second.shape or first.ndim != 2 or first.shape[1] != 3:
    raise ValueError(f"per-utterance counts of shape [utterances, 3] expected, got {first.shape} and {second.shape}")
  draws = rng.integers(0, len(first), size=(resamples, len(first)))
  return float(np.mean(f1_of(first[draws].sum(1)) > f1_of(second[draws].sum(1))))
