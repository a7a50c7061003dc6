"""Joint NLU (intents + slots + out-of-scope) from your annotated examples: see fewshot_nlu/defaults/nlu.py.

  python -m fewshot_nlu.main --config=configs/nlu.py --workdir=runs/my_bot --config.data.train=nlu.yml
  python -m fewshot_nlu.main --config=configs/nlu.py:qaid --workdir=runs/my_bot --config.data.train=nlu.yml
"""

from fewshot_nlu.defaults import nlu


def get_config(intent_method: str = "convfit"):
  return nlu.get_config(intent_method or "convfit")
