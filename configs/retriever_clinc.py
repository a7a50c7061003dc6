"""Retriever for few-shot intents on CLINC (Yu et al., 2021, §6.1, Table 1 / App. A.3).

  python -m fewshot_nlu.main --config=configs/retriever_clinc.py:pretrain --workdir=runs/retriever_clinc_src
  python -m fewshot_nlu.main --config=configs/retriever_clinc.py:finetune_tgt_src \\
      --config.model.name=runs/retriever_clinc_src/export --workdir=runs/retriever_clinc_ft

Thin wrapper: the config is built by ``fewshot_nlu/defaults/retriever_clinc.py`` (shipped with the package, so
``fewshot_nlu.fit`` and a pip-installed user have it too); its docstring documents the fields.
"""

from fewshot_nlu.defaults.retriever_clinc import STAGES, get_config  # noqa: F401
