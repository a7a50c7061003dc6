"""Frozen-prefix caching (``encoders.frozen_prefix``): the cached prefix + the top layers equal the whole
encoder (BERT, RoBERTa, and MPNet with its shared relative position table); the cache computes each distinct sequence once and pads like token ids; a prefix run (not cached) equals
the whole encoder and gets no gradient."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot_nlu.data import batching
from fewshot_nlu.encoders import frozen_prefix, pretrained, transformer
from tests import tiny
from tests.encoders.helpers import _batch


@pytest.mark.parametrize("kind", ["bert", "roberta", "mpnet"])
@pytest.mark.parametrize("layers", [0, 1])
def test_cached_prefix_then_top_layers_equals_the_whole_encoder(kind, layers, tiny_bert_dir, tiny_roberta_dir,
                                                                tiny_mpnet_dir):
  directory = {"bert": tiny_bert_dir, "roberta": tiny_roberta_dir, "mpnet": tiny_mpnet_dir}[kind]
  model = pretrained.load_pretrained(str(directory))
  batch, _ = _batch(model, tiny.CORPUS[:5])
  ids, mask = jnp.asarray(batch["input_ids"]), jnp.asarray(batch["attention_mask"])
  whole = transformer.encoder_for(model.config, model.params).apply({"params": model.params}, ids, mask)
  frozen, top = frozen_prefix.split(model.params, model.config, layers)
  states = frozen_prefix.prefix_states(model.config, frozen, ids, mask)
  cached = frozen_prefix.encode_tokens(model.config, top, states, mask)
  np.testing.assert_allclose(np.asarray(cached), np.asarray(whole), rtol=1e-5, atol=1e-5)
  # the ids path of encode_tokens is the whole encoder itself
  np.testing.assert_array_equal(np.asarray(frozen_prefix.encode_tokens(model.config, model.params, ids, mask)),
                                np.asarray(whole))
  assert frozen_prefix.merge(frozen, top).keys() == model.params.keys()
  assert frozen_prefix.first_layer(top) == layers
  # MPNet's shared relative position table: frozen with the prefix, carried read-only above it
  shared = frozen_prefix.SHARED_TABLE in model.params
  assert (frozen_prefix.SHARED_TABLE in frozen) == shared == (frozen_prefix.SHARED_TABLE in top)
  assert frozen_prefix.read_only_patterns(top) == (("encoder/relative_attention_bias/.*",) if shared else ())
  assert frozen_prefix.read_only_patterns(model.params) == ()  # a whole encoder trains its table


def test_split_refuses_a_prefix_without_a_layer_left_to_train(tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  for layers in (-1, tiny.LAYERS):
    with pytest.raises(ValueError, match="at least one of the encoder's 2 layers"):
      frozen_prefix.split(model.params, model.config, layers)


def test_cache_computes_each_distinct_sequence_once_and_pads_like_token_ids(tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  frozen, _ = frozen_prefix.split(model.params, model.config, 1)
  cache = frozen_prefix.PrefixCache(model.config, frozen, pad_id=model.tokenizer.pad_id, max_length=16,
                                    batch_size=4)
  texts = [tiny.CORPUS[0], tiny.CORPUS[10], tiny.CORPUS[0], tiny.CORPUS[3]]
  batch, ids = _batch(model, texts)
  rows = cache.states(ids)
  assert len(cache) == 3 and rows[0] is rows[2]
  assert [r.shape for r in rows] == [(len(i), tiny.HIDDEN) for i in ids]
  reference = frozen_prefix.prefix_states(model.config, frozen, jnp.asarray(batch["input_ids"]),
                                          jnp.asarray(batch["attention_mask"]))
  for row, ref, n in zip(rows, np.asarray(reference), map(len, ids)):
    np.testing.assert_allclose(row, ref[:n], rtol=1e-5, atol=1e-5)  # padding does not change real tokens
  padded = batching.pad_token_ids(rows, 16, model.tokenizer.pad_id, batch_size=5)
  assert padded["input_ids"].shape == (5, 16, tiny.HIDDEN) and padded["input_ids"].dtype == np.float32
  np.testing.assert_array_equal(padded["attention_mask"], batch["attention_mask"].tolist() + [[0] * 16])
  assert not padded["input_ids"][4].any() and not padded["input_ids"][1, len(ids[1]):].any()
  cache.states([ids[1]])
  assert len(cache) == 3  # nothing recomputed


@pytest.mark.parametrize("kind", ["bert", "mpnet"])
@pytest.mark.parametrize("layers", [0, 1])
def test_prefix_run_not_cached_equals_the_whole_encoder_and_stops_its_gradient(layers, kind, tiny_bert_dir,
                                                                              tiny_mpnet_dir):
  model = pretrained.load_pretrained(str(tiny_mpnet_dir if kind == "mpnet" else tiny_bert_dir))
  ids = model.tokenizer.encode(tiny.CORPUS[:5], 16)
  from fewshot_nlu.data import batching
  batch = batching.pad_token_ids(ids, 16, model.tokenizer.pad_id)
  ids, mask = jnp.asarray(batch["input_ids"]), jnp.asarray(batch["attention_mask"])
  whole = transformer.encoder_for(model.config, model.params).apply({"params": model.params}, ids, mask)
  got = frozen_prefix.encode_through_prefix(model.config, model.params, ids, mask, layers)
  np.testing.assert_allclose(got, whole, rtol=1e-5, atol=1e-5)

  def total(params):
    return jnp.sum(frozen_prefix.encode_through_prefix(model.config, params, ids, mask, layers,
                                                       deterministic=False, rng=jax.random.key(0)) ** 2)

  grads = jax.grad(total)(model.params)
  frozen, trainable = frozen_prefix.split(grads, model.config, layers)
  assert all(not np.any(np.asarray(g)) for g in jax.tree.leaves(frozen))  # MPNet: its table's included
  assert any(np.any(np.asarray(g)) for g in jax.tree.leaves(trainable))
  shared = ("encoder/relative_attention_bias/.*",) if kind == "mpnet" else ()
  assert frozen_prefix.frozen_param_patterns(model.config, layers) == (
      "encoder/embeddings/.*", *[f"encoder/layer_{i}/.*" for i in range(layers)], *shared)
  assert frozen_prefix.frozen_param_patterns(model.config, -1) == ()
