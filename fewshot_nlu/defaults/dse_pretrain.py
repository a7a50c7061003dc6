"""DSE pre-training of the shipped MiniLM on consecutive dialogue utterances, then the evaluation suite.

  python -m fewshot_nlu.main --config=configs/dse_pretrain.py --workdir=runs/dse
  python -m fewshot_nlu.main --config=configs/dse_pretrain.py:dropout --workdir=runs/dse_dropout
Variants (the argument after ":"): consecutive (DSE, default), dropout (DSE-dropout), multi_turn, combined.

Paper (Appendix A.2): batch 1024 (512 for large models), Adam with constant learning rates 3e-4 (head) and
3e-6 (encoder), tau = 0.05, 15 epochs; DSE-dropout is reported after its first epoch (Appendix A.3). The
local dialogues (SGD + Taskmaster-4, 54k consecutive pairs) stand in for TOD-BERT's 893k. On a CPU cap the
run, e.g. ``--config.train.batch_size=128 --config.train.max_steps=300`` (what bench/dse.py runs), and use a
mesh on accelerators: ``--config.mesh.data=-1``.
"""

import ml_collections

from fewshot_nlu.defaults import common
from fewshot_nlu.evaluation import suite

VARIANTS = ("consecutive", "dropout", "multi_turn", "combined")


def get_config(variant: str = "consecutive"):
  if variant not in VARIANTS:
    raise ValueError(f"configs/dse_pretrain.py:{variant}: the variant must be one of {VARIANTS}")
  config = common.add_training(common.base("dse"))
  config.model.max_length = 128 if variant in ("multi_turn", "combined") else 64
  config.data.builder = "dialogue_pairs"
  config.data.builder_config = variant if variant in ("consecutive", "multi_turn") else "consecutive"
  config.data.train_split = "train"
  config.data.eval_split = "heldout"
  config.dse = ml_collections.ConfigDict()
  config.dse.pairs = variant
  config.dse.head_dim = 128
  config.train.batch_size = 1024
  config.train.epochs = 1 if variant == "dropout" else 15
  config.train.max_steps = 0  # > 0: stop after this many steps
  config.train.learning_rate = 3e-6  # the encoder's
  config.train.group_learning_rates = (("head/.*", 3e-4),)
  config.train.warmup_fraction = 0.0
  config.train.decay = "constant"
  config.train.weight_decay = 0.0  # Adam, not AdamW
  config.train.grad_clip_norm = 0.0
  config.train.save_every = 100
  config.train.log_every = 10
  config.loss = ml_collections.ConfigDict()
  config.loss.temperature = 0.05
  config.loss.hard_negative_weighting = True  # False: plain NT-Xent over the same negatives
  config.eval.batch_size = 64
  config.eval.suite = True
  suite.add_config(config)
  return config
