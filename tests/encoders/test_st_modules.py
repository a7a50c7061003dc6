"""sentence-transformers' module files: read when loading a sentence-transformers directory (its pooling, Dense,
Normalize and maximum length replace our defaults), and written with exports so the library reads ours."""

import json
import shutil

import jax
import numpy as np
import pytest
import safetensors.numpy

from fewshot_nlu import main
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.data import batching
from fewshot_nlu.encoders import pretrained, st_modules, transformer
from fewshot_nlu.encoders import projection as projection_head
from fewshot_nlu.encoders.sentence import SentenceEncoder
from tests import tiny

from configs import intent_mneg as baseline_config

TEXTS = ["i want to transfer money to my savings account", "hi", "play some jazz music please"]


def _st_dir(source, target, pooling_config: dict, extra=(), transformer_path=""):
  """A sentence-transformers directory around the tiny checkpoint ``source``: modules Transformer, Pooling,
  then ``extra`` ((kind, folder) pairs), as sentence-transformers writes them."""
  shutil.copytree(source, target / transformer_path if transformer_path else target, dirs_exist_ok=True)
  modules = [{"idx": 0, "name": "0", "path": transformer_path, "type": "sentence_transformers.models.Transformer"},
             {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
  modules += [{"idx": i, "name": str(i), "path": folder, "type": f"sentence_transformers.models.{kind}"}
              for i, (kind, folder) in enumerate(extra, start=2)]
  (target / "modules.json").write_text(json.dumps(modules))
  (target / "1_Pooling").mkdir()
  (target / "1_Pooling" / "config.json").write_text(json.dumps(pooling_config))
  (target / transformer_path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 24}))
  return target


def _hidden(directory, texts):
  """Token states [B, L, H] of the checkpoint at ``directory``, and the batch's mask."""
  model = pretrained.load_pretrained(str(directory))
  batch = batching.pad_token_ids(model.tokenizer.encode(texts, 24), 24, model.tokenizer.pad_id)
  hidden = transformer.TransformerEncoder(model.config).apply(
      {"params": model.params}, batch["input_ids"], batch["attention_mask"])
  return np.asarray(hidden, np.float64), batch["attention_mask"]


