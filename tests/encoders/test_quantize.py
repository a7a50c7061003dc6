"""int8 inference (``encoders.quantize``): the kernels and the product against numpy, the quantised encoder
against a numpy BERT / MPNet computing the same scheme, and quantising a loaded model's encoders in place."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import safetensors.numpy

from fewshot_nlu import models
from fewshot_nlu.data import batching
from fewshot_nlu.encoders import pretrained, quantize, transformer
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.models.intent_model import IntentModel
from tests import tiny

TEXTS = ["i want to transfer money to my savings account", "hi", "play some jazz music please"]


def test_a_kernel_keeps_one_absmax_scale_per_output_column():
  rng = np.random.default_rng(0)
  kernel = rng.normal(size=(16, 5)).astype(np.float32)
  kernel[:, 3] = 0.0  # a zero column: scale 1, zeros
  kernel_int8, scale = quantize.quantize_kernel(kernel)
  assert kernel_int8.dtype == np.int8 and scale.dtype == np.float32 and scale.shape == (5,)
  np.testing.assert_array_equal(np.abs(kernel_int8).max(axis=0), [127, 127, 127, 0, 127])
  assert scale[3] == 1.0
  np.testing.assert_allclose(scale[[0, 1, 2, 4]], np.abs(kernel[:, [0, 1, 2, 4]]).max(axis=0) / 127, rtol=1e-6)
  assert np.all(np.abs(kernel_int8 * scale - kernel) <= scale / 2 + 1e-7)  # rounding error at most half a step


def test_the_int8_product_is_the_scheme_computed_in_numpy():
  rng = np.random.default_rng(1)
  x = rng.normal(size=(2, 5, 16)).astype(np.float32)
  x[1, 2] = 0.0  # an all-zero row stays zero
  kernel_int8, scale = quantize.quantize_kernel(rng.normal(size=(16, 8)).astype(np.float32))
  got = np.asarray(jax.jit(quantize.int8_matmul)(x, kernel_int8, scale))
  row_scale = np.abs(x).max(axis=-1, keepdims=True) / np.float32(127)
  row_scale = np.where(row_scale > 0, row_scale, np.float32(1.0))
  integer = np.rint(x / row_scale).astype(np.int32) @ kernel_int8.astype(np.int32)
  np.testing.assert_allclose(got, integer.astype(np.float32) * row_scale * scale, rtol=1e-6, atol=1e-6)
  np.testing.assert_array_equal(got[1, 2], 0.0)
  exact = x @ (kernel_int8 * scale)
  assert 0 < np.abs(got - exact).max() < 0.05 * np.abs(exact).max()  # close to float, not equal


@pytest.mark.parametrize("kind", ["bert", "mpnet"])
def test_the_quantised_encoder_computes_the_scheme_of_a_numpy_encoder(kind, tiny_bert_dir, tiny_mpnet_dir):
  directory = {"bert": tiny_bert_dir, "mpnet": tiny_mpnet_dir}[kind]
  model = pretrained.load_pretrained(str(directory))
  params = quantize.int8_params(model.params)
  assert quantize.is_int8(params) and not quantize.is_int8(model.params)
  assert params["layer_0"]["intermediate"]["kernel_int8"].dtype == np.int8
  assert params["embeddings"] is model.params["embeddings"]  # what is not quantised is shared, not copied
  assert "kernel" in model.params["layer_0"]["intermediate"]  # the float params are left as they were
  assert quantize.int8_params(params) is params
  ids = model.tokenizer.encode(TEXTS, 32)
  batch = batching.pad_token_ids(ids, 32, model.tokenizer.pad_id)
  module = transformer.encoder_for(model.config, params)
  assert module.int8
  hidden = np.asarray(module.apply({"params": params}, batch["input_ids"], batch["attention_mask"]))
  tensors = safetensors.numpy.load_file(str(directory / "model.safetensors"))
  config = json.loads((directory / "config.json").read_text())
  expected = tiny.reference_forward(tensors, config, batch["input_ids"], batch["attention_mask"], int8=True)
  as_float = tiny.reference_forward(tensors, config, batch["input_ids"], batch["attention_mask"])
  real = batch["attention_mask"].astype(bool)
  # float32 against float64: a value on a rounding boundary may round the other way (one step of one entry)
  np.testing.assert_allclose(hidden[real], expected[real], atol=2e-3, rtol=2e-3)
  assert np.abs(as_float[real] - expected[real]).max() > 1e-2  # the scheme is what is checked, not float32


def test_a_loaded_model_runs_int8_predicts_close_to_float_and_is_not_saved(tiny_bert_dir, tmp_path):
  encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
  labels = ["bank", "weather", "food", "music", "bank", "bank"]
  IntentModel.from_examples(encoder, tiny.CORPUS[:6], labels).save(tmp_path / "export")
  as_float = models.load(tmp_path / "export")
  as_int8 = models.load(tmp_path / "export", quantize="int8")
  assert quantize.is_int8(as_int8.encoder.params) and not quantize.is_int8(as_float.encoder.params)
  a, b = as_float.encoder.encode(tiny.CORPUS), as_int8.encoder.encode(tiny.CORPUS)
  assert np.all(np.sum(a * b, axis=1) > 0.99) and not np.allclose(a, b, atol=1e-5)
  assert [p.label for p in as_int8.predict(tiny.CORPUS[:6])] == labels  # each example is its own nearest
  as_int8.add_examples([tiny.CORPUS[6]], ["alarm"])  # live additions are encoded by the int8 encoder
  assert as_int8.predict([tiny.CORPUS[6]])[0].label == "alarm"
  as_int8.save_rows(tmp_path / "export")  # the examples go back into the float export
  assert models.load(tmp_path / "export").predict([tiny.CORPUS[6]])[0].label == "alarm"
  with pytest.raises(ValueError, match="int8"):
    as_int8.save(tmp_path / "again")
  with pytest.raises(ValueError, match="int4"):
    models.load(tmp_path / "export", quantize="int4")
  assert quantize.quantize_encoders(as_float, None) == 0 and not quantize.is_int8(as_float.encoder.params)
  with pytest.raises(ValueError, match="found no encoder"):
    quantize.quantize_encoders(object.__new__(IntentModel), "int8")


def test_encoders_sharing_params_share_one_quantised_copy(tiny_bert_dir):
  encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
  other = encoder.with_max_length(16)  # a clone holding the same params

  class Holder:  # stands for a model holding two encoders
    pass

  Holder.__module__ = "fewshot_nlu.tests"
  holder = Holder()
  holder.parts = [encoder, {"other": other}]
  assert quantize.quantize_encoders(holder, "int8") == 2
  assert encoder.params is other.params and quantize.is_int8(encoder.params)
  assert jnp.asarray(encoder.params["layer_0"]["output"]["kernel_int8"]).dtype == jnp.int8
