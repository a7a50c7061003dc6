"""Prototypical-network intent classification and out-of-scope detection (DSE §4.2.2; Snell et al. 2017).

Everything here is numpy on already-encoded vectors: a prototype is the mean of a class's support
embeddings, a query goes to the class whose prototype is most cosine-similar, and (for out-of-scope
detection) is rejected when that best similarity is under a threshold.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from fewshot_nlu.index import normalize

OOS = "oos"


def sample_support(labels: Sequence[str], shots: int, seed: int) -> np.ndarray:
  """Indices of ``shots`` examples of every label (all of a label's examples when it has fewer), drawn without
  replacement with ``np.random.default_rng(seed)``; labels in sorted order, indices sorted within a label."""
  rng = np.random.default_rng(seed)
  by_label: dict[str, list[int]] = {}
  for i, label in enumerate(labels):
    by_label.setdefault(label, []).append(i)
  chosen = [np.sort(rng.choice(idx, min(shots, len(idx)), replace=False)) for _, idx in sorted(by_label.items())]
  return np.concatenate(chosen) if chosen else np.zeros((0,), int)


def label_means(vectors: np.ndarray, labels: Sequence[str]) -> tuple[list[str], np.ndarray]:
  """(sorted class names, [C, d] the mean vector of each class) — Prototypical Networks' class vectors."""
  names = sorted(set(labels))
  labels = np.asarray(labels)
  return names, np.stack([vectors[labels == n].mean(axis=0) for n in names])


def prototypes(vectors: np.ndarray, labels: Sequence[str]) -> tuple[list[str], np.ndarray]:
  """(sorted class names, [C, d] unit-length prototypes): the mean of each class's (unit-length) vectors."""
  names, means = label_means(normalize(np.asarray(vectors, np.float64)), labels)
  return names, normalize(means)


def best_prototype(queries: np.ndarray, names: list[str], protos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(predicted class names, cosine similarity to that prototype) for every query."""
  sims = normalize(np.asarray(queries, np.float64)) @ protos.T
  best = np.argmax(sims, axis=1)
  return np.asarray(names)[best], sims[np.arange(len(best)), best]


def oos_thresholds(best_similarity: np.ndarray) -> dict[str, float]:
  """DSE's two thresholds from the best-prototype similarities of the evaluation samples: mean - std, mean."""
  mean, std = float(np.mean(best_similarity)), float(np.std(best_similarity))
  return {"mean-std": mean - std, "mean": mean}


def oos_metrics(predicted: np.ndarray, best_similarity: np.ndarray, gold: Sequence[str], threshold: float,
                oos_label: str = OOS) -> dict[str, float]:
  """DSE §4.2.2's four metrics when queries under ``threshold`` are called out of scope:
    * accuracy: over all samples, the right intent for in-scope ones and "out of scope" for the others;
    * in_accuracy: accuracy on the in-scope samples (right intent and not rejected);
    * oos_accuracy: accuracy of the binary in-scope / out-of-scope decision over all samples;
    * oos_recall: share of the out-of-scope samples that are rejected.
  The paper names the four metrics without formulas; ``oos_accuracy`` and ``oos_recall`` are read as above."""
  gold = np.asarray(gold)
  rejected = best_similarity < threshold
  final = np.where(rejected, oos_label, predicted)
  is_oos = gold == oos_label
  return {"accuracy": float(np.mean(final == gold)),
          "in_accuracy": float(np.mean(final[~is_oos] == gold[~is_oos])) if (~is_oos).any() else float("nan"),
          "oos_accuracy": float(np.mean(rejected == is_oos)),
          "oos_recall": float(np.mean(rejected[is_oos])) if is_oos.any() else float("nan"),
          "threshold": float(threshold)}