def _unit(x):
  return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_cls_pooling_model_loads_with_cls_pooling(tiny_bert_dir, tmp_path):
  """A legacy-format (sentence-transformers 2.x) CLS-pooling model with Normalize encodes by its [CLS] vector."""
  legacy = {"word_embedding_dimension": tiny.HIDDEN, "pooling_mode_cls_token": True,
            "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False}
  directory = _st_dir(tiny_bert_dir, tmp_path / "st", legacy, [("Normalize", "2_Normalize")])
  encoder = SentenceEncoder.from_pretrained(str(directory))
  assert (encoder.pooling_mode, encoder.normalize, encoder.max_length) == ("cls", True, 24)
  hidden, _ = _hidden(directory, TEXTS)
  np.testing.assert_allclose(encoder.encode(TEXTS), _unit(hidden[:, 0]), atol=1e-5)
  # told otherwise, the caller's pooling wins
  assert SentenceEncoder.from_pretrained(str(directory), pooling_mode="mean").pooling_mode == "mean"


def test_max_pooling_and_tanh_dense_in_new_format(tiny_bert_dir, tmp_path):
  """sentence-transformers >= 5's ``pooling_mode`` key, a Dense (tanh) and no Normalize; the transformer in an
  older layout's ``0_Transformer/`` subfolder."""
  directory = _st_dir(tiny_bert_dir, tmp_path / "st", {"embedding_dimension": tiny.HIDDEN, "pooling_mode": "max"},
                      [("Dense", "2_Dense")], transformer_path="0_Transformer")
  rng = np.random.default_rng(0)
  weight, bias = rng.normal(0, 0.3, (6, tiny.HIDDEN)).astype(np.float32), rng.normal(0, 0.3, 6).astype(np.float32)
  (directory / "2_Dense").mkdir()
  (directory / "2_Dense" / "config.json").write_text(json.dumps(
      {"in_features": tiny.HIDDEN, "out_features": 6, "bias": True,
       "activation_function": "torch.nn.modules.activation.Tanh"}))
  safetensors.numpy.save_file({"linear.weight": weight, "linear.bias": bias},
                              str(directory / "2_Dense" / "model.safetensors"))
  encoder = SentenceEncoder.from_pretrained(str(directory))
  assert (encoder.pooling_mode, encoder.normalize, encoder.dim) == ("max", False, 6)
  hidden, mask = _hidden(directory / "0_Transformer", TEXTS)
  pooled = np.where(mask[..., None] == 1, hidden, -1e9).max(axis=1)
  np.testing.assert_allclose(encoder.encode(TEXTS), np.tanh(pooled @ weight.T + bias), atol=1e-5)


def test_unsupported_modules_are_refused_naming_the_file(tiny_bert_dir, tmp_path):
  directory = _st_dir(tiny_bert_dir, tmp_path / "st", {"embedding_dimension": tiny.HIDDEN,
                                                       "pooling_mode": "weightedmean"})
  with pytest.raises(st_modules.SentenceModulesError, match=r"1_Pooling/config\.json: pooling \['weightedmean'\]"):
    SentenceEncoder.from_pretrained(str(directory))
  assert SentenceEncoder.from_pretrained(str(directory), pooling_mode="cls").pooling_mode == "cls"
  config = baseline_config.get_config()
  config.model.name, config.model.pooling = str(directory), "auto"
  with pytest.raises(ConfigError, match="config.model.pooling: 'auto', but .*weightedmean"):
    main.resolve_pooling(config)


def test_auto_pooling_resolves_to_the_declared_one(tiny_bert_dir, tmp_path):
  config = baseline_config.get_config()
  config.model.name, config.model.pooling = str(tiny_bert_dir), "auto"
  main.resolve_pooling(config)
  assert config.model.pooling == "mean"  # a plain checkpoint declares nothing
  directory = _st_dir(tiny_bert_dir, tmp_path / "st", {"pooling_mode_cls_token": True})
  config.model.name, config.model.pooling = str(directory), "auto"
  main.resolve_pooling(config)
  assert config.model.pooling == "cls"


def test_export_files_round_trip_and_are_in_sentence_transformers_layout(tiny_bert_dir, tmp_path):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  projection = jax.device_get(projection_head.init(jax.random.key(0), tiny.HIDDEN, 5))
  encoder = SentenceEncoder(model.config, model.params, model.tokenizer, pooling_mode="mean", max_length=20,
                            projection=projection)
  encoder.save(tmp_path / "export")
  modules = json.loads((tmp_path / "export" / "modules.json").read_text())
  assert [(m["path"], m["type"].rsplit(".", 1)[1]) for m in modules] == [
      ("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Dense", "Dense"), ("3_Normalize", "Normalize")]
  dense = safetensors.numpy.load_file(str(tmp_path / "export" / "2_Dense" / "model.safetensors"))
  np.testing.assert_array_equal(dense["linear.weight"], np.asarray(projection["kernel"]).T)  # torch [out, in]
  assert json.loads((tmp_path / "export" / "sentence_bert_config.json").read_text())["max_seq_length"] == 20
  declared = st_modules.read(tmp_path / "export")
  assert (declared.pooling, declared.normalize, declared.max_seq_length) == ("mean", True, 20)
  np.testing.assert_array_equal(declared.projection["kernel"], projection["kernel"])
  # the Dense alone (no projection.safetensors) gives the same vectors
  (tmp_path / "export" / projection_head.FILE).unlink()
  again = SentenceEncoder.from_pretrained(str(tmp_path / "export"))
  np.testing.assert_allclose(again.encode(TEXTS), encoder.encode(TEXTS), atol=1e-6)
