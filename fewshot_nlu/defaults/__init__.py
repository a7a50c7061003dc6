"""The methods' default configs, shipped with the package: ``common`` (the sections several methods share) and
one builder per method or protocol, each with ``get_config(...)``. ``configs/*.py`` in the repository are thin
wrappers over these (``python -m fewshot_nlu.main --config=configs/<name>.py``); ``fewshot_nlu.fit`` builds its
config from them too, so the command line and the Python API train with the same defaults. A module here
imports nothing from the package but other defaults (and ``evaluation.suite``'s config fields)."""
