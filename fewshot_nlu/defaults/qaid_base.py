"""QAID fine-tuning + retrieval of intent names: the shared config behind configs/qaid_<dataset>.py.

Hyper-parameters follow QAID §3.2: batch 32 (x 4 views), 10 epochs, tau = 0.07, lambda_class = 0.1,
lambda_mlm = 0.05, m = 32 query tokens, BERT masking (15%, 80/10/10) + 10% dropout as augmentation.

Deviations for a small encoder on a CPU, chosen on BANKING77 5-shot's valid split (bench/results/qaid.md has the
measurements; the test sets decided nothing):
  * D_P = the encoder's width (``qaid.projection_dim = 0``) with Proj started as the identity
    (``qaid.projection_init = "warm"``), not a fresh 128-d layer: step 0 then is the untouched encoder's own late
    interaction instead of a random one. The paper's: --config.qaid.projection_dim=128
    --config.qaid.projection_init=random (128 with "warm" starts from the principal directions instead).
  * lr 5e-5 instead of 1e-5 (dev after 10 epochs, Match-QQ+QA: 79.2 at 1e-5, 81.6 at 5e-5, 80.9 at 1e-4).
  * Inference with intent documents (``qaid.match = "intent_doc"``, ``qaid.model``): each intent answers with the
    union of its name's and its training examples' token vectors, scored by Eq. (1). The paper answers with the
    names alone (Match-QA) and found adding the examples as rows (Match-QQ+QA, §4.1) equal on average; on this
    encoder, dev accuracy after 10 epochs (BANKING77 / HWU64 / CLINC150 5-shot): names 77.1 / 69.4 / 77.7, rows
    81.6 / 75.8 / 85.7, documents 82.8 / 77.0 / 86.6. results.json reports every mode's accuracy of the same
    model (``accuracy_by_match``). The paper's: --config.qaid.match=qa.
  * Model selection on development data: the dataset configs measure accuracy on ``valid`` every
    ``eval.dev_every`` (20) steps and evaluate and export the best step (``eval.select_best``), not the last; the
    paper trains 10 epochs and uses the last. On this encoder the development curves peak before the end
    (CLINC150 5-shot valid: 88.2 at step 40, 86.6 at step 240; BANKING77 10-shot 86.8 at 100, 85.8 at 250).
    Training stops once 5 measurements (100 steps) in a row have not beaten the best (``eval.patience``; the
    schedule stays the 10-epoch one): on the 16 development curves recorded in bench/results/qaid.jsonl every
    run keeps the step the full run kept, and CLINC150 stops at step 140 of 240 (5-shot) and 160 of 470
    (10-shot). Train to the end: --config.eval.patience=0. The last step: --config.eval.select_best=False
    (trains to the end). ``fewshot_nlu.fit`` turns both off (a user's validation examples are the split it
    scores, so choosing on them would flatter the score).

Start from a pre-training export (configs/qaid_pretrain.py) with --config.model.name=runs/qaid_pretrain/export;
from the untouched checkpoint (the default, minilm-l6) this is "QAID w/o PT".

Ablations (Table 3): --config.qaid.loss=npairs | triplet (ColBERT baseline, BM25-hard negatives),
--config.qaid.similarity=cosine, --config.qaid.augment=False; inference from the intent names alone (the
paper's Match-QA): --config.qaid.match=qa; your own intent names: --config.qaid.intent_descriptions=FILE (label<TAB>text).
"""

import ml_collections

from fewshot_nlu.defaults import common

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
  config.eval.select_best = False  # True: evaluate and export the best step on eval.dev_split (not the last)
  config.eval.patience = 0  # > 0: with select_best, stop after this many dev measurements without a better one
  config.eval.calibration_split = ""  # held-out in-scope texts the out-of-scope threshold is calibrated on (their
  # labels unread; fit's validation=); "": the training queries left out one at a time (over-rejects)

  q = config.qaid = ml_collections.ConfigDict()
  q.stage = "finetune"  # "pretrain" | "finetune"
  q.loss = "supcon"  # "supcon" (Eq. 3) | "npairs" | "triplet" (ColBERT baseline)
  q.similarity = "late_interaction"  # | "cosine" (pooled vector)
  q.augment = True  # BERT masking + dropout, two views per text
  q.mask_rate = 0.15
  q.projection_dim = 0  # D_P; 0 = the encoder's width (paper: 128)
  q.projection_init = "warm"  # "warm": from the encoder's token vectors (qaid.warm_start) | "random" (paper)
  q.query_length = 32  # m
  q.answer_length = 32
  q.temperature = 0.07
  q.mlm_weight = 0.05  # lambda_mlm (pre-training: lambda = 0.1)
  q.class_weight = 0.1  # lambda_class
  q.triplets_per_query = 20  # ColBERT baseline
  q.match = "intent_doc"  # "qa" (paper) | "qq+qa" | "intent_doc"
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
  config.train.learning_rate = 5e-5  # paper: 1e-5 (see the module docstring)
  config.eval.dev_split = "valid"  # model selection on the development split (see the module docstring)
  config.eval.select_best = True
  config.eval.patience = 5  # 100 steps without a better dev score: stop (see the module docstring)
  return config


def fit_config(train) -> ml_collections.ConfigDict:
  """The config ``fit(..., method="qaid")`` starts from: every shots row has the same hyper-parameters."""
  del train
  config = get_config("intent_table")
  config.eval.dev_split, config.eval.select_best, config.eval.patience = "", False, 0  # validation= is the
  # scored split, not a dev split
  return config
