"""Default job: ConvFiT (the shipped config, as ``fewshot_nlu.fit`` trains it) on BANKING77 10-shot.

  python -m fewshot_nlu.main --config=configs/default.py --workdir=runs/default

Thin wrapper: the config is built by ``fewshot_nlu/defaults/default.py`` (shipped with the package, so
``fewshot_nlu.fit`` and a pip-installed user have it too); its docstring documents the fields.
"""

from fewshot_nlu.defaults.default import get_config  # noqa: F401
