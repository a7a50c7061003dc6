"""Multi-ConvFiT on MixATIS; the argument picks regime (low | high) and specialisation (fft | adapter | none):

  python -m fewshot_nlu.main --config=configs/multi_convfit_mixatis.py:low,adapter --workdir=runs/mc_mixatis
See fewshot_nlu/defaults/multi_convfit_base.py for the hyper-parameters.
"""

from fewshot_nlu.defaults import multi_convfit_base


def get_config(arg: str = ""):
  return multi_convfit_base.get_config("mixatis", "", arg)
