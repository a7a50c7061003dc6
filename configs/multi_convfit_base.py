"""Multi-ConvFiT: the shared config behind configs/multi_convfit_<dataset>.py.

Thin wrapper: the config is built by ``fewshot_nlu/defaults/multi_convfit_base.py`` (shipped with the package, so
``fewshot_nlu.fit`` and a pip-installed user have it too); its docstring documents the fields.
"""

from fewshot_nlu.defaults.multi_convfit_base import MODES, get_config, parse  # noqa: F401
