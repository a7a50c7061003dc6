"""Metrics to a JSONL file and TensorBoard event files (tensorboardX: no TensorFlow needed)."""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any

import jax
import numpy as np


class MetricWriter:
  """Appends ``{"step": s, "time": t, name: value, ...}`` lines to ``metrics.jsonl`` and scalars to
  TensorBoard under ``tensorboard/``. Only process 0 writes."""

  def __init__(self, workdir: str | pathlib.Path, tensorboard: bool = True):
    self.enabled = jax.process_index() == 0
    self.path = pathlib.Path(workdir) / "metrics.jsonl"
    self._tb = None
    if self.enabled:
      self.path.parent.mkdir(parents=True, exist_ok=True)
      self._file = open(self.path, "a", encoding="utf-8")
      if tensorboard:
        from tensorboardX import SummaryWriter
        self._tb = SummaryWriter(str(pathlib.Path(workdir) / "tensorboard"))

  def truncate_after(self, step: int) -> None:
    """Drops JSONL lines logged after ``step`` (by a run that died before its next checkpoint), so a resumed
    run's metrics file has each step once."""
    if not self.enabled:
      return
    self._file.close()
    lines = self.path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [l for l in lines if json.loads(l)["step"] <= step]
    self.path.write_text("".join(kept), encoding="utf-8")
    self._file = open(self.path, "a", encoding="utf-8")

  def write(self, step: int, metrics: dict[str, Any], prefix: str = "") -> None:
    if not self.enabled:
      return
    scalars = {prefix + k: float(np.asarray(v)) for k, v in metrics.items()}
    self._file.write(json.dumps({"step": int(step), "time": time.time(), **scalars}) + "\n")
    self._file.flush()
    if self._tb is not None:
      for name, value in scalars.items():
        self._tb.add_scalar(name, value, int(step))

  def close(self) -> None:
    if self.enabled:
      self._file.close()
      if self._tb is not None:
        self._tb.close()
