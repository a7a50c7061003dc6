"""Retriever for few-shot intents on CLINC (Yu et al., 2021, §6.1, Table 1 / App. A.3).

  python -m fewshot_nlu.main --config=configs/retriever_clinc.py:pretrain --workdir=runs/retriever_clinc_src
  python -m fewshot_nlu.main --config=configs/retriever_clinc.py:finetune_tgt_src \
      --config.model.name=runs/retriever_clinc_src/export --workdir=runs/retriever_clinc_ft

``configs/retriever_clinc.py:<stage>[,<n_c>,<n_i>,<shots>]`` with stage frz | pretrain | finetune_tgt |
finetune_tgt_src and (n_c, n_i) = (10, 10) (default), (8, 10) or (5, 15), shots 5 (default) or 2; e.g.
``:pretrain,5,15,2``. Proto: --config.retriever.reduction=mean --config.retriever.inference=prototype.
Hyper-parameters (App. A.1): lr 5e-5 and per-label batch 8 on the source domain, lr 1e-5 and per-label batch =
shots for fine-tuning; steps: ``train.max_steps`` (CPU default 30 on the source, 20 for fine-tuning — the
paper's step counts are not given). The paper averages 3 samples of the split: run seeds 0, 1, 2.
"""

import ml_collections

from fewshot_nlu.defaults import retriever_base

STAGES = ("frz", "pretrain", "finetune_tgt", "finetune_tgt_src")


def get_config(spec: str = "pretrain") -> ml_collections.ConfigDict:
  stage, *numbers = spec.split(",")
  if stage not in STAGES or len(numbers) not in (0, 3):
    raise ValueError(f"{spec!r}: expected <stage>[,<n_c>,<n_i>,<shots>] with stage one of {STAGES}")
  n_c, n_i, shots = (int(n) for n in numbers) if numbers else (10, 10, 5)
  fine_tune = stage.startswith("finetune")
  # no development domain: no early stopping (eval.dev_every 0)
  config = retriever_base.get_config("retriever_intents", per_label_batch=shots if fine_tune else 8, dev_every=0,
                                     train=stage != "frz")
  config.data.builder = "clinc150"
  config.data.train_split = "train"
  config.data.eval_split = "test"
  config.model.max_length = 32
  config.train.save_every = 10
  config.eval.batch_size = 64
  config.train.learning_rate = 1e-5 if fine_tune else 5e-5
  config.train.max_steps = 20 if fine_tune else 30

  r = config.retriever
  r.stage = stage
  r.categories = n_c
  r.intents_per_category = n_i
  r.shots = shots
  r.categories_file = ""  # default: <CLINC150 raw folder>/oos-eval_data/domains.json
  r.support_sets = ("all", "balance", "tgt")
  return config
