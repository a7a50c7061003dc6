"""Adapters (``encoders.adapters``): the Pfeiffer layer against a hand-written one, adapter-only artefacts that
check their base, and several adapters on one shared base."""

import jax
import numpy as np
import pytest

from fewshot_nlu.encoders import adapters, pretrained, transformer
from fewshot_nlu.encoders.sentence import SentenceEncoder
from tests import tiny


def test_adapter_layer_is_pfeiffer_and_zero_up_is_identity(tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  cfg = model.config
  ids = np.array([[2, 7, 9, 3, 0]], np.int32)
  mask = (ids > 0).astype(np.int32)
  with_adapter = adapters.add_fresh(cfg, model.params, 4, jax.random.key(0))
  assert transformer.adapter_size_of(with_adapter) == cfg.hidden_size // 4
  zero_up = jax.tree_util.tree_map_with_path(
      lambda path, v: np.zeros_like(v) if "up" in str(path) and "adapter" in str(path) else v, with_adapter)
  apply = lambda p: transformer.encoder_for(cfg, p).apply({"params": p}, ids, mask)
  np.testing.assert_allclose(apply(zero_up), apply(model.params), atol=1e-6)
  # one layer by hand: out = LN(x + h + up(relu(down(LN(x + h)))))
  layer = with_adapter["layer_0"]
  x = np.asarray(jax.random.normal(jax.random.key(1), (1, 5, cfg.hidden_size)))
  got = transformer.TransformerLayer(cfg, adapter_size=cfg.hidden_size // 4).apply({"params": layer}, x, mask, True)

  def ln(v, p):
    return (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + cfg.layer_norm_eps) * p["scale"] \
        + p["bias"]

  def dense(v, p):
    return v @ p["kernel"] + p["bias"]

  a = transformer.SelfAttention(cfg).apply({"params": layer["attention"]}, x, mask, True)
  x1 = ln(x + np.asarray(a), layer["attention_norm"])
  h = dense(np.asarray(jax.nn.gelu(dense(x1, layer["intermediate"]), approximate=False)), layer["output"])
  s = x1 + h
  ad = layer["adapter"]
  bottleneck = np.maximum(dense(ln(s, layer["output_norm"]), ad["down"]), 0)
  expected = ln(s + dense(bottleneck, ad["up"]), layer["output_norm"])
  np.testing.assert_allclose(got, expected, atol=1e-4)


def test_adapter_saves_alone_and_checks_its_base(tmp_path, tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  params = adapters.add_fresh(model.config, model.params, 4, jax.random.key(0))
  base, adapter = adapters.split(params)
  adapters.save(tmp_path / "ad", adapter, model.config, base, "tiny")
  files = sorted(p.name for p in (tmp_path / "ad").iterdir())
  assert files == ["adapter.json", "adapter.safetensors"]
  loaded, meta = adapters.load(tmp_path / "ad", model.config, model.params)
  jax.tree.map(np.testing.assert_array_equal, loaded, jax.device_get(adapter))
  assert meta["bytes"] == adapters.num_bytes(adapter) and meta["reduction_factor"] == 4
  assert (tmp_path / "ad" / "adapter.safetensors").stat().st_size < 1.1 * meta["bytes"] + 4096
  other = jax.tree.map(lambda v: v + 1.0, model.params)
  with pytest.raises(ValueError, match="adapter.json: field base_fingerprint"):
    adapters.load(tmp_path / "ad", model.config, other)


def test_two_adapters_share_one_base_and_give_their_own_outputs(tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  base = SentenceEncoder(model.config, model.params, model.tokenizer, max_length=32)
  first = adapters.split(adapters.add_fresh(model.config, model.params, 4, jax.random.key(1)))[1]
  second = adapters.split(adapters.add_fresh(model.config, model.params, 2, jax.random.key(2)))[1]
  scale = lambda tree: jax.tree.map(lambda v: v * 20.0, tree)  # noqa: E731  (visible effects)
  enc_a, enc_b = base.with_adapter(scale(first)), base.with_adapter(scale(second))
  texts = tiny.CORPUS[:5]
  plain, a, b = base.encode(texts), enc_a.encode(texts), enc_b.encode(texts)
  assert not np.allclose(a, plain, atol=1e-3) and not np.allclose(b, plain, atol=1e-3)
  assert not np.allclose(a, b, atol=1e-3)
  alone = SentenceEncoder(model.config, adapters.merge(model.params, scale(first)), model.tokenizer, max_length=32)
  np.testing.assert_allclose(a, alone.encode(texts), atol=1e-5)
  np.testing.assert_allclose(base.encode(texts), plain)  # the base is untouched by its adapters
  assert enc_a.params["layer_0"]["attention"]["query"]["kernel"] is base.params["layer_0"]["attention"]["query"][
      "kernel"]  # shared, not copied
  np.testing.assert_allclose(enc_a.with_adapter(None).encode(texts), plain, atol=1e-6)
