"""Batch-softmax training of span vectors (``methods.span_training``): sharded vs one device, and negative spans
drawn from the same utterance."""

import jax
import numpy as np
import pytest

from fewshot_nlu.encoders import pretrained, transformer
from fewshot_nlu.methods import span_training as retriever_training
from fewshot_nlu.models.span_decoding import enumerate_spans
from fewshot_nlu.models.span_retrieval import labelled_spans
from tests import tiny
from tests.methods.retriever.helpers import _config


def _toy_slot_utterances():
  words = [s.split() for s in tiny.CORPUS[:8]]
  return [{"tokens": w, "tags": ["B-a"] + ["O"] * (len(w) - 2) + ["B-b"] if len(w) > 1 else ["B-a"]}
          for w in words]


@pytest.mark.parametrize("reduction,negatives,cosine_scale,packing", [
    ("max", 0, 0.0, False), pytest.param("mean", 0, 0.0, False, marks=pytest.mark.slow), ("max", 3, 20.0, False),
    ("max", 3, 20.0, True)])
def test_sharded_batch_softmax_equals_single_device(tiny_bert_dir, reduction, negatives, cosine_scale, packing):
  from fewshot_nlu.train import run as train_run
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  config = _config(reduction)
  config.retriever.cosine_scale = cosine_scale
  if packing:  # rows of 32 tokens (the items' utterances are encoded to at most 32)
    config.train.packing, config.model.max_length = True, 32
  items = retriever_training.slot_items(model.tokenizer, _toy_slot_utterances(), 32, negatives=negatives)
  loss_fn = retriever_training.make_loss_fn(model.config, config, len(items.label_names), span=True)

  def make_batch(mesh):
    stream = retriever_training.item_stream(items, config, 8, model.tokenizer.pad_id, None,
                                            *train_run.packing_layout(config, mesh))
    batch = next(stream)
    assert ("item_row" in batch) == packing
    return batch

  tiny.assert_sharded_loss_equals_single_device({"encoder": model.params},
                                                {"encoder": transformer.logical_axes(model.config)},
                                                loss_fn, make_batch, atol=1e-4)  # grads ~6: float32 rounding


@pytest.mark.parametrize("kind", ["bert", "mpnet"])
@pytest.mark.parametrize("cached", [False, True])
def test_batch_softmax_on_packed_rows_equals_the_padded_one(kind, cached, tmp_path):
  """The span loss (Retriever Eq. 4, with "none" spans) gives the same value and gradients when the items'
  utterances are packed several to a row (``train.packing``) as when each is padded to a length bucket: token ids
  or a cached frozen prefix's states; MPNet's relative positions too (dropout off: both layouts see one network)."""
  from fewshot_nlu.encoders import frozen_prefix
  model = pretrained.load_pretrained(str(tiny.write_dropout_free_checkpoint(tmp_path, kind)))
  config = _config()
  config.retriever.cosine_scale = 20.0
  items = retriever_training.slot_items(model.tokenizer, _toy_slot_utterances(), 32, negatives=3)
  params = {"encoder": model.params}
  cache = None
  if cached:
    frozen, top = frozen_prefix.split(model.params, model.config, 1)
    cache = frozen_prefix.PrefixCache(model.config, frozen, pad_id=model.tokenizer.pad_id, max_length=32)
    params = {"encoder": top}
  loss_fn = retriever_training.make_loss_fn(model.config, config, len(items.label_names), span=True)
  values = []
  for pack_length in (0, 64):
    batch = next(retriever_training.item_stream(items, config, 8, model.tokenizer.pad_id, cache, pack_length, 2))
    assert ("text_owner" in batch) == bool(pack_length)
    if pack_length:
      assert batch["text_ids"].shape[0] < 8  # several utterances share a row
      rows, starts = batch["item_row"], batch["item_start"]  # each item's utterance begins there
      assert all(batch["text_owner"][rows[i], starts[i]] == i and batch["text_offsets"][rows[i], starts[i]] == 0
                 for i in range(int(batch["valid"].sum())))
    values.append(jax.value_and_grad(lambda p, b: loss_fn(p, b, jax.random.key(0))[0])(params, batch))
  assert np.isfinite(values[0][0]) and values[0][0] > 0
  np.testing.assert_allclose(values[1][0], values[0][0], rtol=1e-5, atol=1e-6)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5), values[1][1], values[0][1])


