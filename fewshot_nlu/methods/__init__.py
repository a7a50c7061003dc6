"""The method record: every method in one table (``METHODS``), read by ``main`` / ``methods.runner`` (``get_method``:
``config.method`` -> a module with ``validate(config)`` and ``run(config, workdir)``), by ``fit``
(``fit_methods``, ``Method.fit_defaults``), and by the runner for the model cards (``Method.paper``). Modules are named by dotted
path and imported on demand, so the core imports no wing. A new method is one row here."""

from __future__ import annotations

import dataclasses
import importlib


@dataclasses.dataclass(frozen=True)
class Method:
  module: str  # dotted path of the module with validate(config) and run(config, workdir)
  paper: str  # what it is and the paper it follows (model cards)
  fit_name: str | None = None  # its name in fewshot_nlu.fit (None: not trained from a user's examples)
  fit_defaults: str | None = None  # "module:function": function(train examples) -> the config fit starts from
  kinds: tuple[str, ...] = ()  # the export kinds it writes (model_kinds.KINDS)


METHODS = {
    "intent_mneg": Method(
        "fewshot_nlu.methods.baseline",
        "Intent detection baseline: same-intent MNEG fine-tuning, then 1-nearest-neighbour intents",
        "baseline", "fewshot_nlu.defaults.intent_mneg:fit_config", ("intent_model",)),
    "convfit": Method(
        "fewshot_nlu.methods.convfit.stage2",
        "ConvFiT Stage 2 (Vulić et al., 2021, *ConvFiT: Conversational Fine-Tuning of Pretrained Language "
        "Models*): contrastive intent specialisation, similarity-based (k-NN) inference",
        "convfit", "fewshot_nlu.defaults.convfit_base:fit_config", ("intent_model",)),
    "convfit_stage1": Method(
        "fewshot_nlu.methods.convfit.stage1",
        "ConvFiT Stage 1 (Vulić et al., 2021): conversational (context, response) fine-tuning of the language "
        "model; a sentence encoder for Stage 2"),
    "multi_convfit": Method(
        "fewshot_nlu.methods.multi_convfit.train",
        "Multi-ConvFiT (Vulić et al., 2022, *Multi-Label Intent Detection via Contrastive Task Specialization of "
        "Sentence Encoders*): multi-label intents",
        "multi_convfit", "fewshot_nlu.defaults.multi_convfit_base:fit_config", ("multi_label",)),
    "dse": Method(
        "fewshot_nlu.methods.dse.train",
        "DSE (Zhou et al., 2022, *Learning Dialogue Representations from Consecutive Utterances*): dialogue "
        "sentence embeddings"),
    "evaluate": Method("fewshot_nlu.methods.evaluate", "DSE's evaluation suite on any encoder"),
    "qaid": Method(
        "fewshot_nlu.methods.qaid.train",
        "QAID (Yehudai et al., 2023, *QAID: Question Answering Inspired Few-shot Intent Detection*): intent "
        "detection as retrieval of intent names and example queries",
        "qaid", "fewshot_nlu.defaults.qaid_base:fit_config", ("qaid",)),
    "retriever": Method(
        "fewshot_nlu.methods.retriever.slots",
        "Retriever (Yu et al., 2021, *Few-shot Intent Classification and Slot Filling with Retrieved Examples*): "
        "slot filling by span retrieval", kinds=("slot_filler",)),
    "retriever_intents": Method(
        "fewshot_nlu.methods.retriever.intents",
        "Retriever (Yu et al., 2021): intent classification by retrieved examples",
        "retriever_intents", "fewshot_nlu.defaults.retriever_intents:fit_config", ("intent_model",)),
    "nlu": Method(
        "fewshot_nlu.methods.nlu.train",
        "Joint NLU: intents (ConvFiT or QAID), slots by span retrieval (Retriever, Yu et al., 2021) from a span "
        "encoder that learnt the annotated examples, and out-of-scope rejection",
        "nlu", None, ("nlu",)),  # fit reads annotated examples (api._fit_nlu), not texts + labels
    "span_encoder": Method(
        "fewshot_nlu.methods.nlu.span_encoder",
        "General span encoder: Retriever's batch softmax (Yu et al., 2021, §5.1) over the slot spans of public "
        "slot corpora"),
}


def get_method(name: str):
  if name not in METHODS:
    from fewshot_nlu.config_checks import ConfigError
    raise ConfigError(f"config.method: {name!r} is not one of {sorted(METHODS)}")
  return importlib.import_module(METHODS[name].module)


def fit_methods() -> dict[str, str]:
  """``fit``'s method names -> ``config.method``."""
  return {m.fit_name: name for name, m in METHODS.items() if m.fit_name}


def fit_defaults(config_method: str):
  """The function that builds the config ``fit`` starts from for ``config_method`` (its record's
  ``fit_defaults``), imported now."""
  module, function = METHODS[config_method].fit_defaults.split(":")
  return getattr(importlib.import_module(module), function)
