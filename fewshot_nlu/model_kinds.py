"""The table of exported model kinds: per kind, the class that loads it (a dotted module path, imported only by
``models.registry`` when an export of that kind is loaded), its metadata file and a description. A plain table
below everything that reads it: the registry (loading), the model cards (describing) and the methods' record
(``methods.METHODS``: which kinds a method exports)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Kind:
  module: str  # dotted path of the module defining the class
  cls: str
  meta_file: str  # the export's metadata JSON
  description: str


KINDS = {
    "intent_model": Kind("fewshot_nlu.models.intent_model", "IntentModel", "intent_model.json",
                         "k-NN / MLP intent classifier (baseline, ConvFiT)"),
    "qaid": Kind("fewshot_nlu.methods.qaid.model", "QAIDModel", "qaid.json", "QAID intent-name retrieval"),
    "multi_label": Kind("fewshot_nlu.methods.multi_convfit.model", "MultiLabelModel", "multilabel_model.json",
                        "Multi-ConvFiT multi-label intents"),
    "nlu": Kind("fewshot_nlu.models.nlu_model", "NLUModel", "nlu.json", "joint intents + slots + out-of-scope"),
    "slot_filler": Kind("fewshot_nlu.models.slot_filler", "SlotFillerModel", "slot_filler.json",
                        "Retriever span-retrieval slot filler"),
}
