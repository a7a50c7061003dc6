"""Encoder numerics against a float64 numpy BERT/RoBERTa/MPNet, masks, dropout, bf16."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import safetensors.numpy

from fewshot_nlu.data import batching
from fewshot_nlu.encoders import pooling, pretrained, transformer
from tests import tiny

TEXTS = ["i want to transfer money to my savings account", "hi", "play some jazz music please"]


def _forward(model, texts, dtype=jnp.float32):
  ids = model.tokenizer.encode(texts, 32)
  batch = batching.pad_token_ids(ids, 32, model.tokenizer.pad_id)
  hidden = transformer.TransformerEncoder(model.config, dtype).apply(
      {"params": model.params}, batch["input_ids"], batch["attention_mask"])
  return np.asarray(hidden, np.float32), batch


@pytest.mark.parametrize("kind", ["bert", "roberta", "mpnet"])
def test_matches_numpy_reference(kind, tiny_bert_dir, tiny_roberta_dir, tiny_mpnet_dir):
  directory = {"bert": tiny_bert_dir, "roberta": tiny_roberta_dir, "mpnet": tiny_mpnet_dir}[kind]
  model = pretrained.load_pretrained(str(directory))
  assert model.config.position_style == ("bert" if kind == "bert" else "roberta")
  assert model.config.model_type == kind
  hidden, batch = _forward(model, TEXTS)
  tensors = safetensors.numpy.load_file(str(directory / "model.safetensors"))
  expected = tiny.reference_forward(tensors, json.loads((directory / "config.json").read_text()),
                                    batch["input_ids"], batch["attention_mask"])
  real = batch["attention_mask"].astype(bool)
  np.testing.assert_allclose(hidden[real], expected[real], atol=2e-4, rtol=2e-4)


def test_roberta_round_trip(tiny_roberta_dir, tmp_path):
  model = pretrained.load_pretrained(str(tiny_roberta_dir))
  pretrained.save_pretrained(tmp_path, model.config, model.params, model.tokenizer, model.heads)
  again = pretrained.load_pretrained(str(tmp_path))
  assert again.config == model.config
  jax.tree.map(np.testing.assert_array_equal, again.params, model.params)
  assert again.tokenizer.encode(TEXTS, 32) == model.tokenizer.encode(TEXTS, 32)
  np.testing.assert_array_equal(_forward(again, TEXTS)[0], _forward(model, TEXTS)[0])


def test_mpnet_relative_buckets_are_hf_values():
  """Buckets HF's MPNetEncoder.relative_position_bucket (torch) gives for a 520-token row: row 0 (keys after the
  query) and column 0 (keys before it)."""
  at = [0, 1, 7, 8, 9, 11, 12, 15, 16, 22, 23, 31, 32, 45, 46, 63, 64, 90, 91, 127, 128, 200, 519]
  after = [0, 17, 23, 24, 24, 24, 25, 25, 26, 26, 27, 27, 28, 28, 29, 29, 30, 30, 31, 31, 31, 31, 31]
  before = [0, 1, 7, 8, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15, 15, 15, 15]
  for buckets in (transformer.relative_position_buckets(520), tiny.mpnet_relative_buckets(520)):
    assert buckets[0, at].tolist() == after and buckets[at, 0].tolist() == before


def test_mpnet_round_trip_keeps_hf_names(tiny_mpnet_dir, tmp_path):
  model = pretrained.load_pretrained(str(tiny_mpnet_dir))
  assert "token_type_embeddings" not in model.params["embeddings"]
  assert model.params["relative_attention_bias"]["embedding"].shape == (tiny.RELATIVE_BUCKETS, tiny.HEADS)
  pretrained.save_pretrained(tmp_path, model.config, model.params, model.tokenizer, model.heads)
  names = set(safetensors.numpy.load_file(str(tmp_path / "model.safetensors")))
  source = {k[len("mpnet."):] for k in safetensors.numpy.load_file(str(tiny_mpnet_dir / "model.safetensors"))}
  assert names == source - {"embeddings.position_ids"}  # MPNetModel's names, exactly
  config = json.loads((tmp_path / "config.json").read_text())
  assert config["model_type"] == "mpnet" and config["relative_attention_num_buckets"] == tiny.RELATIVE_BUCKETS
  again = pretrained.load_pretrained(str(tmp_path))
  assert again.config == model.config
  np.testing.assert_array_equal(_forward(again, TEXTS)[0], _forward(model, TEXTS)[0])


def test_mpnet_padding_does_not_change_real_tokens(tiny_mpnet_dir):
  model = pretrained.load_pretrained(str(tiny_mpnet_dir))
  module = transformer.TransformerEncoder(model.config)
  ids = model.tokenizer.encode(["cancel my order"], 32)
  short = batching.pad_token_ids(ids, len(ids[0]), model.tokenizer.pad_id)
  long = batching.pad_token_ids(ids, 16, model.tokenizer.pad_id)
  a = module.apply({"params": model.params}, short["input_ids"], short["attention_mask"])
  b = module.apply({"params": model.params}, long["input_ids"], long["attention_mask"])
  np.testing.assert_allclose(a, b[:, : a.shape[1]], atol=1e-5)


def test_padding_does_not_change_real_tokens(tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  module = transformer.TransformerEncoder(model.config)
  ids = model.tokenizer.encode(["cancel my order"], 32)
  short = batching.pad_token_ids(ids, 5, model.tokenizer.pad_id)
  long = batching.pad_token_ids(ids, 16, model.tokenizer.pad_id)
  a = module.apply({"params": model.params}, short["input_ids"], short["attention_mask"])
  b = module.apply({"params": model.params}, long["input_ids"], long["attention_mask"])
  np.testing.assert_allclose(a, b[:, :5], atol=1e-5)
  np.testing.assert_allclose(pooling.mean_pool(a, short["attention_mask"]),
                             pooling.mean_pool(b, long["attention_mask"]), atol=1e-5)


def test_dropout_only_in_training(tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  module = transformer.TransformerEncoder(model.config)
  batch = batching.pad_token_ids(model.tokenizer.encode(TEXTS, 32), 32, model.tokenizer.pad_id)
  apply = lambda rng, det: module.apply({"params": model.params}, batch["input_ids"], batch["attention_mask"],
                                        deterministic=det, rngs={"dropout": rng})
  key = jax.random.key(0)
  np.testing.assert_array_equal(apply(key, True), apply(jax.random.key(1), True))
  assert not np.allclose(apply(key, False), apply(key, True))
  np.testing.assert_array_equal(apply(key, False), apply(key, False))


def test_bf16_compute_close_to_float32(tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  f32, batch = _forward(model, TEXTS)
  bf16, _ = _forward(model, TEXTS, jnp.bfloat16)
  mask = batch["attention_mask"]
  a = np.asarray(pooling.l2_normalize(pooling.mean_pool(jnp.asarray(f32), mask)))
  b = np.asarray(pooling.l2_normalize(pooling.mean_pool(jnp.asarray(bf16), mask)))
  assert np.min(np.sum(a * b, -1)) > 0.99


def test_every_param_has_logical_axes():
  cfg = transformer.EncoderConfig.from_hf(tiny.hf_config("bert", 50))
  axes = jax.tree.leaves(transformer.logical_axes(cfg), is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))
  params = jax.tree.leaves(transformer.init_params(cfg, jax.random.key(0)))
  assert len(axes) == len(params)
  assert all(len(a) == p.ndim and all(n is not None for n in a) for a, p in zip(axes, params))
