"""The DSE evaluation suite (prototype intents 1/5-shot on BANKING77, CLINC150, HWU64, SNIPS; CLINC150
out-of-scope detection; response selection top-1/3/10 of 100 on held-out dialogues) for any encoder, untouched.

  python -m fewshot_nlu.main --config=configs/dse_eval.py --workdir=runs/eval_minilm
  python -m fewshot_nlu.main --config=configs/dse_eval.py --workdir=runs/eval_dse --config.model.name=runs/dse/export

Thin wrapper: the config is built by ``fewshot_nlu/defaults/dse_eval.py`` (shipped with the package, so
``fewshot_nlu.fit`` and a pip-installed user have it too); its docstring documents the fields.
"""

from fewshot_nlu.defaults.dse_eval import get_config  # noqa: F401
