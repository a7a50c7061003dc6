"""ConvFiT Stage 2 end to end on a tiny model and toy intents through the entry point and the predict CLI: every
classifier and variant, the automatic choice of classifier, config errors, a frozen prefix left bit-identical,
and the decision rule without a development split."""

import collections
import json

import jax
import numpy as np
import pytest

from configs import convfit_base
from fewshot_nlu import main, predict
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.data import splits
from fewshot_nlu.data.intent_folder import IntentSplit
from fewshot_nlu.encoders import pretrained
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.methods.convfit import stage2 as convfit
from fewshot_nlu.models.intent_model import IntentModel
from tests import report_checks, tiny
from tests.test_main import _toy_dataset


def _stage2_config(data_dir, model_dir, **overrides):
  config = convfit_base.get_config("intent_folder")
  config.data.raw_dir = str(data_dir / "TOY")
  config.data.tfds_dir = str(data_dir / "tfds")
  config.data.train_split, config.data.eval_split = "train", "test"
  config.model.name = str(model_dir)
  config.model.max_length = 32
  config.train.batch_size = 8
  config.train.epochs = 2
  config.stage2.examples_per_class = 2
  config.train.save_every = 2
  config.train.log_every = 1
  config.classifier.mlp.epochs = 5
  config.mesh.data = 2  # groups of 4 rows over 2 data-parallel devices
  config.compilation_cache_dir = ""
  for field, value in overrides.items():
    section, name = field.split("__")
    config[section][name] = value
  return config


@pytest.fixture
def toy_intents(tmp_path):
  c = tiny.CORPUS
  return _toy_dataset(tmp_path / "data", {"bank": c[0:3], "music": c[3:6], "misc": c[6:9], "chat": c[9:12]},
                      {"bank": c[4:5], "music": c[11:12]})


