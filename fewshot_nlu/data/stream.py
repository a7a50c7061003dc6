"""Deterministic, resumable batch streams.

Epoch ``e`` visits the examples in ``permutation(seed, e)``; the stream's whole state is ``(epoch, batch)``,
saved beside every checkpoint, so a resumed run sees exactly the batches an uninterrupted run would: none lost,
none repeated. The last batch of an epoch is padded (``valid`` = 0 rows) rather than dropped.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

# make_batch(example_indices, epoch, batch_size) -> dict of host numpy arrays with a leading batch dimension.
MakeBatch = Callable[[np.ndarray, int, int], dict[str, np.ndarray]]


class EpochStream:

  def __init__(self, num_examples: int, batch_size: int, make_batch: MakeBatch, seed: int = 0):
    if num_examples <= 0:
      raise ValueError("cannot build batches from an empty dataset")
    self.num_examples, self.batch_size, self.seed = num_examples, batch_size, seed
    self.make_batch = make_batch
    self.steps_per_epoch = math.ceil(num_examples / batch_size)
    self.epoch, self.batch = 0, 0

  def order(self, epoch: int) -> np.ndarray:
    return np.random.default_rng([self.seed, epoch]).permutation(self.num_examples)

  def __iter__(self):
    return self

  def __next__(self) -> dict[str, np.ndarray]:
    start = self.batch * self.batch_size
    indices = self.order(self.epoch)[start : start + self.batch_size]
    batch = self.make_batch(indices, self.epoch, self.batch_size)
    self.batch += 1
    if self.batch == self.steps_per_epoch:
      self.epoch, self.batch = self.epoch + 1, 0
    return batch

  def get_state(self) -> dict[str, int]:
    return {"epoch": self.epoch, "batch": self.batch, "seed": self.seed,
            "num_examples": self.num_examples, "batch_size": self.batch_size}

  def set_state(self, state: dict[str, int]) -> None:
    for key in ("seed", "num_examples", "batch_size"):
      if state[key] != getattr(self, key):
        raise ValueError(f"checkpointed data stream has {key}={state[key]}, this run has "
                         f"{getattr(self, key)}: resuming would not continue the same data order")
    self.epoch, self.batch = int(state["epoch"]), int(state["batch"])
