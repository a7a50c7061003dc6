"""The general span encoder of the joint NLU model's slot filler: see fewshot_nlu/defaults/span_encoder.py.

  python -m fewshot_nlu.main --config=configs/span_encoder.py --workdir=runs/span_encoder
"""

from fewshot_nlu.defaults.span_encoder import get_config  # noqa: F401
