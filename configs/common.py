"""Config sections shared by the methods' configs. Each method's config takes the sections its code reads and
no others (``fewshot_nlu.config_fields`` makes a field a method ignores an error).

Thin wrapper: the config is built by ``fewshot_nlu/defaults/common.py`` (shipped with the package, so
``fewshot_nlu.fit`` and a pip-installed user have it too); its docstring documents the fields.
"""

from fewshot_nlu.defaults.common import add_training, base, mlp_classifier  # noqa: F401
