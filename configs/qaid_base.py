"""QAID fine-tuning + retrieval of intent names: the shared config behind configs/qaid_<dataset>.py.

Thin wrapper: the config is built by ``fewshot_nlu/defaults/qaid_base.py`` (shipped with the package, so
``fewshot_nlu.fit`` and a pip-installed user have it too); its docstring documents the fields.
"""

from fewshot_nlu.defaults.qaid_base import SHOTS, add_qaid_fields, base_config, get_config  # noqa: F401
