"""ConvFiT Stage 1 at pod scale: response ranking (MNEG, Eq. 1) on Reddit, global batch 4096 over a TPU mesh.

  python -m fewshot_nlu.main --config=configs/convfit_stage1_reddit.py \\
      --workdir=gs://BUCKET/runs/stage1_reddit --config.distributed.enabled=True

Thin wrapper: the config is built by ``fewshot_nlu/defaults/convfit_stage1_reddit.py`` (shipped with the package, so
``fewshot_nlu.fit`` and a pip-installed user have it too); its docstring documents the fields.
"""

from fewshot_nlu.defaults.convfit_stage1_reddit import get_config  # noqa: F401
