"""Retriever for your own intents (``retriever.stage = "all"``, see ``fewshot_nlu.methods.retriever.intents``):
the batch softmax on [CLS] vectors over every training intent, then nearest-support-utterance retrieval by dot
product; ``export/`` is an intent model. What ``fewshot_nlu.fit(..., method="retriever_intents")`` trains.

Hyper-parameters: App. A.1's fine-tuning on new intents (lr 1e-5, per-label batch B = 5, the few-shot
setting's number of examples per intent, 10% warm-up) for ``train.max_steps = 20`` steps, as
``configs/retriever_clinc.py:finetune_tgt`` (the paper does not give its step counts). From the command line,
for a folder of ``<split>.csv`` / ``<split>.jsonl`` files:

  python -m fewshot_nlu.main --config=fewshot_nlu/defaults/retriever_intents.py --workdir=runs/my_retriever \\
      --config.data.raw_dir=my_data --config.data.train_split=train --config.data.eval_split=test
"""

import ml_collections

from fewshot_nlu.defaults import retriever_base


def get_config() -> ml_collections.ConfigDict:
  config = retriever_base.get_config("retriever_intents", per_label_batch=5, dev_every=0)
  config.data.builder = "intent_table"
  config.data.train_split = "train"
  config.data.eval_split = "test"
  config.model.max_length = 32
  config.train.learning_rate = 1e-5
  config.train.max_steps = 20
  config.train.save_every = 10
  config.eval.batch_size = 64
  config.retriever.stage = "all"
  return config


def fit_config(train) -> ml_collections.ConfigDict:
  """The config ``fit(..., method="retriever_intents")`` starts from."""
  del train
  return get_config()