@pytest.mark.parametrize("overrides,variant", [
    # the shipped default: packed rows, logistic regression, rejection calibrated on a held-out split
    ({"eval__calibration_split": "test"}, "LM+S2-OCL (linear)"),
    ({"classifier__kind": "knn", "classifier__space": "projected", "train__packing": False}, "LM+S2-OCL (knn)"),
    # ... and the out-of-scope threshold by leave-one-out on the pool: no second Stage 2
    ({"stage2__loss": "smax", "stage2__sampling": "paper", "stage2__negatives": 1, "classifier__kind": "knn",
      "eval__calibration_rule": "leave_one_out"}, "LM+S2-SMAX (knn)"),
    pytest.param({"stage2__loss": "cos", "classifier__kind": "mlp", "model__init": "random"}, "RAND+S2-COS (mlp)",
                 marks=pytest.mark.slow),
    ({"stage2__enabled": False, "eval__extra_pool_splits": ("test",), "classifier__kind": "knn"}, "LM (knn)"),
])
def test_stage2_end_to_end(tmp_path, tiny_bert_dir, toy_intents, overrides, variant, caplog):
  config = _stage2_config(toy_intents, tiny_bert_dir, **overrides)
  results = main.run(config, tmp_path / "run")
  assert results["variant"] == variant
  kind = results["classifier"]  # the default, "auto", without a development split: the toy pool is balanced,
  if config.classifier.kind == "auto":  # so its first candidate
    assert kind == "linear" and results["classifier_selection"]["split"] == ""
    assert results["classifier_selection"]["chosen"] == "linear"
  rows = [r.split("\t") for r in (tmp_path / "run" / "predictions.tsv").read_text().splitlines()[1:]]
  assert results["accuracy"] == sum(r[1] == r[2] for r in rows) / len(rows)
  if kind == "knn" and not config.eval.extra_pool_splits:
    # Both test utterances are training utterances under another label (on purpose): 1-NN finds the training
    # copy (cosine 1) and predicts its label, whatever Stage 2 did to the encoder, so the accuracy is exactly 0.
    assert [r[2:4] for r in rows] == [["music", "1.0000"], ["chat", "1.0000"]] and results["accuracy"] == 0
  export = tmp_path / "run" / "export"
  loaded = IntentModel.load(export)
  assert loaded.classifier == convfit.CLASSIFIERS[kind]  # logistic regression: a softmax head
  projected = config.stage2.enabled and config.classifier.space == "projected"
  assert loaded.encoder.dim == (512 if projected else tiny.HIDDEN)
  assert results.get("classifier_space", "pooled") == ("projected" if projected else "pooled")
  if kind == "linear":
    assert [len(layer["kernel"]) for layer in loaded.mlp] == [tiny.HIDDEN]  # one layer, on the pooled vectors
    nearest = [r[4].split(" | ")[0].rpartition(" [")[2].rpartition(" ")[0] == r[1] for r in rows]  # 1st evidence
    assert results["nearest_neighbour_accuracy"] == sum(nearest) / len(nearest)
  assert [p.label for p in loaded.predict([r[0] for r in rows])] == [r[2] for r in rows]  # the export agrees
  # the down-projection trains with Stage 2 and is exported only when the classifier reads its space
  assert (export / "projection.safetensors").exists() == projected == (export / "2_Dense").exists()
  if projected:
    dense = json.loads((export / "2_Dense" / "config.json").read_text())  # for sentence-transformers
    assert dense["out_features"] == 512 and dense["activation_function"].endswith("Tanh")
  if config.stage2.enabled:
    assert results["steps"] > 0
    lines = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [l["step"] for l in lines if "train/loss" in l] == list(range(1, results["steps"] + 1))
  else:
    assert results["num_pool"] == 12 + 2  # the test utterances added to the pool (Figure 6 style)
    # each test utterance now finds itself in the pool (cosine 1); the toy labels disagree on purpose, so
    # the tie goes to the training copy listed first
    for row in (tmp_path / "run" / "predictions.tsv").read_text().splitlines()[1:]:
      text, *_, evidence = row.split("\t")
      assert evidence.count(f"{text} [") == 2 and evidence.count(" 1.000]") >= 2
  rows = (tmp_path / "run" / "predictions.tsv").read_text().splitlines()
  assert rows[0].split("\t") == ["text", "gold", "predicted", "score", "nearest_training_utterances"]
  assert len(rows) == 3
  report = report_checks.assert_report_matches_predictions(tmp_path / "run")
  assert ("specialised encoder" in report) == config.stage2.enabled and "took" in report.splitlines()[-1]
  assert loaded.rejection.to_dict() == results["rejection"]  # calibrated at export, saved with it
  assert loaded.rejection.score == ("prediction" if kind == "knn" else "nearest")
  calibration = tmp_path / "run" / convfit.CALIBRATION_FOLDER
  if config.eval.calibration_split:  # on the split's utterances, not the pool
    assert loaded.rejection.rule.endswith("of 2 intent_folder/test in-scope utterances") and loaded.rejection.rows == 2
  elif config.stage2.enabled and config.eval.calibration_rule == "held_out_half":  # the shipped rule: 1 of each
    # intent's 3 examples held out of a second Stage 2
    assert "of 4 training utterances held out of a second Stage 2" in loaded.rejection.rule
    assert loaded.rejection.rows == 4 and not (calibration / "checkpoints").exists()
    saved = json.loads((calibration / "scores.json").read_text())
    assert (saved["held_out"], saved["kept"]) == (4, 8)
    assert results["held_out_half_accuracy"] == saved["accuracy"] and saved["accuracy"] in (0, 0.25, 0.5, 0.75, 1)
    assert loaded.rejection.threshold == pytest.approx(np.quantile(saved["scores"], 0.1))
  else:  # leave-one-out on the pool (asked for, or no Stage 2): no second Stage 2
    assert loaded.rejection.rule.startswith("leave-one-out") and not calibration.exists()
    assert loaded.rejection.rows == results["num_pool"] and "held_out_half_accuracy" not in results


def test_the_held_out_half_is_half_of_each_intent_drawn_by_the_seed():
  labels = ["a"] * 5 + ["b"] * 2 + ["c"]
  split = IntentSplit([f"t{i}" for i in range(8)], labels, "x")
  kept, held = convfit.half_split(split, seed=0)
  assert collections.Counter(held.labels) == {"a": 2, "b": 1} and collections.Counter(kept.labels) == {
      "a": 3, "b": 1, "c": 1}
  assert sorted(kept.texts + held.texts) == sorted(split.texts)
  assert convfit.half_split(split, seed=0) == (kept, held)
  assert any(convfit.half_split(split, seed=s)[1].texts != held.texts for s in range(1, 6))


