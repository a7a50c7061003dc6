"""ConvFiT Stage 2 + intent detection: the shared config behind configs/convfit_<dataset>.py.

Hyper-parameters follow ConvFiT §3: batch 32, max length 48, d_o = 512, AdamW 2e-5 with 10% warm-up and linear
decay; 10 / 5 / 2 epochs and n = 3 / 3 / 1 negatives for 10-shot / 30-shot / full; OCL margin 0.5; COS targets
0.8 / 0.3. 5-shot (not in the paper; QAID's setting, to compare the two) takes the 10-shot row: 10 epochs,
n = 3. Deviations, each measured:
  * ``stage2.sampling`` = "fast" (P x K batches, all in-batch pairs) instead of the paper's pair lists ("paper"):
    bench/results/convfit.md;
  * logistic regression on the specialised vectors (``classifier.kind=linear``) instead of the paper's 1-NN
    (``--config.classifier.kind=knn``): chosen on the datasets' ``valid`` splits, where it beats 1-NN on the
    same encoders in every balanced few-shot cell (bench/results/decision_rules.md); weight decay 0, the best of
    (0, 0.01, 0.1, 1) there; class-balanced (``classifier.linear.class_balanced``: every intent weighs the same in
    its loss; the same model on a balanced pool, better on a long-tail one's ``valid``: bench/results/peers.md);
  * ``classifier.kind`` = "auto": of ``classifier.candidates`` (logistic regression as above, class prototypes),
    the one more accurate on ``classifier.select_split`` (the development split, ``valid``; never the test set):
    logistic regression wins on balanced few-shot pools, prototypes on long-tail ones
    (bench/results/decision_rules.md, peers.md). Without a development split (``select_split=""``, as for a
    user's own folder without one, resolved at the run's start with a warning) class prototypes when the pool is
    skewed (an intent with 3x the examples of another: long-tail pools, small bots), else logistic regression
    (``methods/convfit/stage2.no_development_rule``);
  * ``classifier.space`` = "pooled": the classifier reads the encoder's mean-pooled vectors before Stage 2's d_o
    down-projection (trained through, then left out; "projected" for the paper's space): on ``valid``, logistic
    regression there is level or ahead in every cell, +0.46 on average (bench/results/decision_rules.md);
  * ``eval.calibration_split`` = "valid" (the benchmark datasets): the out-of-scope threshold (not in the paper)
    is calibrated on the development split's in-scope utterances, by their nearest example's cosine; without one
    (a user's data), ``eval.calibration_rule`` = "held_out_half": Stage 2 runs a second time on half of each
    intent's examples and the other half is scored as new utterances (on small bots it keeps 62-97% of new
    in-scope utterances, 85% on average, where the leave-one-out rule kept 41-79%, for about one more Stage 2:
    bench/results/oos_bots.md);
  * ``train.min_steps`` = 100: a floor under the epoch schedule. A small bot's 40-170 utterances get 10-60 steps
    from 10 epochs and are under-trained; with the floor, on the small bots' development splits (class
    prototypes, 3 seeds): SNIPS 86.9 -> 90.1, HWU64 89.6 -> 90.7, CLINC150 level (bench/results/small_bots_notes.md).
    Every published cell and long-tail pool already runs 100+ steps, so the floor leaves them as they were;
  * ``train.packing`` = True: the utterances of a batch packed several to a row (block-diagonal attention; the
    model's outputs are unchanged, the step ~1.6x faster: bench/results/convfit.md, train_step.md);
  * ``stage2.smax_classifier_learning_rate`` = 1e-3 (the SMAX variant only): its pair classifier W trains at this
    rate, the encoder at ``train.learning_rate``; at the paper's one rate the fast sampling's few steps leave W
    near its random start and SMAX lost to the untouched encoder (bench/results/convfit_notes.md).

Throughput option (not in the paper; measured in bench/results/convfit.md): ``train.frozen_prefix_layers`` = N
freezes the embeddings and the lower N layers, computes their output once per utterance and trains only the
layers above (-1: the whole encoder trains, as in the paper). On MPNet-base (``--config.model.name=mpnet-base``)
the embeddings + 4 layers, chosen on BANKING77's ``valid`` over 4 and 6 (bench/results/models.md), is what the
two-encoder table runs. With it, ``--config.train.learning_rate=1e-4`` (the table's ``lr 1e-4`` rows; this config
keeps the paper's 2e-5) won on HWU64 10-shot's ``valid`` over 2e-5 / 5e-5 / 2e-4 and is what HWU64's and CLINC150's
``valid`` prefer, not BANKING77's: choose it on a development split (bench/results/models_notes.md).

Variants (Table 2): --config.stage2.loss=cos|smax, --config.stage2.enabled=False (LM / LM+S1 without S2),
--config.classifier.kind=knn --config.classifier.space=projected (the paper's 1-NN) or mlp (Casanueva et al. 2020
MLP on frozen encodings), --config.model.init=random (RAND),
--config.model.name=runs/stage1/export (LM+S1+S2, after configs/convfit_stage1.py).
"""

import statistics

import ml_collections

from fewshot_nlu.defaults import common

