"""Deterministic, resumable batch streams.

An ``EpochStream`` walks a batch plan (``data.samplers``): epoch ``e`` is ``plan.batches(e)``, a pure function
of (seed, e). The stream's whole state is ``(epoch, batch)``, saved beside every checkpoint, so a resumed run
sees exactly the batches an uninterrupted run would: none lost, none repeated. Short batches (the end of an
epoch) are padded to ``batch_size`` by ``make_batch`` (``valid`` = 0 rows) rather than dropped.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Callable, Protocol

import numpy as np

from fewshot_nlu.data.samplers import ShuffledBatches

# make_batch(item_indices, epoch, batch_size) -> dict of host numpy arrays with a leading batch dimension.
MakeBatch = Callable[[np.ndarray, int, int], dict[str, np.ndarray]]


class BatchPlan(Protocol):
  def batches(self, epoch: int) -> list[np.ndarray]: ...
  def steps_per_epoch(self, epoch: int = 0) -> int: ...


class EpochStream:

  def __init__(self, num_items: int, batch_size: int, make_batch: MakeBatch, seed: int = 0,
               plan: BatchPlan | None = None):
    """Shuffled epochs over ``num_items`` by default, or any ``plan`` whose batches hold at most
    ``batch_size`` items."""
    if num_items <= 0:
      raise ValueError("cannot build batches from an empty dataset")
    self.plan = plan if plan is not None else ShuffledBatches(num_items, batch_size, seed)
    self.num_items, self.batch_size, self.seed = num_items, batch_size, seed
    self.make_batch = make_batch
    self.epoch, self.batch = 0, 0
    self._cache: tuple[int, list[np.ndarray]] | None = None

  def epoch_batches(self, epoch: int) -> list[np.ndarray]:
    if self._cache is None or self._cache[0] != epoch:
      self._cache = (epoch, self.plan.batches(epoch))
    return self._cache[1]

  def total_steps(self, epochs: int) -> int:
    return sum(self.plan.steps_per_epoch(e) for e in range(epochs))

  def __iter__(self):
    return self

  def __next__(self) -> dict[str, np.ndarray]:
    batches = self.epoch_batches(self.epoch)
    indices = batches[self.batch]
    if len(indices) > self.batch_size:
      raise ValueError(f"plan produced a batch of {len(indices)} items for batch_size={self.batch_size}")
    batch = self.make_batch(indices, self.epoch, self.batch_size)
    self.batch += 1
    if self.batch == len(batches):
      self.epoch, self.batch = self.epoch + 1, 0
    return batch

  def get_state(self) -> dict:
    return {"epoch": self.epoch, "batch": self.batch, "plan": _describe(self.plan)}

  def set_state(self, state: dict) -> None:
    if state["plan"] != _describe(self.plan):
      raise ValueError(f"checkpointed data stream used plan {state['plan']}, this run has "
                       f"{_describe(self.plan)}: resuming would not continue the same data order")
    self.epoch, self.batch = int(state["epoch"]), int(state["batch"])


def _describe(plan) -> str:
  """A short fingerprint of a plan (its class and scalar fields, plus a digest of any label tuple)."""
  if not dataclasses.is_dataclass(plan):
    return type(plan).__name__
  fields = []
  for f in dataclasses.fields(plan):
    value = getattr(plan, f.name)
    if isinstance(value, tuple):
      value = "sha1:" + hashlib.sha1(repr(value).encode()).hexdigest()[:12]
    fields.append(f"{f.name}={value}")
  return f"{type(plan).__name__}({', '.join(fields)})"
