"""DSE: the loss on the head's outputs, sharded vs one device, and DSE + the evaluation suite end to end on a
tiny model and toy dialogues / intents (the export evaluated alone gives the same suite numbers)."""

import json
import pathlib

import jax
import numpy as np
import pytest

from configs import dse_eval, dse_pretrain
from fewshot_nlu import main
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.data import batching
from fewshot_nlu.data.builders.dialogue import DialoguePairsConfig, is_heldout
from fewshot_nlu.encoders import pooling, pretrained, transformer
from fewshot_nlu.methods.dse import head as contrastive_head
from fewshot_nlu.methods.dse import train as dse
from fewshot_nlu.methods.dse.losses import hard_negative_loss
from tests import tiny


def _toy_pretrained(tiny_bert_dir):
  return pretrained.load_pretrained(str(tiny_bert_dir))


def test_dse_loss_is_eq123_on_head_outputs_and_sharded_equals_single_device(tiny_bert_dir):
  model = _toy_pretrained(tiny_bert_dir)
  config = dse_pretrain.get_config()
  params, axes = dse.train_params(model, config)
  loss_fn = dse.make_loss_fn(model.config, config)
  ids = model.tokenizer.encode(tiny.CORPUS, 16)
  make_batch = lambda mesh: batching.pair_batcher(ids[:8], ids[4:], (16,), model.tokenizer.pad_id)(  # noqa: E731
      np.arange(7), 0, 8)
  loss, _ = tiny.assert_sharded_loss_equals_single_device(params, axes, loss_fn, make_batch)
  # the same number from the head outputs, embedded as the loss does (first view key 0, second key 1)
  batch = make_batch(None)
  module = transformer.TransformerEncoder(model.config)

  def module_embed(ids_, mask, key):
    hidden = module.apply({"params": params["encoder"]}, ids_, mask, deterministic=False, rngs={"dropout": key})
    return contrastive_head.apply(params["head"], pooling.mean_pool(hidden, mask))

  first_key, second_key = jax.random.split(jax.random.key(0))
  a = module_embed(batch["context_ids"], batch["context_mask"], first_key)
  b = module_embed(batch["response_ids"], batch["response_mask"], second_key)
  np.testing.assert_allclose(loss, hard_negative_loss(a, b, batch["valid"], temperature=0.05), rtol=1e-5,
                             atol=1e-6)


def _write_lines(folder: pathlib.Path, pairs):
  folder.mkdir(parents=True, exist_ok=True)
  (folder / "seq.in").write_text("".join(t + "\n" for t, _ in pairs))
  (folder / "label").write_text("".join(label + "\n" for _, label in pairs))


def _toy_data(root: pathlib.Path) -> pathlib.Path:
  """Toy BANKING77 / CLINC150 (with out-of-scope) folders and SGD / Taskmaster-4 dialogues under ``root``."""
  c = tiny.CORPUS
  intents = [(c[i], ["money", "weather", "food", "music"][i % 4]) for i in range(12)]
  for name in ("BANKING77", "CLINC150"):
    for split in ("train", "valid", "test", "train_5", "train_10"):
      _write_lines(root / name / split, intents)
  for split in ("train", "valid", "test"):
    _write_lines(root / "CLINC150" / "oos" / split, [("hi there friend", "oos"), ("thanks a lot", "oos")])
  fraction = DialoguePairsConfig(name="x").heldout_fraction
  held = [i for i in range(1000) if is_heldout("sgd", f"d{i}", fraction)][:3]  # some held-out dialogues too
  ids = [i for i in range(1000) if i not in held][:10] + held
  sgd = [{"dialogue_id": f"d{i}", "turns": [{"speaker": "USER", "utterance": c[(i + j) % 12] + " now please"}
                                            for j in range(5)]} for i in ids]
  (root / "SGD" / "train").mkdir(parents=True)
  (root / "SGD" / "train" / "dialogues_001.json").write_text(json.dumps(sgd))
  tm = [{"conversation_id": "c0", "utterances": [{"index": j, "speaker": "USER", "text": c[j] + " okay then"}
                                                  for j in range(4)]}]
  (root / "Taskmaster4" / "TM-4-2024" / "data").mkdir(parents=True)
  (root / "Taskmaster4" / "TM-4-2024" / "data" / "tm.json").write_text(json.dumps(tm))
  return root


