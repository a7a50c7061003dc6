"""Baseline: in-batch ranking fine-tuning of the shipped MiniLM on BANKING77 10-shot, 1-NN evaluation.

The default job until 2026-11-25 (configs/default.py is ConvFiT since). Run (from the repository root, data in
../shared/data or $FEWSHOT_NLU_DATA):
  python -m fewshot_nlu.main --config=configs/intent_mneg.py --workdir=runs/intent_mneg
Overrides, e.g.:
  --config.data.builder=hwu64 --config.train.epochs=3 --config.mesh.data=8
Your own data (one subfolder per split, each with seq.in + label):
  --config.data.builder=intent_folder --config.data.raw_dir=path/to/folder
"""

import ml_collections

from fewshot_nlu.defaults import common


def get_config() -> ml_collections.ConfigDict:
  config = common.add_training(common.base("intent_mneg"))
  config.model.max_length = 48  # ConvFiT §3 (Stage 2)
  config.data.builder = "banking77"
  config.data.train_split = "train_10"
  config.data.eval_split = "test"
  config.train.packing = False  # pack utterances several to a row (block-diagonal attention)

  config.loss = ml_collections.ConfigDict()
  config.loss.scale = 20.0  # D in S(c, r) = D * cos(c, r); sentence-transformers' default
  config.loss.exclude_positive = True  # Eq. (1) as printed; False = sentence-transformers' MNRL

  config.eval.before_training = True  # also report the untouched encoder's 1-NN accuracy
  return config


def fit_config(train) -> ml_collections.ConfigDict:
  """The config ``fit(..., method="baseline")`` starts from."""
  del train
  return get_config()
