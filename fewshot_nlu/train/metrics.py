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
      # lines earlier attempts on this workdir left, by (step, metric names), so that a line this run writes
      # again (a resumed run re-measuring step 0, a finished run re-run) replaces the old one, not repeats it
      self._earlier = {key: l for l in self._read_lines() if (key := _key_of(l))[0] is not None}
      self._own: list[str] = []  # the lines this writer wrote
      self._file = None
      self._rewrite()  # drops a line a kill cut short
      if tensorboard:
        from tensorboardX import SummaryWriter
        self._tb = SummaryWriter(str(root / "tensorboard"))

  def truncate_after(self, step: int) -> None:
    """Drops the lines logged after ``step`` (by a run that died before its next checkpoint), so a resumed
    run's file has each step once."""
    if not self.enabled:
      return
    self._earlier = {key: line for key, line in self._earlier.items() if key[0] <= step}
    self._own = [line for line in self._own if _step_of(line) <= step]
    self._rewrite()

  def discard_earlier(self) -> None:
    """Drops every line earlier attempts logged (a run starting afresh: an attempt killed before its first
    checkpoint kept none of its steps); the lines this writer wrote stay."""
    if not self.enabled:
      return
    self._earlier = {}
    self._rewrite()

  def write(self, step: int, metrics: dict[str, Any], prefix: str = "") -> None:
    if not self.enabled:
      return
    scalars = {prefix + k: float(np.asarray(v)) for k, v in metrics.items()}
    line = json.dumps({"step": int(step), "time": time.time(), **scalars}) + "\n"
    self._own.append(line)
    key = _key_of(line)
    if self.remote or key in self._earlier:
      self._earlier.pop(key, None)
      self._rewrite()
    else:
      self._file.write(line)
      self._file.flush()
    if self._tb is not None:
      for name, value in scalars.items():
        self._tb.add_scalar(name, value, int(step))

  def _read_lines(self) -> list[str]:
    if not self.path.exists():
      return []
    return self.path.read_text(encoding="utf-8").splitlines(keepends=True)

  def _rewrite(self) -> None:
    """Writes the kept earlier lines, then this writer's own."""
    if self._file is not None:
      self._file.close()
    self.path.write_text("".join([*self._earlier.values(), *self._own]), encoding="utf-8")
    self._file = None if self.remote else open(self.path, "a", encoding="utf-8")

  def close(self) -> None:
    if self.enabled:
      if self._file is not None:
        self._file.close()
      if self._tb is not None:
        self._tb.close()


def _key_of(line: str) -> tuple[int | None, frozenset[str]]:
  """A metrics line's step and metric names: two lines with one key record the same measurement."""
  try:
    record = json.loads(line)
    return int(record["step"]), frozenset(k for k in record if k not in ("step", "time"))
  except (ValueError, KeyError, TypeError):
    return None, frozenset()


def _step_of(line: str) -> int | None:
  """The step of a metrics line, or None for a line that is not a whole JSON object with one."""
  try:
    return int(json.loads(line)["step"])
  except (ValueError, KeyError, TypeError):
    return None
