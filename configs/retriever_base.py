"""The fields every Retriever config shares (the training and retrieval options ``methods.span_training``
reads); ``configs/retriever_snips.py`` and ``configs/retriever_clinc.py`` add their protocol's own.

Thin wrapper: the config is built by ``fewshot_nlu/defaults/retriever_base.py`` (shipped with the package, so
``fewshot_nlu.fit`` and a pip-installed user have it too); its docstring documents the fields.
"""

from fewshot_nlu.defaults.retriever_base import get_config  # noqa: F401
