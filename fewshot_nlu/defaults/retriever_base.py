"""The fields every Retriever config shares (the training and retrieval options ``methods.span_training``
reads); ``configs/retriever_snips.py`` and ``configs/retriever_clinc.py`` add their protocol's own."""

import ml_collections

from fewshot_nlu.defaults import common


def get_config(method: str, *, per_label_batch: int, dev_every: int, train: bool = True
               ) -> ml_collections.ConfigDict:
  config = common.add_training(common.base(method))
  config.train.epochs = 1
  config.train.warmup_fraction = 0.1  # App. A.1
  config.eval.dev_every = dev_every  # steps between development evaluations for early stopping (0: none)
  config.eval.patience = 0  # evaluations without improvement before stopping (0: train to the end, keep the best)
  config.train.frozen_prefix_layers = -1  # >= 0: freeze embeddings + this many layers, cache their output
  config.train.packing = False  # pack the items' utterances several to a row (block-diagonal attention)

  r = config.retriever = ml_collections.ConfigDict()
  r.train = train  # False: the untouched encoder (^frz)
  r.reduction = "max"  # Eq. 4 (Retriever); "mean" = Proto (Eq. 3); "min-max" (Eq. 5)
  r.inference = "nearest"  # "prototype": retrieve label means (Proto)
  r.per_label_batch = per_label_batch  # B
  r.negative_spans = 0  # slots: K non-slot spans per item as the loss's "none" column (0: the paper's loss)
  r.cosine_scale = 0.0  # > 0: train with s = scale * cos(z, z') instead of the dot product (0: Eq. 1's dot)
  r.index_backend = "exact"  # support sets are small; "scann" / "auto" for big ones
  return config
