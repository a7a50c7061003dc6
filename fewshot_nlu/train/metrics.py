"""Metrics to a JSONL file and TensorBoard event files (tensorboardX: no TensorFlow needed).

The workdir may be remote (``gs://``): object stores cannot append, so there the JSONL file is rewritten whole
at each write (a few thousand short lines at most); tensorboardX writes ``gs://`` event files itself."""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any

import jax
import numpy as np

from fewshot_nlu import workdirs


class MetricWriter:
  """Appends ``{"step": s, "time": t, name: value, ...}`` lines to ``metrics.jsonl`` and scalars to
  TensorBoard under ``tensorboard/``. Only process 0 writes."""

  def __init__(self, workdir: str | pathlib.Path, tensorboard: bool = True):
    self.enabled = jax.process_index() == 0
    self.remote = workdirs.is_remote(workdir)
    root = workdirs.as_path(workdir)
    self.path = root / "metrics.jsonl"
    self._tb = None
    if self.enabled:
      self.path.parent.mkdir(parents=True, exist_ok=True)
      self._lines = []  # remote: the whole file, rewritten at each write
      if self.remote and self.path.exists():
        self._lines = self.path.read_text(encoding="utf-8").splitlines(keepends=True)
      self._file = None if self.remote else open(self.path, "a", encoding="utf-8")
      if tensorboard:
        from tensorboardX import SummaryWriter
        self._tb = SummaryWriter(str(root / "tensorboard"))

  def truncate_after(self, step: int) -> None:
    """Drops JSONL lines logged after ``step`` (by a run that died before its next checkpoint), so a resumed
    run's metrics file has each step once; a line a kill cut short (not JSON) is dropped too."""
    if not self.enabled:
      return
    if self._file is not None:
      self._file.close()
    lines = self.path.read_text(encoding="utf-8").splitlines(keepends=True) if self.path.exists() else []
    self._lines = [line for line in lines if _step_of(line) is not None and _step_of(line) <= step]
    self.path.write_text("".join(self._lines), encoding="utf-8")
    self._file = None if self.remote else open(self.path, "a", encoding="utf-8")

  def write(self, step: int, metrics: dict[str, Any], prefix: str = "") -> None:
    if not self.enabled:
      return
    scalars = {prefix + k: float(np.asarray(v)) for k, v in metrics.items()}
    line = json.dumps({"step": int(step), "time": time.time(), **scalars}) + "\n"
    if self.remote:
      self._lines.append(line)
      self.path.write_text("".join(self._lines), encoding="utf-8")
    else:
      self._file.write(line)
      self._file.flush()
    if self._tb is not None:
      for name, value in scalars.items():
        self._tb.add_scalar(name, value, int(step))

  def close(self) -> None:
    if self.enabled:
      if self._file is not None:
        self._file.close()
      if self._tb is not None:
        self._tb.close()


def _step_of(line: str) -> int | None:
  """The step of a metrics line, or None for a line that is not a whole JSON object with one."""
  try:
    return int(json.loads(line)["step"])
  except (ValueError, KeyError, TypeError):
    return None