DATASETS_WITH_VALID = ("banking77", "clinc150", "hwu64")  # their development split, "valid", calibrates
SHOTS = {"5": ("train_5", 10, 3), "10": ("train_10", 10, 3), "30": ("train_30", 5, 3), "full": ("train", 2, 1)}


def get_config(dataset: str, shots: str = "10") -> ml_collections.ConfigDict:
  if shots not in SHOTS:
    raise ValueError(f"shots {shots!r} unknown; choose one of {sorted(SHOTS)} (configs/convfit_*.py:<shots>)")
  split, epochs, negatives = SHOTS[shots]
  config = common.add_training(common.base("convfit"))
  config.model.init = "pretrained"  # "random": RAND in Table 2
  config.model.max_length = 48
  config.data.builder = dataset
  config.data.train_split = split
  config.data.eval_split = "test"

  config.train.batch_size = 32
  config.train.epochs = epochs
  config.train.min_steps = 100  # at least this many steps, however few the utterances (a floor on the epochs)
  config.train.learning_rate = 2e-5
  config.train.warmup_fraction = 0.1
  config.train.decay = "linear"
  config.train.save_every = 100
  config.train.frozen_prefix_layers = -1  # >= 0: freeze embeddings + this many layers, cache their output
  config.train.packing = True  # pack utterances several to a row (block-diagonal attention)

  config.stage2 = ml_collections.ConfigDict()
  config.stage2.enabled = True
  config.stage2.loss = "ocl"  # "ocl" | "cos" | "smax"
  config.stage2.sampling = "fast"  # "fast" (P x K, all in-batch pairs) | "paper" (§2.2 pair lists)
  config.stage2.examples_per_class = 4  # fast: K utterances per intent
  config.stage2.intents_per_batch = 0  # fast: P intents per batch; 0 = from the data: min(intents, batch_size / K)
  config.stage2.length_groups = 2  # fast: encode each batch as this many length-sorted sub-batches (less padding)
  config.stage2.negatives = negatives  # paper: n, 2n negative pairs per positive pair
  config.stage2.projection_dim = 512  # d_o; 0 = no down-projection
  config.stage2.margin = 0.5  # OCL delta_m
  config.stage2.smax_classifier_learning_rate = 1e-3  # SMAX's pair classifier W (not in the paper: 2e-5)
  config.stage2.cos_targets = (0.8, 0.3)  # COS delta for positive / negative pairs

  config.classifier = ml_collections.ConfigDict()
  # "auto" (chosen on select_split) | "linear" (logistic regression) | "prototype" | "knn" (the paper's) | "mlp"
  config.classifier.kind = "auto"
  config.classifier.candidates = ("linear", "prototype")  # auto: chosen among these (ties: the first)
  # auto: the development split that chooses ("": stage2.no_development_rule)
  config.classifier.select_split = "valid" if dataset in DATASETS_WITH_VALID else ""  # a run on other data
  # (--config.data.builder=...) without a "valid" split resolves it to "" with a warning
  config.classifier.k = 1  # knn: neighbours that vote
  config.classifier.space = "pooled"  # "pooled" (before the d_o projection) | "projected" (the paper's space)
  config.classifier.linear = common.mlp_classifier(  # logistic regression, as bench/encoder_baselines.py fits it
      hidden=(), dropout=0.0, optimizer="adamw", learning_rate=1e-2, weight_decay=0.0, decay="constant", epochs=200,
      class_balanced=True)
  config.classifier.mlp = common.mlp_classifier()  # Casanueva et al. (2020): 2 x 768, dropout 0.75, SGD 0.5

  config.eval.before_training = True  # also report k-NN with the untouched encoder
  config.eval.extra_pool_splits = ()  # e.g. ("train_30",): index more examples at inference (Figure 6)
  # held-out in-scope utterances the out-of-scope threshold is calibrated on ("": eval.calibration_rule)
  config.eval.calibration_split = "valid" if dataset in DATASETS_WITH_VALID else ""  # likewise
  # without a calibration split: "held_out_half" (a second Stage 2 on half of each intent's examples scores the
  # other half) | "leave_one_out" (no second training; over-rejects: bench/results/oos_bots.md)
  config.eval.calibration_rule = "held_out_half"
  return config


def shots_for(train) -> str:
  """§3's hyper-parameter row (epochs, negatives) for ``fit``'s examples (``data.user_examples.Examples``) by
  the median examples per intent: up to 10 the 10-shot row, up to 30 the 30-shot row, else the full-data row."""
  median = statistics.median(train.examples_per_label().values())
  return "10" if median <= 10 else "30" if median <= 30 else "full"


def user_config(shots: str) -> ml_collections.ConfigDict:
  """§3's ``shots`` row on a user's examples (an ``intent_table``), which have no development split: the
  decision rule is ``stage2.no_development_rule``'s (prototypes on a skewed pool, else logistic regression)."""
  config = get_config("intent_table", shots)
  config.classifier.select_split = ""  # fit's validation= is the scored split, not a development split
  return config


def fit_config(train) -> ml_collections.ConfigDict:
  """The config ``fit(..., method="convfit")`` starts from (``methods.METHODS``): ``user_config`` of the row
  ``shots_for`` the examples."""
  return user_config(shots_for(train))
