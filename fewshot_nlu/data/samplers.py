"""Samplers: pure, seeded functions from labels to what a training regime iterates over.

Two kinds:
  * pair sets (``convfit_pairs``, ``multilabel_pairs``): the (anchor, other, is_positive) triples that ConvFiT
    Stage 2 and Multi-ConvFiT train on;
  * batch plans (``ShuffledBatches``, ``ClassBalancedBatches``, ``PerLabelBatches``): ``plan.batches(epoch)``
    -> the list of index arrays making up that epoch, identical for the same (seed, epoch). A plan is what
    ``data.stream.EpochStream`` iterates, so its position (epoch, batch) is saved with every checkpoint and a
    resumed run continues with exactly the remaining batches.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np


def _rng(*key: int) -> np.random.Generator:
  return np.random.default_rng([int(k) for k in key])


# ---------------------------------------------------------------------------------------------- pair sets

@dataclasses.dataclass(frozen=True)
class Pairs:
  """Index pairs into the example list; ``positive[i]`` says whether pair i shares a label."""

  first: np.ndarray
  second: np.ndarray
  positive: np.ndarray

  def __len__(self) -> int:
    return len(self.first)


def _as_sets(labels: Sequence) -> list[frozenset]:
  return [frozenset(l) if isinstance(l, (set, frozenset, list, tuple)) else frozenset([l]) for l in labels]


def _pairs(label_sets: list[frozenset], n_negatives: int, seed: int, *, both_orders: bool,
           negatives_for_both: bool, keep_positive_fraction: float) -> Pairs:
  n = len(label_sets)
  if n_negatives < 0 or not 0 < keep_positive_fraction <= 1:
    raise ValueError("n_negatives must be >= 0 and keep_positive_fraction in (0, 1]")
  rng = _rng(seed)
  disjoint = [np.array([j for j in range(n) if not (label_sets[i] & label_sets[j])], np.int64)
              for i in range(n)]
  positives = [(i, j) for i in range(n) for j in range(i + 1, n) if label_sets[i] & label_sets[j]]
  if keep_positive_fraction < 1:
    keep = rng.random(len(positives)) < keep_positive_fraction
    positives = [p for p, k in zip(positives, keep) if k]
  if both_orders:
    positives = [q for i, j in positives for q in ((i, j), (j, i))]
  first, second, positive = [], [], []
  for i, j in positives:
    first.append(i), second.append(j), positive.append(True)
    for anchor, side in ((i, 0), (j, 1)) if negatives_for_both else ((i, 0),):
      pool = disjoint[anchor]
      if n_negatives and not len(pool):
        raise ValueError(f"example {anchor} shares a label with every other example: no negative exists")
      for other in rng.choice(pool, size=n_negatives, replace=len(pool) < n_negatives) if n_negatives else ():
        # keep the anchor on its own side: (x_i, x_neg) and (x_neg, x_j), as in ConvFiT §2.2
        first.append(anchor if side == 0 else int(other))
        second.append(int(other) if side == 0 else anchor)
        positive.append(False)
  return Pairs(np.array(first, np.int64), np.array(second, np.int64), np.array(positive, bool))


def convfit_pairs(labels: Sequence, n_negatives: int, seed: int) -> Pairs:
  """ConvFiT §2.2: every unordered same-class pair (x_i, x_j) is a positive; for each, 2n negatives:
  n pairs (x_i, x_neg) and n pairs (x_neg', x_j) whose x_neg does not share x_i's (resp. x_j's) class."""
  return _pairs(_as_sets(labels), n_negatives, seed, both_orders=False, negatives_for_both=True,
                keep_positive_fraction=1.0)


def multilabel_pairs(label_sets: Sequence[Sequence[str]], n_negatives: int = 2, seed: int = 0,
                     keep_positive_fraction: float = 1.0) -> Pairs:
  """Multi-ConvFiT §2.1: (x_i, x_j) is positive iff their label sets intersect, added in both orders; each
  positive gets ``n_negatives`` pairs (x_i, x_neg) with x_neg sharing no label with x_i.
  ``keep_positive_fraction`` < 1 randomly subsamples the positive pairs (Figure 6)."""
  return _pairs(_as_sets(label_sets), n_negatives, seed, both_orders=True, negatives_for_both=False,
                keep_positive_fraction=keep_positive_fraction)


# -------------------------------------------------------------------------------------------- batch plans

@dataclasses.dataclass(frozen=True)
class ShuffledBatches:
  """Epoch e: ``permutation(seed, e)`` of ``num_items`` cut into batches of ``batch_size`` (last one short)."""

  num_items: int
  batch_size: int
  seed: int = 0

  def __post_init__(self):
    if self.num_items <= 0 or self.batch_size <= 0:
      raise ValueError(f"{self}: needs num_items > 0 and batch_size > 0")

  def batches(self, epoch: int) -> list[np.ndarray]:
    order = _rng(self.seed, epoch).permutation(self.num_items)
    return [order[s : s + self.batch_size] for s in range(0, self.num_items, self.batch_size)]

  def steps_per_epoch(self, epoch: int = 0) -> int:
    return math.ceil(self.num_items / self.batch_size)


@dataclasses.dataclass(frozen=True)
class ClassBalancedBatches:
  """P classes x K examples per batch (for in-batch pair / SupCon losses).

  Epoch e: each class's examples are shuffled and cut into groups of K (a short last group is topped up with
  the class's other examples, so every group has K distinct examples when the class has >= K; classes with
  fewer than K examples repeat them). Groups are then dealt into batches of P groups of P distinct classes,
  choosing classes with the most groups left first (ties broken at random), until fewer than P classes have
  groups left. Those leftover groups are not used in this epoch (the next epoch re-deals everything).
  """

  labels: tuple
  p: int
  k: int
  seed: int = 0

  def __post_init__(self):
    classes = len(set(self.labels))
    if self.p > classes:
      raise ValueError(f"P={self.p} classes per batch, but only {classes} classes exist")
    if self.k <= 0 or self.p <= 0:
      raise ValueError("P and K must be positive")

  def batches(self, epoch: int) -> list[np.ndarray]:
    rng = _rng(self.seed, epoch)
    labels = np.asarray(self.labels)
    groups: dict = {}
    for cls in sorted(set(self.labels), key=str):
      members = rng.permutation(np.flatnonzero(labels == cls))
      if len(members) < self.k:
        members = np.concatenate([members, rng.choice(members, self.k - len(members))])
      chunks = [members[s : s + self.k] for s in range(0, len(members), self.k)]
      if len(chunks[-1]) < self.k:
        others = np.setdiff1d(members, chunks[-1])
        chunks[-1] = np.concatenate([chunks[-1], rng.choice(others, self.k - len(chunks[-1]), replace=False)])
      groups[cls] = chunks
    out = []
    while sum(1 for g in groups.values() if g) >= self.p:
      available = [c for c, g in groups.items() if g]
      tiebreak = rng.random(len(available))
      chosen = sorted(range(len(available)), key=lambda i: (-len(groups[available[i]]), tiebreak[i]))[: self.p]
      out.append(np.concatenate([groups[available[i]].pop() for i in chosen]))
    return out

  def steps_per_epoch(self, epoch: int = 0) -> int:
    return len(self.batches(epoch))


@dataclasses.dataclass(frozen=True)
class PerLabelBatches:
  """Retriever §5.1: each batch holds ``b`` items of each of ``n`` labels (all labels when ``n`` is None).

  Epoch e: per label, its items are shuffled and consumed ``b`` at a time, cycling (re-shuffled) when a
  label runs out; the epoch has ``ceil(max label count / b)`` batches, so the largest label is seen once and
  smaller ones are repeated. With ``n`` < number of labels, each batch draws ``n`` labels without replacement.
  """

  labels: tuple
  b: int
  n: int | None = None
  seed: int = 0

  def batches(self, epoch: int) -> list[np.ndarray]:
    rng = _rng(self.seed, epoch)
    labels = np.asarray(self.labels)
    classes = sorted(set(self.labels), key=str)
    n = len(classes) if self.n is None else self.n
    if n > len(classes):
      raise ValueError(f"n={n} labels per batch, but only {len(classes)} labels exist")
    queues = {c: [] for c in classes}
    members = {c: np.flatnonzero(labels == c) for c in classes}

    def take(c):
      while len(queues[c]) < self.b:
        queues[c].extend(rng.permutation(members[c]).tolist())
      taken, queues[c] = queues[c][: self.b], queues[c][self.b :]
      return taken

    steps = self.steps_per_epoch()
    out = []
    for _ in range(steps):
      chosen = classes if n == len(classes) else [classes[i] for i in rng.choice(len(classes), n, replace=False)]
      out.append(np.array([i for c in chosen for i in take(c)], np.int64))
    return out

  def steps_per_epoch(self, epoch: int = 0) -> int:
    counts = np.unique(np.asarray(self.labels), return_counts=True)[1]
    return math.ceil(counts.max() / self.b)
