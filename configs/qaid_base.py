"""QAID fine-tuning + retrieval of intent names: the shared config behind configs/qaid_<dataset>.py.

Hyper-parameters follow QAID §3.2: batch 32 (x 4 views), 10 epochs, lr 1e-5, tau = 0.07, lambda_class = 0.1,
lambda_mlm = 0.05, D_P = 128, m = 32 query tokens, BERT masking (15%, 80/10/10) + 10% dropout as augmentation.
Start from a pre-training export (configs/qaid_pretrain.py) with --config.model.name=runs/qaid_pretrain/export;
from the untouched checkpoint (the default, minilm-l6) this is "QAID w/o PT".

Ablations (Table 3): --config.qaid.loss=npairs | triplet (ColBERT baseline, BM25-hard negatives),
--config.qaid.similarity=cosine, --config.qaid.augment=False; inference with Match-QQ+QA:
--config.qaid.match=qq+qa; your own intent names: --config.qaid.intent_descriptions=FILE (label<TAB>text).
"""

import ml_collections

from configs import common

SHOTS = {"5": "train_5", "10": "train_10", "full": "train"}


def base_config() -> ml_collections.ConfigDict:
  """The sections QAID reads: the shared ones, training, and ``qaid`` (``add_qaid_fields``)."""
  return common.add_training(common.base("qaid"))


def add_qaid_fields(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  config.train.batch_size = 32
  config.train.learning_rate = 1e-5
  config.train.max_steps = 0  # > 0 caps the run (benchmarks on CPU)
  config.train.save_every = 100
  config.train.frozen_prefix_layers = -1  # >= 0: freeze embeddings + this many layers (run, not cached)
  config.eval.dev_split = ""  # e.g. "valid": accuracy on it at step 0 and every eval.dev_every steps (recorded only)
  config.eval.dev_every = 20

  q = config.qaid = ml_collections.ConfigDict()
  q.stage = "finetune"  # "pretrain" | "finetune"
  q.loss = "supcon"  # "supcon" (Eq. 3) | "npairs" | "triplet" (ColBERT baseline)
  q.similarity = "late_interaction"  # | "cosine" (pooled vector)
  q.augment = True  # BERT masking + dropout, two views per text
  q.mask_rate = 0.15
  q.projection_dim = 128  # D_P; 0 = the encoder's width
  q.projection_init = "warm"  # "warm": from the encoder's token vectors (qaid.warm_start) | "random" (paper)
  q.query_length = 32  # m
  q.answer_length = 32
  q.temperature = 0.07
  q.mlm_weight = 0.05  # lambda_mlm (pre-training: lambda = 0.1)
  q.class_weight = 0.1  # lambda_class
  q.triplets_per_query = 20  # ColBERT baseline
  q.match = "qa"  # "qa" | "qq+qa"
  q.score_chunk = 0  # > 0: score this many candidates at a time (memory bound for huge batches)
  q.intent_descriptions = ""  # a label<TAB>description file; default: labels with "_" -> " "
  q.pretrain_datasets = ("banking77", "clinc150", "hwu64", "snips_joint")
  q.pretrain_splits = ("train", "valid")
  return config


def get_config(dataset: str, shots: str = "5") -> ml_collections.ConfigDict:
  if shots not in SHOTS:
    raise ValueError(f"shots {shots!r} unknown; choose one of {sorted(SHOTS)} (configs/qaid_*.py:<shots>)")
  config = add_qaid_fields(base_config())
  config.data.builder = dataset
  config.data.train_split = SHOTS[shots]
  config.data.eval_split = "test"
  config.train.epochs = 10
  return config