def test_auto_classifier_is_the_candidate_most_accurate_on_the_development_split(tmp_path, tiny_bert_dir,
                                                                                  toy_intents, monkeypatch):
  config = _stage2_config(toy_intents, tiny_bert_dir, classifier__select_split="train", train__epochs=1,
                          classifier__candidates=("knn", "prototype", "linear"),
                          eval__calibration_split="train")  # as the benchmarks' valid: selection and calibration
  encoded = []
  original = SentenceEncoder.encode
  monkeypatch.setattr(SentenceEncoder, "encode", lambda self, texts, **kw: encoded.append(list(texts)) or
                      original(self, texts, **kw))
  results = main.run(config, tmp_path / "run")
  monkeypatch.undo()
  # the pool's utterances are encoded three times: by the untouched encoder (1-NN before training), once by the
  # trained one for the three candidates, the head and the index, and as the development split, whose vectors
  # the out-of-scope calibration reuses
  assert encoded.count(list(splits.read_split(config, "train").texts)) == 3
  selection = results["classifier_selection"]
  assert selection["split"] == "train" and list(selection["accuracy"]) == ["knn", "prototype", "linear"]
  # recomputed from the exported encoder: each candidate fitted on the pool, scored on the split
  loaded = IntentModel.load(tmp_path / "run" / "export")
  train = splits.read_split(config, "train")
  for kind, accuracy in selection["accuracy"].items():
    model = IntentModel.from_examples(loaded.encoder, train.texts, train.labels, label_names=train.label_names,
                                      classifier=convfit.CLASSIFIERS[kind], head=convfit._mlp_config(config, kind))
    assert accuracy == pytest.approx(np.mean([p.label == g for p, g in zip(model.predict(train.texts), train.labels)]))
  assert selection["accuracy"]["knn"] == 1.0  # 1-NN finds each pool utterance itself: ties go to the first listed
  assert selection["chosen"] == "knn" == results["classifier"] and loaded.classifier == "knn"
  assert results["variant"] == "LM+S2-OCL (knn)"
  # the threshold is the one the exported model calibrates on the split's texts itself
  exported = loaded.rejection.threshold
  assert results["rejection"]["rule"] == loaded.calibrate_rejection(
      texts=train.texts, source=f"{config.data.builder}/train").rule
  assert exported == pytest.approx(loaded.rejection.threshold, rel=1e-6, abs=1e-6)


def test_stage2_config_errors_name_the_field(tmp_path, tiny_bert_dir, toy_intents):
  for overrides, message in [({"stage2__loss": "triplet"}, "config.stage2.loss: 'triplet' is not one of"),
                             ({"stage2__intents_per_batch": 9}, "config.stage2.intents_per_batch: 9 intents per "
                              "batch, but intent_folder/train has 4"),
                             ({"stage2__intents_per_batch": 4, "stage2__examples_per_class": 9},
                              r"config.stage2.intents_per_batch: 4 intents x 9 utterances \(config.stage2.examples_per_class\) "
                              "do not fit batches of config.train.batch_size=8"),
                             ({"eval__extra_pool_splits": ("dev",)}, "config.eval.extra_pool_splits: 'dev'"),
                             ({"eval__calibration_split": "dev"},
                              "config.eval.calibration_split: 'dev' .*; --config.eval.calibration_split= \\(empty\\)"),
                             ({"classifier__k": 0}, "config.classifier.k: must be a positive number"),
                             ({"classifier__candidates": ("linear", "svm")},
                              r"config.classifier.candidates\[1\]: 'svm' is no classifier"),
                             ({"classifier__select_split": "dev"}, "config.classifier.select_split: 'dev'"),
                             ({"classifier__space": "hidden"}, "config.classifier.space: 'hidden' is not one of")]:
    with pytest.raises(ConfigError, match=message):
      main.run(_stage2_config(toy_intents, tiny_bert_dir, **overrides), tmp_path / "w")


