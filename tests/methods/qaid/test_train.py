"""QAID training (``methods.qaid.train``): the fine-tuning loss sharded vs one device and against Eq. (3) on its
views, pre-training -> fine-tuning -> predict end to end on a tiny model and toy intents, ablations, config errors,
a frozen prefix left bit-identical, the development curve, the best step's export and patience."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import qaid_banking77, qaid_pretrain
from fewshot_nlu import main, predict
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.data import splits
from fewshot_nlu.encoders import pretrained, transformer
from fewshot_nlu.methods.qaid import late_interaction
from fewshot_nlu.methods.qaid import train as qaid
from fewshot_nlu.methods.qaid.losses import supcon_loss
from fewshot_nlu.methods.qaid.model import QAIDModel
from fewshot_nlu.train import selection
from tests import report_checks, tiny
from tests.methods.dse.test_train import _toy_data


def _loss_setup(tiny_bert_dir, **qaid_overrides):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  config = qaid_banking77.get_config()
  config.qaid.update(qaid_overrides)
  params, axes, notes = qaid.init_params(model, config, num_intents=3)
  assert notes.get("mlm_head", "initialised").startswith("initialised")  # the tiny checkpoint has no MLM head
  tok = model.tokenizer
  texts = tiny.CORPUS[:8]
  label_ids = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32)
  stream = qaid.example_stream(texts, label_ids, ["bank money", "weather", "music please"], tok, config, 8)
  return model, config, params, axes, next(stream)


def test_finetune_loss_is_eq3_plus_aux_terms_and_sharded_equals_single_device(tiny_bert_dir):
  model, config, params, axes, batch = _loss_setup(tiny_bert_dir)
  loss_fn = qaid.make_loss_fn(model.config, model.tokenizer, config)
  tiny.assert_sharded_loss_equals_single_device(params, axes, loss_fn, lambda mesh: batch, atol=2e-5)
  rng = jax.random.key(5)
  loss, aux = loss_fn(params, batch, rng)
  assert float(loss) == pytest.approx(float(aux["contrastive"] + 0.1 * aux["classification"]
                                            + 0.05 * aux["mlm"]), rel=1e-6)
  # Without augmentation the views are deterministic: rebuild Eq. (3) from the encoder by hand.
  config.qaid.augment = False
  loss_fn = qaid.make_loss_fn(model.config, model.tokenizer, config)
  _, aux = loss_fn(params, batch, rng)
  module = transformer.TransformerEncoder(model.config)

  def views(ids, mask):
    z, m = late_interaction.represent(params["projection"], module.apply({"params": params["encoder"]}, ids, mask),
                                      mask)
    return np.asarray(z), np.asarray(m)

  zq, mq = views(batch["query_ids"], batch["query_mask"])
  za, ma = views(batch["answer_ids"], batch["answer_mask"])
  width = max(zq.shape[1], za.shape[1])
  pad = lambda a: np.pad(a, [(0, 0), (0, width - a.shape[1])] + [(0, 0)] * (a.ndim - 2))  # noqa: E731
  z = np.concatenate([pad(zq), pad(zq), pad(za), pad(za)])
  m = np.concatenate([pad(mq), pad(mq), pad(ma), pad(ma)])
  labels = np.tile(np.where(batch["valid"], batch["label"], -1), 4)
  scores = np.array([[np.sum(np.max(z[u][m[u] > 0] @ z[v][m[v] > 0].T, axis=1)) / m[u].sum() for v in range(32)]
                     for u in range(32)])
  want = 0.0
  for t in range(32):
    positives = [p for p in range(32) if p != t and labels[p] == labels[t]]
    log_denominator = np.log(np.sum(np.exp(np.delete(scores[t], t) / 0.07)))
    want += -np.mean([scores[t, p] / 0.07 - log_denominator for p in positives])
  np.testing.assert_allclose(aux["contrastive"], want / 32, rtol=2e-4, atol=1e-6)
  np.testing.assert_allclose(aux["contrastive"], supcon_loss(jnp.asarray(scores), jnp.asarray(labels)), rtol=2e-4,
                             atol=1e-6)


@pytest.mark.parametrize("overrides", [{"loss": "npairs"}, {"similarity": "cosine", "mlm_weight": 0.0}])
def test_ablation_losses_sharded_equal_single_device(tiny_bert_dir, overrides):
  model, config, params, axes, batch = _loss_setup(tiny_bert_dir, **overrides)
  loss_fn = qaid.make_loss_fn(model.config, model.tokenizer, config)
  loss, _ = tiny.assert_sharded_loss_equals_single_device(params, axes, loss_fn, lambda mesh: batch, atol=2e-5)
  assert np.isfinite(loss)


def _overrides(config, data, model_dir):
  config.data.dir = str(data)
  config.data.tfds_dir = str(data / "tfds")
  config.model.name = str(model_dir)
  config.compilation_cache_dir = ""
  config.train.batch_size = 4
  config.train.max_steps = 3
  config.train.save_every = 2
  config.train.log_every = 1
  config.mesh.data = 2
  config.eval.batch_size = 4
  config.qaid.query_length = 16
  config.qaid.answer_length = 8
  return config


def test_pretrain_then_finetune_then_predict(tmp_path, tiny_bert_dir, capsys):
  data = _toy_data(tmp_path / "data")
  config = _overrides(qaid_pretrain.get_config(), data, tiny_bert_dir)
  config.qaid.pretrain_datasets = ("banking77", "clinc150")
  results = main.run(config, tmp_path / "pt")
  assert results["utterances"] == 12 and results["steps"] == 3  # the toy sets repeat the same 12 utterances
  assert results["init"]["mlm_head"].startswith("initialised")
  export = tmp_path / "pt" / "export"
  assert (export / late_interaction.PROJECTION_FILE).exists() and (export / qaid.MARKER).exists()
  pt = pretrained.load_pretrained(str(export))
  assert "cls.predictions.transform.dense.weight" in pt.heads  # the trained MLM head travels with the export

  config = _overrides(qaid_banking77.get_config("5"), data, export)
  results = main.run(config, tmp_path / "ft")
  assert results["init"] == {"projection": f"from {export}", "mlm_head": f"from {export}"}
  assert results["intents"] == 4 and results["steps"] == 3
  rows = (tmp_path / "ft" / "predictions.tsv").read_text().splitlines()
  assert len(rows) == 13 and all(r.split("\t")[4].count(" [") == 3 for r in rows[1:])
  model = QAIDModel.load(tmp_path / "ft" / "export")
  assert sorted(model.labels) == ["food", "money", "music", "weather"]
  test = [r.split("\t") for r in rows[1:]]
  assert [p.label for p in model.predict([t[0] for t in test])] == [t[2] for t in test]
  assert results["accuracy"] == pytest.approx(sum(t[1] == t[2] for t in test) / 12)  # the file's accuracy
  capsys.readouterr()
  assert predict.main(["--model", str(tmp_path / "ft" / "export"), "--neighbours", "4", tiny.CORPUS[0]]) == 0
  out = capsys.readouterr().out
  lines = out.splitlines()
  assert lines[0] == tiny.CORPUS[0] and lines[1].startswith("  -> ") and len(lines) == 6
  # Match-QQ+QA (the default): the evidence is the best rows, intent names and indexed training examples alike
  assert {line.split()[1] for line in lines[2:]} <= {"food", "money", "music", "weather"}


@pytest.mark.parametrize("overrides", [  # the losses of all three are tested against numpy (here, test_losses.py)
    pytest.param({"loss": "npairs", "augment": False, "intent_descriptions": "DESCRIPTIONS"}, marks=pytest.mark.slow),
    {"loss": "triplet", "triplets_per_query": 2, "mlm_weight": 0.0, "class_weight": 0.0},
    pytest.param({"similarity": "cosine", "match": "qq+qa"}, marks=pytest.mark.slow),
])
def test_finetune_ablations_end_to_end(tmp_path, tiny_bert_dir, overrides):
  data = _toy_data(tmp_path / "data")
  config = _overrides(qaid_banking77.get_config("10"), data, tiny_bert_dir)
  if overrides.get("intent_descriptions"):
    (tmp_path / "d.tsv").write_text("money\ttransfers and payments\n")
    overrides = {**overrides, "intent_descriptions": str(tmp_path / "d.tsv")}
  config.qaid.update(overrides)
  if overrides.get("loss") == "triplet":  # held-out in-scope texts calibrate the out-of-scope threshold
    config.eval.calibration_split = "test"
  results = main.run(config, tmp_path / "run")
  assert results["steps"] == 3
  rows = [r.split("\t") for r in (tmp_path / "run" / "predictions.tsv").read_text().splitlines()[1:]]
  assert len(rows) == 12 and results["accuracy"] == pytest.approx(sum(r[1] == r[2] for r in rows) / 12)
  report_checks.assert_report_matches_predictions(tmp_path / "run")
  model = QAIDModel.load(tmp_path / "run" / "export")
  assert model.similarity == config.qaid.similarity and model.match == config.qaid.match
  assert model.rejection.to_dict() == results["rejection"] and f"match={config.qaid.match}" in model.rejection.rule
  if config.eval.calibration_split:  # Eq. 1's Score of each test text (labels unread), its 10th percentile
    assert model.rejection.rule.startswith("Score of 12 banking77/test in-scope utterances")
    scores = [p.score for p in model.predict([r[0] for r in rows], neighbours=1)]
    assert model.rejection.rows == 12 and model.rejection.threshold == pytest.approx(np.quantile(scores, 0.1),
                                                                                      abs=1e-5)
  else:
    assert model.rejection.rule.startswith("leave-one-out") or model.rejection.rule.startswith("Score of each")
  assert [p.label for p in model.predict([r[0] for r in rows])] == [r[2] for r in rows]  # the export agrees
  if "intent_descriptions" in overrides:
    assert {r["label"]: r["text"] for r in model.rows if r["kind"] == "answer"}["money"] == "transfers and payments"
  # every inference mode of the same model is scored; the configured one is the run's accuracy
  assert set(results["accuracy_by_match"]) == {"qa", "qq+qa", "intent_doc"}
  assert results["accuracy_by_match"][config.qaid.match] == pytest.approx(results["accuracy"], abs=1e-6)
  assert results["num_pool"] == 4 + 12  # names and examples are indexed whatever the mode
  if config.qaid.match == "qq+qa":
    # The test utterances are also the training examples, which are indexed as queries: each one short enough
    # to be indexed whole ([CLS] + words + [SEP] within answer_length) finds itself at cosine 1 and so its
    # own intent: 8 of the 12, where chance gets 3.
    whole = [r for r in rows if len(r[0].split()) + 2 <= config.qaid.answer_length]
    assert len(whole) == 8 and all(r[2] == r[1] and r[3] == "1.0000" for r in whole), whole
    assert results["accuracy"] >= 8 / 12


def test_config_errors_name_the_field(tmp_path, tiny_bert_dir):
  data = _toy_data(tmp_path / "data")
  missing = str(tmp_path / "missing.tsv")
  for field, value, message in [("loss", "nope", "config.qaid.loss"), ("similarity", "dot", "config.qaid.similarity"),
                                ("intent_descriptions", missing, "config.qaid.intent_descriptions"),
                                ("query_length", 999, "config.qaid.query_length: 999 exceeds")]:
    config = _overrides(qaid_banking77.get_config(), data, tiny_bert_dir)
    config.qaid[field] = value
    with pytest.raises(ConfigError, match=message):
      main.run(config, tmp_path / "w")
  config = _overrides(qaid_pretrain.get_config(), data, tiny_bert_dir)
  config.qaid.pretrain_splits = ("train", "test")
  with pytest.raises(ConfigError, match="config.qaid.pretrain_splits"):
    main.run(config, tmp_path / "w2")
  with pytest.raises(ValueError, match="shots"):
    qaid_banking77.get_config("3")


def test_qaid_with_a_frozen_prefix_keeps_it_bit_identical_and_records_the_dev_curve(tmp_path, tiny_bert_dir):
  data = _toy_data(tmp_path / "data")
  config = _overrides(qaid_banking77.get_config("10"), data, tiny_bert_dir)
  config.train.frozen_prefix_layers = 1
  config.eval.dev_split = "valid"
  config.eval.dev_every = 2
  config.eval.select_best = False  # the last step's model is exported, so the trained layer shows below
  config.qaid.match = "qq+qa"
  results = main.run(config, tmp_path / "run")
  assert [p["step"] for p in results["dev_curve"]] == [0, 2, 3]  # step 0, every 2 steps, the last
  assert set(results["dev_curve"][0]) == {"step", "accuracy", "by_match", "seconds"}
  assert all(p["by_match"] == {"qq+qa": p["accuracy"]} for p in results["dev_curve"])  # only qaid.match's mode
  assert set(results["accuracy_by_match"]) == {"qa", "qq+qa", "intent_doc"}  # the final evaluation: every mode
  # the toy valid split is the training set: indexed as examples, Match-QQ+QA finds most of them exactly
  assert all(p["accuracy"] >= 8 / 12 for p in results["dev_curve"])
  metrics = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
  assert [m["step"] for m in metrics if "dev/accuracy" in m] == [0, 2, 3]
  before = pretrained.load_pretrained(str(tiny_bert_dir)).params
  after = pretrained.load_pretrained(str(tmp_path / "run" / "export")).params
  same = jax.tree.map(lambda a, b: np.array_equal(np.asarray(a), np.asarray(b)), before, after)
  assert all(jax.tree.leaves({k: same[k] for k in ("embeddings", "layer_0")}))
  assert not all(jax.tree.leaves(same["layer_1"]))  # the layer above the prefix trained
  assert (tmp_path / "run" / "export" / late_interaction.PROJECTION_FILE).exists()


def test_select_best_evaluates_and_exports_the_best_development_step(tmp_path, tiny_bert_dir):
  data = _toy_data(tmp_path / "data")
  config = _overrides(qaid_banking77.get_config("10"), data, tiny_bert_dir)
  config.eval.dev_split = "valid"
  config.eval.dev_every = 1
  config.eval.select_best = True
  config.train.learning_rate = 5e-3  # large: the curve moves, so the chosen step matters
  results = main.run(config, tmp_path / "run")
  curve = results["dev_curve"]
  best = max(curve, key=lambda p: (p["accuracy"], -p["step"]))  # the earliest of the best
  assert results["selected_step"] == best["step"] and results["selected_dev_accuracy"] == best["accuracy"]
  exported = pretrained.load_pretrained(str(tmp_path / "run" / "export")).params
  kept = pretrained.load_pretrained(str(tmp_path / "run" / "best")).params
  assert all(jax.tree.leaves(jax.tree.map(lambda a, b: np.array_equal(np.asarray(a), np.asarray(b)), exported, kept)))
  # the reported accuracy is the selected model's on the eval split: re-evaluating the export agrees
  reloaded = QAIDModel.load(tmp_path / "run" / "export", batch_size=8)
  split = splits.read_split(config, config.data.eval_split)
  predicted = [p.label for p in reloaded.predict(split.texts)]
  assert np.mean(np.array(predicted) == np.array(split.labels)) == pytest.approx(results["accuracy"])
  config.eval.dev_split = ""
  with pytest.raises(ConfigError, match="select_best: needs config.eval.dev_split"):
    main.run(config, tmp_path / "other")
  config.eval.dev_split, config.eval.patience = "valid", -1
  with pytest.raises(ConfigError, match="eval.patience"):
    main.run(config, tmp_path / "negative")


def test_patience_stops_after_that_many_measurements_without_a_better_one_and_a_resumed_run_alike(
    monkeypatch, tmp_path):
  config = qaid_banking77.get_config("5")
  config.eval.dev_every, config.eval.patience = 2, 2  # stop 4 steps after the best
  scripted = iter([0.5, 0.7, 0.6, 0.7, 0.65])  # steps 0, 2, 4, 6 (a tie is not better); then a resumed run's 8

  class Saved:
    def save(self, directory, encoder_heads):
      directory.mkdir(parents=True, exist_ok=True)

  monkeypatch.setattr(qaid.splits, "read_split", lambda config, name: None)
  monkeypatch.setattr(qaid, "retrieval_model", lambda *args: Saved())
  monkeypatch.setattr(qaid, "export_heads", lambda *args: {})
  monkeypatch.setattr(qaid, "accuracy_by_match", lambda model, split, matches: {matches[0]: next(scripted)})
  writer = type("Writer", (), {"write": lambda self, step, values, prefix: None})()
  model = type("Model", (), {"config": None, "heads": {}})()
  state = type("State", (), {"params": {}})()
  curve = []
  measure, callback = qaid.dev_curve_callback(config, model, [], [], None, writer, curve, tmp_path)
  measure(0, {})
  assert [callback(step, state) for step in (2, 4, 6)] == [False, False, True]
  assert [p["step"] for p in curve] == [0, 2, 4, 6] and selection.read_best(tmp_path) == {"step": 2, "accuracy": 0.7}
  _, resumed = qaid.dev_curve_callback(config, model, [], [], None, writer, [], tmp_path)  # knows step 2 is best
  assert resumed(8, state)
  config.eval.patience = 0  # train to the end
  _, to_the_end = qaid.dev_curve_callback(config, model, [], [], None, writer, [], tmp_path)
  scripted = iter([0.1])
  assert not to_the_end(10, state)


def test_qaid_fine_tunes_and_predicts_on_mpnet(tmp_path, tiny_mpnet_dir):
  """MPNet adds a relative position bias all its layers share (encoders.transformer): QAID's token-level model
  trains and exports it like BERT's weights (the MPNet-base rows of bench/results/models.md run this path)."""
  data = _toy_data(tmp_path / "data")
  config = _overrides(qaid_banking77.get_config("5"), data, tiny_mpnet_dir)
  config.eval.select_best = False
  results = main.run(config, tmp_path / "run")
  assert results["steps"] == 3 and results["intents"] == 4 and 0.0 <= results["accuracy"] <= 1.0
  before = pretrained.load_pretrained(str(tiny_mpnet_dir)).params
  model = QAIDModel.load(tmp_path / "run" / "export")
  after = pretrained.load_pretrained(str(tmp_path / "run" / "export")).params
  assert jax.tree.structure(before) == jax.tree.structure(after)  # the relative position table travels along
  assert not np.array_equal(np.asarray(before["layer_0"]["attention"]["query"]["kernel"]),
                            np.asarray(after["layer_0"]["attention"]["query"]["kernel"]))
  assert {p.label for p in model.predict(tiny.CORPUS[:4])} <= {"food", "money", "music", "weather"}
