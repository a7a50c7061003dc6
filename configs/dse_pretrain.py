"""DSE pre-training of the shipped MiniLM on consecutive dialogue utterances, then the evaluation suite.

  python -m fewshot_nlu.main --config=configs/dse_pretrain.py --workdir=runs/dse
  python -m fewshot_nlu.main --config=configs/dse_pretrain.py:dropout --workdir=runs/dse_dropout

Thin wrapper: the config is built by ``fewshot_nlu/defaults/dse_pretrain.py`` (shipped with the package, so
``fewshot_nlu.fit`` and a pip-installed user have it too); its docstring documents the fields.
"""

from fewshot_nlu.defaults.dse_pretrain import VARIANTS, get_config  # noqa: F401