def test_predict_cli_prints_neighbours_and_adds_examples(tmp_path, tiny_bert_dir, toy_intents, capsys):
  config = _stage2_config(toy_intents, tiny_bert_dir, stage2__enabled=False, classifier__kind="knn")
  main.run(config, tmp_path / "run")
  export = str(tmp_path / "run" / "export")
  assert predict.main(["--model", export, tiny.CORPUS[3]]) == 0
  out = capsys.readouterr().out
  assert f"{tiny.CORPUS[3]}\n  -> music  (1.000)" in out and tiny.CORPUS[3] in out.split("->")[1]
  extra = tmp_path / "extra.tsv"
  extra.write_text("good morning to you\tgreeting\n")
  assert predict.main(["--model", export, "--add", str(extra), "--save", "--output", str(tmp_path / "p.jsonl"),
                       "good morning to you"]) == 0
  [row] = [json.loads(l) for l in (tmp_path / "p.jsonl").read_text().splitlines()]
  assert row["label"] == "greeting" and row["neighbours"][0]["text"] == "good morning to you"
  assert len(IntentModel.load(export).index) == 13
  extra.write_text("no label here\n")
  assert predict.main(["--model", export, "--add", str(extra), "x"]) == 2
  assert "extra.tsv, line 1: expected 'text<TAB>label'" in capsys.readouterr().err


def test_decision_rule_without_development_split_follows_the_pools_skew():
  rule = convfit.no_development_rule
  assert rule(["linear", "prototype"], collections.Counter({"a": 5, "b": 5, "c": 4}))[0] == "linear"
  assert rule(["linear", "prototype"], collections.Counter({"a": 10, "b": 10, "c": 3}))[0] == "prototype"
  assert rule(["linear", "prototype"], collections.Counter({"a": 10, "b": 10, "c": 4}))[0] == "linear"
  assert rule(["linear", "knn"], collections.Counter({"a": 10, "b": 1}))[0] == "linear"  # no prototype to pick


@pytest.mark.parametrize("sampling,packing,kind", [("fast", False, "bert"), ("fast", True, "bert"),
                                                   ("paper", True, "bert"), ("fast", True, "mpnet")])
def test_convfit_with_a_frozen_prefix_keeps_it_bit_identical(tmp_path, tiny_bert_dir, tiny_mpnet_dir,  # noqa: F811
                                                             toy_intents, sampling, packing, kind):
  """MPNet: its relative position table, shared by every layer, is frozen with the prefix."""
  directory = tiny_mpnet_dir if kind == "mpnet" else tiny_bert_dir
  config = _stage2_config(toy_intents, directory, train__frozen_prefix_layers=1, stage2__sampling=sampling,
                          stage2__negatives=1, train__packing=packing,  # only Stage 2 is under test here:
                          eval__calibration_rule="leave_one_out", eval__before_training=False)
  results = main.run(config, tmp_path / "run")
  assert results["steps"] > 0
  before = pretrained.load_pretrained(str(directory)).params
  after = pretrained.load_pretrained(str(tmp_path / "run" / "export")).params
  same = jax.tree.map(lambda a, b: np.array_equal(np.asarray(a), np.asarray(b)), before, after)
  frozen = ("embeddings", "layer_0") + (("relative_attention_bias",) if kind == "mpnet" else ())
  assert all(jax.tree.leaves({k: same[k] for k in frozen}))
  assert not all(jax.tree.leaves(same["layer_1"]))  # the layer above the prefix trained


def test_frozen_prefix_config_errors_name_the_field(tmp_path, tiny_bert_dir, toy_intents):  # noqa: F811
  with pytest.raises(ConfigError, match="config.train.frozen_prefix_layers: -2"):
    main.run(_stage2_config(toy_intents, tiny_bert_dir, train__frozen_prefix_layers=-2), tmp_path / "w")
  with pytest.raises(ConfigError, match="config.train.packing: packed rows are mean-pooled"):
    main.run(_stage2_config(toy_intents, tiny_bert_dir, train__packing=True, model__pooling="cls"), tmp_path / "w")


def test_a_frozen_prefix_as_deep_as_the_encoder_is_a_config_error(tmp_path, tiny_bert_dir, toy_intents):  # noqa: F811
  """The default job's 2 frozen layers on a 2-layer encoder (``--config.model.name=...``): one line naming the
  field and the encoder's depth, before any training."""
  config = _stage2_config(toy_intents, tiny_bert_dir, train__frozen_prefix_layers=tiny.LAYERS)
  with pytest.raises(ConfigError, match=r"config.train.frozen_prefix_layers: a frozen prefix of 2 layers must leave"):
    main.run(config, tmp_path / "w")
  assert not (tmp_path / "w" / "checkpoints").exists()
