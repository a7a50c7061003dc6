"""QAID pre-training (§2.2.1): self-supervised contrastive (Eq. 2) + 0.1 MLM on the train and valid utterances
of BANKING77, CLINC150, HWU64 and SNIPS (test sets excluded); batch 64 (x 2 views), 20 epochs, lr 1e-5.

  python -m fewshot_nlu.main --config=configs/qaid_pretrain.py --workdir=runs/qaid_pretrain

Thin wrapper: the config is built by ``fewshot_nlu/defaults/qaid_pretrain.py`` (shipped with the package, so
``fewshot_nlu.fit`` and a pip-installed user have it too); its docstring documents the fields.
"""

from fewshot_nlu.defaults.qaid_pretrain import get_config  # noqa: F401
