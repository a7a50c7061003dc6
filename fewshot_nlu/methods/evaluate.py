"""The evaluation suite (``evaluation.suite``: prototype intents, out-of-scope detection, response selection)
on any encoder, untouched: ``model.name`` is a packaged model, a Hugging Face id or any method's export
directory (ConvFiT exports with a down-projection are evaluated in its projected space)."""

from __future__ import annotations

import pathlib
import time

import jax
import ml_collections

from fewshot_nlu import config_checks, workdirs
from fewshot_nlu.encoders import pooling
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.encoders.transformer import DTYPES
from fewshot_nlu.evaluation import suite


def validate(config: ml_collections.ConfigDict) -> None:
  config_checks.require_choice(config, "model.pooling", tuple(pooling.POOLERS))
  config_checks.require_choice(config, "model.dtype", tuple(DTYPES))
  config_checks.require_positive(config, "eval.batch_size")
  suite.validate(config)


def run(config: ml_collections.ConfigDict, workdir: pathlib.Path) -> dict:
  start = time.perf_counter()
  encoder = SentenceEncoder.from_pretrained(config.model.name, pooling_mode=config.model.pooling,
                                            batch_size=config.eval.batch_size,
                                            dtype=DTYPES[config.model.dtype])
  results = {"suite": suite.run(encoder, config),
             "suite_seconds": round(time.perf_counter() - start, 1), "method": config.method,
             "model": config.model.name}
  if jax.process_index() == 0:
    suite.write(results["suite"], workdir, f"Evaluation suite: {config.model.name}")
  return workdirs.write_results(workdir, results)
