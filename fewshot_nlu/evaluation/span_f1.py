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
    p, r = self.precision, self.recall
    return 2 * p * r / (p + r) if p + r else 0.0
