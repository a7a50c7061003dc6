"""Trained artefacts that several methods export, and the protocol every exported model follows
(``protocol``); ``load(directory)`` reads any export by its recorded kind (``registry``)."""

from fewshot_nlu.models.registry import KINDS, kind_of, load, model_class  # noqa: F401
