"""QAID on clinc150; shots: configs/qaid_clinc150.py:5 (default) | :10 | :full.

  python -m fewshot_nlu.main --config=configs/qaid_clinc150.py --workdir=runs/qaid_clinc150
  python -m fewshot_nlu.predict --model runs/qaid_clinc150/export "your utterance"
See fewshot_nlu/defaults/qaid_base.py for the hyper-parameters and the ablations.
"""

from fewshot_nlu.defaults import qaid_base


def get_config(shots: str = "5"):
  return qaid_base.get_config("clinc150", shots)
