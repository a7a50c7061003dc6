"""Method registry: ``config.method`` names a module with ``validate(config)`` and ``run(config, workdir)``."""

from __future__ import annotations

import importlib

METHODS = {
    "intent_mneg": "fewshot_nlu.methods.intent_mneg",
    "convfit": "fewshot_nlu.methods.convfit",
    "convfit_stage1": "fewshot_nlu.methods.convfit_stage1",
    "multi_convfit": "fewshot_nlu.methods.multi_convfit",
    "dse": "fewshot_nlu.methods.dse",
    "evaluate": "fewshot_nlu.methods.evaluate",
    "qaid": "fewshot_nlu.methods.qaid",
    "retriever": "fewshot_nlu.methods.retriever",
    "retriever_intents": "fewshot_nlu.methods.retriever_intents",
}


def get_method(name: str):
  if name not in METHODS:
    from fewshot_nlu.config_checks import ConfigError
    raise ConfigError(f"config.method: {name!r} is not one of {sorted(METHODS)}")
  return importlib.import_module(METHODS[name])
