"""ConvFiT Stage 1: response ranking (MNEG, Eq. 1) of the shipped MiniLM on dialogue (context, response) pairs.

  python -m fewshot_nlu.main --config=configs/convfit_stage1.py --workdir=runs/convfit_stage1
  python -m fewshot_nlu.main --config=configs/convfit_banking77.py --workdir=runs/s1s2 \\
      --config.model.name=runs/convfit_stage1/export

Thin wrapper: the config is built by ``fewshot_nlu/defaults/convfit_stage1.py`` (shipped with the package, so
``fewshot_nlu.fit`` and a pip-installed user have it too); its docstring documents the fields.
"""

from fewshot_nlu.defaults.convfit_stage1 import get_config  # noqa: F401
