"""The general span encoder the joint NLU model's slot filler starts from (``methods.nlu.span_encoder``).

  python -m fewshot_nlu.main --config=configs/span_encoder.py --workdir=runs/span_encoder
  python -m fewshot_nlu.main --config=configs/span_encoder.py --workdir=runs/span_encoder_no_snips \\
      --config.data.exclude='("snips",)'       # leave SNIPS out (to score on it); not installed

Trains on the slot spans of SNIPS, MixATIS, NLU++ and SGD (their training data only) with the Retriever's batch
softmax, the settings of ``configs/retriever_snips.py`` (MiniLM cut after layer 3, embeddings + layer 0 frozen,
4 "none" spans per item, s = 20 cos, lr 1e-4), 32 slot types x 4 spans per step for 1,500 steps, the items' utterances
packed several to a row (``train.packing``: the padded rows' loss; 1.5 s a step against 4.1 padded on a 2-core AMD
EPYC: about 40 minutes there); installs the result where ``fit(..., method="nlu")`` looks for it.

On MPNet-base (the slot filler's ``slots.model=mpnet-base``, ``slots.encoder_layers=6``), packed rows and a deeper
frozen prefix make it affordable here (``train.packing``: the items' utterances several to a row of 64 tokens,
the same loss as padded rows; bench/results/joint_nlu_notes.md has the timings and what it does for the slots;
it installs beside a MiniLM one: one installed encoder per base model):

  python -m fewshot_nlu.main --config=configs/span_encoder.py --workdir=runs/span_encoder_mpnet \\
      --config.model.name=mpnet-base --config.retriever.encoder_layers=6 --config.train.frozen_prefix_layers=3 \\
      --config.train.max_steps=400
"""

import ml_collections

from fewshot_nlu.data import slot_corpora
from fewshot_nlu.defaults import common


def get_config() -> ml_collections.ConfigDict:
  config = common.add_training(common.base("span_encoder"))
  del config.model["pooling"]  # span vectors: the first and last word pieces, no pooling
  for field in ("builder", "raw_dir", "tfds_dir", "train_split", "eval_split"):
    del config.data[field]
  config.data.sources = slot_corpora.SOURCES
  config.data.exclude = ()  # corpora left out (leave-one-dataset-out benchmarks)
  config.model.max_length = 64
  config.train.learning_rate = 1e-4
  config.train.max_steps = 1500
  config.train.epochs = 1000  # an upper bound only: the schedule is max_steps (a label's spans repeat, drawn anew)
  config.train.warmup_fraction = 0.1
  config.train.save_every = 100
  config.train.frozen_prefix_layers = 1
  config.train.packing = True  # pack the items' utterances several to a row (block-diagonal attention)
  config.eval.dev_every = 0  # no development evaluation: a fixed number of steps
  config.eval.patience = 0
  config.install = True  # copy the export where fit(method="nlu") finds it (only with nothing excluded)

  r = config.retriever = ml_collections.ConfigDict()
  r.encoder_layers = 3
  r.reduction = "max"
  r.per_label_batch = 4
  r.labels_per_batch = 32
  r.negative_spans = 4
  r.cosine_scale = 20.0
  r.max_words = 7
  r.max_items_per_label = 1000
  return config
