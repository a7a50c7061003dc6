"""QAID on hwu64; shots: configs/qaid_hwu64.py:5 (default) | :10 | :full.

  python -m fewshot_nlu.main --config=configs/qaid_hwu64.py --workdir=runs/qaid_hwu64
  python -m fewshot_nlu.predict --model runs/qaid_hwu64/export "your utterance"
See fewshot_nlu/defaults/qaid_base.py for the hyper-parameters and the ablations.
"""

from fewshot_nlu.defaults import qaid_base


def get_config(shots: str = "5"):
  return qaid_base.get_config("hwu64", shots)
