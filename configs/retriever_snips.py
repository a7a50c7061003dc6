"""Retriever on SNIPS few-shot slot filling (Yu et al., 2021, §6.2; Hou et al.'s 7 folds, 5-shot episodes).

  python -m fewshot_nlu.main --config=configs/retriever_snips.py --workdir=runs/retriever_snips

Variants (``configs/retriever_snips.py:<variant>``):
  * ``cpu`` (default): the paper's protocol scaled to a 2-core CPU (one batch-softmax step of 30 labels x 5
    spans takes ~8 s there) — per fold ``train.max_steps`` = 10 steps, development F1 after steps 5 and 10 on
    the first 5 development episodes (the better one is kept), threshold grid on those 5 episodes, test on the
    first 10 of the 100 episodes.
  * ``paper``: App. A.1 as written — 1 epoch of per-label batches (no step cap), development F1 on all 100
    episodes every 100 steps, test on all 100 episodes (hours on a CPU; meant for an accelerator).
  * ``frz`` / ``proto`` / ``proto_frz``: Retriever^frz (the untouched encoder), Proto (mean reduction, Eq. 3, and
    prototype retrieval) and Proto^frz, on the ``cpu`` protocol. Append ``_paper`` (``proto_paper``) for the
    full protocol.
1-shot: --config.data.builder_config=shot_1 (and --config.retriever.per_label_batch=1, as App. A.1 ties B to K).
"""

import ml_collections

from configs import retriever_base

VARIANTS = ("cpu", "paper", "frz", "proto", "proto_frz", "frz_paper", "proto_paper", "proto_frz_paper")


def get_config(variant: str = "cpu") -> ml_collections.ConfigDict:
  if variant not in VARIANTS:
    raise ValueError(f"variant {variant!r} unknown; choose one of {VARIANTS} (configs/retriever_snips.py:<variant>)")
  config = retriever_base.get_config("retriever", per_label_batch=5, eval_every=5)  # B = 5 (5-shot)
  config.data.builder = "snips_fewshot_slots"
  config.data.builder_config = "shot_5"
  config.data.train_split = ""  # per fold: fold{k}_train / fold{k}_valid / fold{k}_test
  config.data.eval_split = ""
  config.data.folds = (1, 2, 3, 4, 5, 6, 7)
  config.model.max_length = 64
  config.train.learning_rate = 2e-5  # App. A.1
  config.train.max_steps = 10
  config.train.save_every = 5
  config.eval.batch_size = 32

  r = config.retriever
  r.max_words = 7  # m
  r.beam_size = 10
  r.merge_threshold = 0.99  # lambda
  r.thresholds = (0.85, 0.90, 0.95)  # grid on the development domain
  r.threshold_step = 0.05  # dynamic threshold: lowered by this ...
  r.threshold_retries = 10  # ... at most this many times
  r.dev_episodes = 5  # 0 = all 100
  r.test_episodes = 10  # 0 = all 100

  if "proto" in variant:
    r.reduction, r.inference = "mean", "prototype"
  if "frz" in variant:
    r.train = False
  if "paper" in variant:
    config.train.max_steps = 0
    r.eval_every, r.dev_episodes, r.test_episodes = 100, 0, 0
    config.train.save_every = 100
  return config
