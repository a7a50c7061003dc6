"""Model selection on development data while training, one rule for every method that does it (QAID's
development curve, the Retriever's early stopping).

Every ``eval.dev_every`` steps a method scores its model on development data; a better score than the best so far
exports that model to ``<workdir>/best`` and then writes ``best/best.json`` (``write_best``: the step, the score
and whatever the method adds), so an interrupted run resumes knowing its best (``read_best``).

Patience (``eval.patience`` = P > 0): training stops at the first evaluation where P evaluations have passed since
the best one without beating it, i.e. ``step - best step >= P x eval.dev_every`` (``patience_exhausted``). The
count starts from the best step as read back from ``best.json``, so a resumed run stops where an uninterrupted one
would. P = 0 trains to the end (the best model is still the one kept).
"""

from __future__ import annotations

import json
import pathlib

import jax
import ml_collections

from fewshot_nlu import config_checks

BEST = "best"
RECORD = "best.json"


def best_dir(workdir: pathlib.Path) -> pathlib.Path:
  """Where the best-scoring model so far is exported."""
  return pathlib.Path(workdir) / BEST


def read_best(workdir: pathlib.Path) -> dict | None:
  """The best evaluation's record so far (``write_best``), or None before the first."""
  path = best_dir(workdir) / RECORD
  return json.loads(path.read_text()) if path.exists() else None


def write_best(workdir: pathlib.Path, record: dict) -> None:
  """Records the best evaluation (process 0 only); call it after that step's model is in ``best_dir``, so the
  record never names a model that is not there."""
  if jax.process_index() == 0:
    (best_dir(workdir) / RECORD).write_text(json.dumps(record, indent=1) + "\n")


def patience_exhausted(config: ml_collections.ConfigDict, step: int, best_step: int | None) -> bool:
  """Whether training should stop at ``step`` (see the module docstring); never before a best exists."""
  patience = config.eval.patience
  return bool(patience and best_step is not None and step - best_step >= patience * config.eval.dev_every)


def validate(config: ml_collections.ConfigDict) -> None:
  """``eval.dev_every`` and ``eval.patience`` are counts (0: no evaluations / train to the end)."""
  config_checks.require_non_negative(config, "eval.dev_every", "eval.patience")
