"""ConvFiT Stage 2 (OCL) on clinc150, the decision rule chosen on valid (logistic regression or prototypes);
shots: configs/convfit_clinc150.py:10 (default) | :5 | :30 | :full.

  python -m fewshot_nlu.main --config=configs/convfit_clinc150.py --workdir=runs/convfit_clinc150
See fewshot_nlu/defaults/convfit_base.py for the hyper-parameters and the variants.
"""

from fewshot_nlu.defaults import convfit_base


def get_config(shots: str = "10"):
  return convfit_base.get_config("clinc150", shots)