def test_negative_spans_are_spans_of_the_same_utterance_that_are_no_slot(tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  utterances = _toy_slot_utterances()
  items = retriever_training.slot_items(model.tokenizer, utterances, 32, negatives=4, max_words=3, seed=1)
  encoded = model.tokenizer.encode_words([u["tokens"] for u in utterances], 32)
  assert items.negative_first.shape == (len(items), 4)
  for i in range(len(items)):
    u = next(k for k, (ids, _) in enumerate(encoded) if ids == items.token_ids[i])
    pieces = encoded[u][1]
    spans = {(pieces[s][0], pieces[e - 1][1]): (s, e) for s, e in enumerate_spans(len(pieces), 3)}
    gold = {(pieces[s][0], pieces[e - 1][1]) for s, e, _ in labelled_spans(utterances[u]["tags"])}
    drawn = [(int(a), int(b)) for a, b, ok in zip(items.negative_first[i], items.negative_last[i],
                                                  items.negative_valid[i]) if ok]
    assert len(drawn) == min(4, len(spans) - len(gold)) and len(set(drawn)) == len(drawn)
    assert all(d in spans and d not in gold for d in drawn)
  again = retriever_training.slot_items(model.tokenizer, utterances, 32, negatives=4, max_words=3, seed=1)
  np.testing.assert_array_equal(again.negative_first, items.negative_first)  # seeded


@pytest.mark.parametrize("kind", ["bert", "mpnet"])
def test_fine_tuning_on_the_support_keeps_the_frozen_prefix_bit_identical(kind, tiny_bert_dir, tiny_mpnet_dir):
  """``fine_tune`` with ``frozen_layers=1``: the embeddings, layer 0 and (MPNet) the relative position table every
  layer shares come back unchanged, while the layer above learns (weight decay on, which would move a carried
  table if the optimizer held it)."""
  model = pretrained.load_pretrained(str(tiny_mpnet_dir if kind == "mpnet" else tiny_bert_dir))
  tuning = retriever_training.SupportTuning(steps=3, mode="encoder", frozen_layers=1, weight_decay=0.1)
  tuned, = retriever_training.fine_tune(model.config, model.params, model.tokenizer, _toy_slot_utterances(), tuning,
                                        max_length=32)
  same = {k: all(np.array_equal(np.asarray(a), np.asarray(b))
                 for a, b in zip(jax.tree.leaves(model.params[k]), jax.tree.leaves(tuned[k]))) for k in model.params}
  assert same.pop("embeddings") and same.pop("layer_0")
  if kind == "mpnet":
    assert same.pop("relative_attention_bias")
  assert not any(same.values())


def test_learnt_metric_does_not_depend_on_how_the_negatives_are_padded(tiny_bert_dir, monkeypatch):
  """``learn_metric`` pads the support's unlabelled spans to a compiled shape and masks the padding: W after a few
  steps is the same whether they pad to the next sixteenth of an octave or to many more rows, and it has moved
  from the identity."""
  from fewshot_nlu.data import batching
  from fewshot_nlu.models.span_retrieval import SpanEncoder
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=8)
  tuning = retriever_training.SupportTuning(steps=4, mode="metric", max_words=3)
  shaped = retriever_training.learn_metric(encoder, _toy_slot_utterances(), tuning)[0]
  monkeypatch.setattr(batching, "padded_rows", lambda n, finest: n + 3 * finest)
  wide = retriever_training.learn_metric(encoder, _toy_slot_utterances(), tuning)[0]
  np.testing.assert_allclose(wide, shaped, rtol=1e-4, atol=1e-5)
  assert np.abs(shaped - np.eye(len(shaped))).max() > 1e-3


@pytest.mark.parametrize("kind", ["bert", "mpnet"])
def test_support_loss_on_packed_rows_equals_padded_rows(kind, tiny_bert_dir, tiny_mpnet_dir):
  """Above a frozen prefix the support utterances train packed several to a row (``_packed``: block-diagonal
  attention, span positions moved with them): the loss and its gradients equal those of the padded batch."""
  from fewshot_nlu.encoders import frozen_prefix
  model = pretrained.load_pretrained(str(tiny_mpnet_dir if kind == "mpnet" else tiny_bert_dir))
  utterances = _toy_slot_utterances() + [{"tokens": ["a"] * 20, "tags": ["B-a"] + ["O"] * 19}]  # one long one
  batch, names = retriever_training._support_batch(model.tokenizer, utterances, 32, 3)
  frozen, trainable = frozen_prefix.split(model.params, model.config, 1)
  states = frozen_prefix.prefix_batch(frozen, batch["ids"], batch["mask"], cfg=model.config, dtype=np.float32)
  packed_states, packed = retriever_training._packed(np.asarray(states), batch, 32)
  assert packed_states.shape[0] < states.shape[0]  # fewer rows than utterances

  def loss_and_grads(tokens, b):
    fn = lambda p: retriever_training.support_loss(
        p, tokens, {k: jax.numpy.asarray(v) for k, v in b.items() if k != "ids"}, jax.random.key(0),
        cfg=model.config, num_labels=8, cosine_scale=20.0, dtype=np.float32, deterministic=True)
    return jax.value_and_grad(fn)(trainable)

  (padded_loss, padded_grads), (packed_loss, packed_grads) = (loss_and_grads(jax.numpy.asarray(states), batch),
                                                              loss_and_grads(packed_states, packed))
  np.testing.assert_allclose(float(packed_loss), float(padded_loss), rtol=1e-5, atol=1e-6)
  for a, b in zip(jax.tree.leaves(packed_grads), jax.tree.leaves(padded_grads)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-3, atol=1e-5)
