"""``_batch``: the tiny corpus tokenized and padded to one length (shared by encoders/test_frozen_prefix and
test_packing)."""

from fewshot_nlu.data import batching


def _batch(model, texts, length=16):
  ids = model.tokenizer.encode(texts, length)
  return batching.pad_token_ids(ids, length, model.tokenizer.pad_id), ids
