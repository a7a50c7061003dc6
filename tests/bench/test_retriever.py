"""bench/retriever.py keeps each encoder's SNIPS rows apart: named per model, labelled per model in the table."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "bench"))  # bench scripts import their siblings

from bench import retriever, runner  # noqa: E402


def _fold_row(name: str, seed: int, domain: str, f1: float) -> dict:
  return {"name": name, "seed": seed, "wall_seconds": 10.0, "results": {"folds": [{"test_domain": domain, "f1": f1}]}}


def test_each_models_rows_are_named_and_labelled_apart():
  assert runner.encoder_row_name("snips-frz", runner.DEFAULT_ENCODER) == "snips-frz"
  assert runner.encoder_row_name("snips-frz", "mpnet-base") == "snips-frz-mpnet-base"
  whole = [_fold_row("snips-frz", 0, domain, 50.0) for domain in retriever.DOMAINS]
  partial = [_fold_row("snips-frz-mpnet-base", 0, domain, 60.0 + i) for i, domain in enumerate(retriever.DOMAINS[:2])]
  lines = retriever.snips_table(whole + partial)
  minilm = [line for line in lines if line.startswith("| Retriever^frz (MiniLM-L6, ours) |")]
  mpnet = [line for line in lines if line.startswith("| Retriever^frz (MPNet-base, ours), seed 0: 2 of 7 folds")]
  assert len(minilm) == 1 and "| 50.00 | 1 |" in minilm[0]  # seven folds of one seed: a whole row
  assert len(mpnet) == 1 and "| 60.00 | 61.00 | – |" in mpnet[0]  # two folds: a partial row, not mixed in


def test_the_mpnet_overrides_name_the_model_and_a_layer_inside_it():
  overrides = retriever.MODEL_OVERRIDES["mpnet-base"]
  assert set(retriever.MODEL_OVERRIDES) == set(runner.ENCODERS) and "--config.model.name=mpnet-base" in overrides
  assert 0 < retriever.MPNET_LAYER <= 12 and f"--config.retriever.encoder_layers={retriever.MPNET_LAYER}" in overrides