def _suite_overrides(config, data_dir):
  config.data.dir = str(data_dir)
  config.data.tfds_dir = str(data_dir / "tfds")
  config.compilation_cache_dir = ""
  config.suite.intent_datasets = ("banking77", "clinc150")
  config.suite.shots = (1, 2)
  config.suite.samplings = 2
  config.suite.response_pairings = ("consecutive", "multi_turn")
  config.suite.response_split = "train"  # the toy dialogues hold out too few pairs for a group
  config.suite.response_group = 5
  config.eval.batch_size = 8
  return config


@pytest.mark.parametrize("variant", ["consecutive", pytest.param("dropout", marks=pytest.mark.slow)])
def test_dse_trains_exports_and_the_export_evaluates_alike(tmp_path, tiny_bert_dir, variant):
  data = _toy_data(tmp_path / "data")
  config = _suite_overrides(dse_pretrain.get_config(variant), data)
  config.model.name = str(tiny_bert_dir)
  config.model.max_length = 32
  config.train.batch_size = 4
  config.train.max_steps = 3
  config.train.save_every = 2
  config.mesh.data = 2
  results = main.run(config, tmp_path / "run")
  assert results["steps"] == 3 and results["pairs"] > 0
  if variant == "dropout":
    firsts, seconds = dse.read_training_pairs(config, "[SEP]")
    assert firsts == seconds and len(set(firsts)) == len(firsts)
  s = results["suite"]
  for name in ("banking77", "clinc150"):
    for shot in ("1_shot", "2_shot"):
      runs = s["intent"][name][shot]["runs"]
      assert len(runs) == 2 and s["intent"][name][shot]["mean"] == pytest.approx(np.mean(runs))
    # The toy test split is the support pool: 1-shot, each intent's support utterance is its own prototype
    # (cosine 1), so at least those 4 of the 12 are right whatever the encoder learnt (chance: 3 of 12).
    assert min(s["intent"][name]["1_shot"]["runs"]) >= 4 / 12, s["intent"][name]
  oos = s["oos"]["clinc150"]
  assert oos["num_oos"] == 2 and set(oos["1_shot"]) == {"mean-std", "mean"}
  for shot in ("1_shot", "2_shot"):
    for rule in ("mean-std", "mean"):  # rejecting can only turn right in-scope predictions wrong
      assert all(a <= b for a, b in zip(oos[shot][rule]["in_accuracy"]["runs"], s["intent"]["clinc150"][shot]["runs"]))
    assert oos[shot]["mean-std"]["threshold"]["mean"] < oos[shot]["mean"]["threshold"]["mean"]
  assert set(oos["1_shot"]["mean"]) == {"accuracy", "in_accuracy", "oos_accuracy", "oos_recall", "threshold"}
  assert s["response_selection"]["consecutive"]["num_eval"] % 5 == 0
  assert "Out-of-scope detection on clinc150" in (tmp_path / "run" / "suite.md").read_text()
  trained = pretrained.load_pretrained(str(tmp_path / "run" / "export"))
  before = pretrained.load_pretrained(str(tiny_bert_dir))
  assert not np.allclose(trained.params["layer_0"]["output"]["kernel"], before.params["layer_0"]["output"]["kernel"])
  config_eval = _suite_overrides(dse_eval.get_config(), data)
  config_eval.model.name = str(tmp_path / "run" / "export")
  evaluated = main.run(config_eval, tmp_path / "eval")["suite"]
  jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, atol=1e-6), evaluated, s)


def test_config_errors_name_the_field(tmp_path, tiny_bert_dir):
  data = _toy_data(tmp_path / "data")
  config = _suite_overrides(dse_eval.get_config(), data)
  config.suite.intent_datasets = ("banking77", "nope")
  with pytest.raises(ConfigError, match="suite.intent_datasets"):
    main.run(config, tmp_path / "x")
  config = _suite_overrides(dse_pretrain.get_config(), data)
  config.dse.pairs = "nope"
  with pytest.raises(ConfigError, match="dse.pairs"):
    main.run(config, tmp_path / "y")
  with pytest.raises(ValueError, match="variant"):
    dse_pretrain.get_config("nope")
