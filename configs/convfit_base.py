"""ConvFiT Stage 2 + intent detection (the rule chosen on valid): the config behind configs/convfit_<dataset>.py.

Thin wrapper: the config is built by ``fewshot_nlu/defaults/convfit_base.py`` (shipped with the package, so
``fewshot_nlu.fit`` and a pip-installed user have it too); its docstring documents the fields.
"""

from fewshot_nlu.defaults.convfit_base import SHOTS, get_config  # noqa: F401
