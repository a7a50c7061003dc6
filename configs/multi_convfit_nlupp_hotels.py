"""Multi-ConvFiT on NLU++ hotels; the argument picks regime (low | high) and specialisation (fft | adapter | none):

  python -m fewshot_nlu.main --config=configs/multi_convfit_nlupp_hotels.py:low,adapter --workdir=runs/mc_nlupp_hotels
See fewshot_nlu/defaults/multi_convfit_base.py for the hyper-parameters.
"""

from fewshot_nlu.defaults import multi_convfit_base


def get_config(arg: str = ""):
  return multi_convfit_base.get_config("nlupp", "hotels", arg)
