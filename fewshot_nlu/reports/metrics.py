"""The numbers of an intent report, from predictions and gold labels (numpy only): per-intent precision / recall /
F1 and support, micro / macro / weighted averages, the confusion matrix and the most frequent confusions.

Single-label: one gold and one predicted intent per utterance (``out_of_scope`` is a label like any other when
the gold labels or a rejecting model use it). Multi-label (label sets): per-intent counts over the (utterance,
intent) decisions, accuracy = exact match of the sets, and "confusions" pair each missed gold intent with each
spurious predicted intent of the same utterance (``NONE`` when the utterance has only misses, or only spurious
intents), so the matrix reads like the single-label one: row = gold, column = what was predicted instead.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

NONE = "(none)"  # multi-label confusions: no intent on that side


@dataclasses.dataclass(frozen=True)
class LabelScores:
  label: str
  precision: float
  recall: float
  f1: float
  support: int  # gold utterances with the intent
  predicted: int  # utterances predicted with it


@dataclasses.dataclass(frozen=True)
class Confusion:
  gold: str
  predicted: str
  count: int
  example: str | None  # the first utterance confused so, when texts were given


@dataclasses.dataclass(frozen=True)
class Report:
  multilabel: bool
  examples: int
  accuracy: float  # single-label: right intent; multi-label: exact set
  per_label: list[LabelScores]  # sorted by label
  averages: dict[str, dict[str, float]]  # micro / macro / weighted: precision, recall, f1
  confusions: list[Confusion]  # most frequent first
  matrix: np.ndarray  # [len(axis), len(axis)] counts: row = gold, column = predicted (diagonal: right)
  axis: list[str]  # the matrix's labels (multi-label: the intents and NONE)

  def label_scores(self, label: str) -> LabelScores:
    return next(s for s in self.per_label if s.label == label)


def _prf(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Precision, recall, F1 (0 where undefined, as scikit-learn's zero_division=0)."""
  tp, fp, fn = (np.asarray(x, np.float64) for x in (tp, fp, fn))
  precision = np.divide(tp, tp + fp, out=np.zeros_like(tp), where=tp + fp > 0)
  recall = np.divide(tp, tp + fn, out=np.zeros_like(tp), where=tp + fn > 0)
  f1 = np.divide(2 * precision * recall, precision + recall, out=np.zeros_like(tp), where=precision + recall > 0)
  return precision, recall, f1


def _averages(tp, fp, fn, support) -> dict[str, dict[str, float]]:
  micro = _prf(tp.sum(), fp.sum(), fn.sum())
  macro = _prf(tp, fp, fn)
  weights = support / max(support.sum(), 1)
  return {"micro": dict(zip(("precision", "recall", "f1"), map(float, micro))),
          "macro": {k: float(np.mean(v)) if len(v) else 0.0 for k, v in zip(("precision", "recall", "f1"), macro)},
          "weighted": {k: float(np.sum(v * weights)) for k, v in zip(("precision", "recall", "f1"), macro)}}


def _per_label(labels, tp, fp, fn, support, predicted) -> list[LabelScores]:
  precision, recall, f1 = _prf(tp, fp, fn)
  return [LabelScores(l, float(p), float(r), float(f), int(s), int(n))
          for l, p, r, f, s, n in zip(labels, precision, recall, f1, support, predicted)]


def _confusions(matrix: np.ndarray, axis: list[str], examples: dict) -> list[Confusion]:
  off = matrix.copy()
  np.fill_diagonal(off, 0)
  cells = [(int(off[i, j]), axis[i], axis[j]) for i, j in zip(*np.nonzero(off))]
  cells.sort(key=lambda c: (-c[0], c[1], c[2]))
  return [Confusion(g, p, n, examples.get((g, p))) for n, g, p in cells]


def single_label(gold: Sequence[str], predicted: Sequence[str], texts: Sequence[str] | None = None) -> Report:
  """The report of one intent per utterance; the intents are those in ``gold`` or ``predicted`` (macro averages
  weigh each equally, as scikit-learn's classification_report does)."""
  if len(gold) != len(predicted):
    raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
  labels = sorted(set(gold) | set(predicted))
  index = {l: i for i, l in enumerate(labels)}
  g = np.array([index[l] for l in gold], int)
  p = np.array([index[l] for l in predicted], int)
  matrix = np.zeros((len(labels), len(labels)), np.int64)
  np.add.at(matrix, (g, p), 1)
  tp = np.diag(matrix)
  support, predicted_count = matrix.sum(1), matrix.sum(0)
  examples = {}
  if texts is not None:
    for text, a, b in zip(texts, gold, predicted):
      examples.setdefault((a, b), text)
  return Report(False, len(gold), float(np.mean(g == p)) if len(g) else 0.0,
                _per_label(labels, tp, predicted_count - tp, support - tp, support, predicted_count),
                _averages(tp, predicted_count - tp, support - tp, support),
                _confusions(matrix, labels, examples), matrix, labels)


def multi_label(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]],
                texts: Sequence[str] | None = None) -> Report:
  """The report of label sets; micro-F1 and exact match equal ``multi_convfit.labels.scores``'."""
  if len(gold) != len(predicted):
    raise ValueError(f"{len(gold)} gold label sets but {len(predicted)} predictions")
  labels = sorted({l for s in gold for l in s} | {l for s in predicted for l in s})
  axis = labels + [NONE]
  index = {l: i for i, l in enumerate(axis)}
  matrix = np.zeros((len(axis), len(axis)), np.int64)
  support, predicted_count = np.zeros(len(labels), np.int64), np.zeros(len(labels), np.int64)
  examples, exact = {}, 0
  for n, (g, p) in enumerate(zip(gold, predicted)):
    g, p = set(g), set(p)
    exact += g == p
    for l in g:
      support[index[l]] += 1
    for l in p:
      predicted_count[index[l]] += 1
    for l in g & p:
      matrix[index[l], index[l]] += 1
    missed, spurious = sorted(g - p) or [NONE], sorted(p - g) or [NONE]
    for a in missed:
      for b in spurious:
        if a != b:  # both NONE: nothing went wrong
          matrix[index[a], index[b]] += 1
          if texts is not None:
            examples.setdefault((a, b), texts[n])
  tp = np.diag(matrix)[: len(labels)]
  return Report(True, len(gold), exact / len(gold) if len(gold) else 0.0,
                _per_label(labels, tp, predicted_count - tp, support - tp, support, predicted_count),
                _averages(tp, predicted_count - tp, support - tp, support),
                _confusions(matrix, axis, examples), matrix, axis)


def build(gold: Sequence, predicted: Sequence, texts: Sequence[str] | None = None) -> Report:
  """``single_label`` for string labels, ``multi_label`` for label sets (lists / tuples / sets)."""
  is_set = [not isinstance(x, str) for x in list(gold) + list(predicted)]
  if any(is_set) and not all(is_set):
    raise ValueError("gold and predicted labels mix strings and label sets; give one intent per utterance, or a "
                     "set for every utterance")
  return multi_label(gold, predicted, texts) if is_set and all(is_set) else single_label(gold, predicted, texts)
