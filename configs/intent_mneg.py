"""Baseline: in-batch ranking fine-tuning (MNEG) of the shipped MiniLM on BANKING77 10-shot, 1-NN evaluation.

  python -m fewshot_nlu.main --config=configs/intent_mneg.py --workdir=runs/intent_mneg

Thin wrapper: the config is built by ``fewshot_nlu/defaults/intent_mneg.py`` (shipped with the package, so
``fewshot_nlu.fit(method="baseline")`` has it too); its docstring documents the fields.
"""

from fewshot_nlu.defaults.intent_mneg import get_config  # noqa: F401
