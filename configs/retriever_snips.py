"""Retriever on SNIPS few-shot slot filling (Yu et al., 2021, §6.2; Hou et al.'s 7 folds, 5-shot episodes).

  python -m fewshot_nlu.main --config=configs/retriever_snips.py --workdir=runs/retriever_snips

Thin wrapper: the config is built by ``fewshot_nlu/defaults/retriever_snips.py`` (shipped with the package, so
``fewshot_nlu.fit`` and a pip-installed user have it too); its docstring documents the fields.
"""

from fewshot_nlu.defaults.retriever_snips import VARIANTS, get_config  # noqa: F401
