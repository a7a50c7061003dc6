"""TFDS builders for every dataset fewshot_nlu trains or evaluates on (see ``base`` for where raw files come
from). ``get_builder(name, **kwargs)`` returns an (unprepared) builder; ``base.load_split`` reads a split."""

from __future__ import annotations

import importlib

# name -> "module:Class" (imported on first use, so one builder's import cost is not everyone's).
BUILDERS = {
    "banking77": "fewshot_nlu.data.builders.intent:Banking77",
    "clinc150": "fewshot_nlu.data.builders.intent:Clinc150",
    "hwu64": "fewshot_nlu.data.builders.intent:Hwu64",
    "intent_folder": "fewshot_nlu.data.builders.intent:IntentFolder",
    "joint_nlu_folder": "fewshot_nlu.data.builders.joint:JointNluFolder",
    "snips_joint": "fewshot_nlu.data.builders.joint:SnipsJoint",
    "mixatis": "fewshot_nlu.data.builders.joint:Mixatis",
    "snips_fewshot_slots": "fewshot_nlu.data.builders.slots:SnipsFewshotSlots",
    "nlupp": "fewshot_nlu.data.builders.nlupp:Nlupp",
    "intent_table": "fewshot_nlu.data.builders.custom:IntentTable",
    "dialogue_pairs": "fewshot_nlu.data.builders.dialogue:DialoguePairs",
    "reddit_conversational": "fewshot_nlu.data.builders.reddit:RedditConversational",
}


def builder_class(name: str):
  if name not in BUILDERS:
    raise KeyError(f"unknown dataset builder {name!r}; known: {sorted(BUILDERS)}")
  module, cls = BUILDERS[name].split(":")
  return getattr(importlib.import_module(module), cls)


def get_builder(name: str, **kwargs):
  return builder_class(name)(**kwargs)
