"""Method registry: ``config.method`` names a module with ``validate(config)`` and ``run(config, workdir)``."""

from __future__ import annotations

import importlib

METHODS = {
    "intent_mneg": "fewshot_nlu.methods.baseline",
    "convfit": "fewshot_nlu.methods.convfit.stage2",
    "convfit_stage1": "fewshot_nlu.methods.convfit.stage1",
    "multi_convfit": "fewshot_nlu.methods.multi_convfit.train",
    "dse": "fewshot_nlu.methods.dse.train",
    "evaluate": "fewshot_nlu.methods.evaluate",
    "qaid": "fewshot_nlu.methods.qaid.train",
    "retriever": "fewshot_nlu.methods.retriever.slots",
    "retriever_intents": "fewshot_nlu.methods.retriever.intents",
    "nlu": "fewshot_nlu.methods.nlu.train",
    "span_encoder": "fewshot_nlu.methods.nlu.span_encoder",
}


def get_method(name: str):
  if name not in METHODS:
    from fewshot_nlu.config_checks import ConfigError
    raise ConfigError(f"config.method: {name!r} is not one of {sorted(METHODS)}")
  return importlib.import_module(METHODS[name])
