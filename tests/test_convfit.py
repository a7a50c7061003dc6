"""ConvFiT: length-grouped batches, the fast (all in-batch pairs) loss and its sharded form, the projection
and MLP heads against numpy, the intent model (k-NN vote, explanations, pool augmentation, save/load), and
Stage 2 / Stage 1 end to end on a tiny model through the entry point and the predict CLI."""

import collections
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import convfit_base
from configs import convfit_stage1 as stage1_config
from fewshot_nlu import main, predict, sharding
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.data import batching, samplers, splits
from fewshot_nlu.encoders import pretrained
from fewshot_nlu.encoders import projection as projection_head
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.losses import pairs as pair_losses
from fewshot_nlu.methods.convfit import stage2 as convfit
from fewshot_nlu.models.intent_model import IntentModel, Neighbour, vote
from fewshot_nlu.train import specialisation
from tests import report_checks, tiny
from tests.test_main import _toy_dataset

# ------------------------------------------------------------------------------------------- batching

def test_pad_in_length_groups_sorts_and_pads_each_group_to_its_bucket():
  seqs = [[1] * n for n in (30, 3, 12, 5, 40)]
  order, groups = batching.pad_in_length_groups(seqs, 2, (8, 16, 32, 48), pad_id=0, batch_size=6)
  assert list(order) == [1, 3, 2, 0, 4]
  assert [g["input_ids"].shape for g in groups] == [(3, 16), (3, 48)]
  lengths = np.concatenate([g["attention_mask"].sum(1) for g in groups])
  np.testing.assert_array_equal(lengths, [3, 5, 12, 30, 40, 0])  # padding row last
  with pytest.raises(ValueError, match="does not split into 4"):
    batching.pad_in_length_groups(seqs, 4, (8, 48), 0, 6)


# --------------------------------------------------------------------------------------- fast pair loss

def _stage2_setup(tiny_bert_dir, loss="ocl", packing=False):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  config = convfit_base.get_config("intent_folder")
  config.stage2.loss = loss
  config.train.packing = packing  # False: length groups (the reference below embeds them one by one)
  config.train.batch_size = 8
  config.stage2.examples_per_class = 2
  config.model.max_length = 32
  params, axes = specialisation.stage2_params(model.params, model.config, config)
  split = convfit.IntentSplit(tiny.CORPUS, [f"l{i % 4}" for i in range(12)], "toy")
  return model, config, params, axes, split


def test_fast_loss_is_the_pair_loss_over_all_in_batch_pairs(tiny_bert_dir):
  model, config, params, _, split = _stage2_setup(tiny_bert_dir)
  mesh = sharding.make_mesh({"data": 1})
  stream = convfit.fast_stream(split, {f"l{i}": i for i in range(4)}, model.tokenizer, config, 8, mesh)
  batch = next(stream)
  rng = jax.random.key(3)
  loss, aux = specialisation.make_loss_fn(model.config, config)(params, batch, rng)
  # reference: embed each length group with the same dropout key, then the loss over explicit pairs
  embed = specialisation.embed_fn(model.config, config)
  vectors = tiny.embed_length_groups(embed, params, batch, rng)
  first, second = zip(*[(i, j) for i in range(8) for j in range(i + 1, 8)])
  first, second = np.array(first), np.array(second)
  positive = batch["label"][first] == batch["label"][second]
  expected = pair_losses.online_contrastive_loss(vectors[first], vectors[second], positive)
  np.testing.assert_allclose(loss, expected, rtol=1e-5, atol=1e-6)
  assert float(aux["positive_pairs"]) == 4 * 1  # P=4 intents x C(K=2, 2)
  assert sorted(np.bincount(batch["label"])) == [2, 2, 2, 2]


@pytest.mark.parametrize("loss,packing", [("ocl", False), ("cos", False), ("smax", False), ("ocl", True)])
def test_fast_loss_sharded_equals_single_device(tiny_bert_dir, loss, packing):
  model, config, params, axes, split = _stage2_setup(tiny_bert_dir, loss, packing)
  loss_fn = specialisation.make_loss_fn(model.config, config)
  tiny.assert_sharded_loss_equals_single_device(
      params, axes, loss_fn,
      lambda mesh: next(convfit.fast_stream(split, {f"l{i}": i for i in range(4)}, model.tokenizer, config, 8, mesh)))


def test_paper_stream_pads_each_side_to_its_own_bucket(tiny_bert_dir):
  model, config, *_ , split = _stage2_setup(tiny_bert_dir)
  config.stage2.sampling, config.stage2.negatives = "paper", 1
  pairs = samplers.convfit_pairs(split.labels, config.stage2.negatives, seed=config.seed)
  stream = specialisation.paper_stream(split.texts, pairs, model.tokenizer, config, 8, sharding.make_mesh({"data": 1}))
  # 4 labels x 3 examples: 4 * C(3, 2) = 12 positives, each with 2n = 2 negatives
  assert stream.num_items == 12 * 3
  batch = next(stream)
  assert batch["first_ids"].shape[0] == 8 and batch["positive"].dtype == bool


# ------------------------------------------------------------------------------------------------ heads

def test_projection_is_tanh_dense_with_torch_linear_init():
  params = projection_head.init(jax.random.key(0), 384, 512)
  assert params["kernel"].shape == (384, 512) and float(jnp.abs(params["kernel"]).max()) <= 1 / math.sqrt(384)
  x = np.random.default_rng(0).normal(size=(3, 384)).astype(np.float32)
  expected = np.tanh(x @ np.asarray(params["kernel"]) + np.asarray(params["bias"]))
  np.testing.assert_allclose(projection_head.apply(params, x), expected, rtol=1e-5, atol=1e-6)


def test_mlp_loss_matches_numpy():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(4, 3)).astype(np.float32)
  onehot = np.eye(3, dtype=np.float32)[[0, 2, 1, 1]]
  weights = np.array([1, 1, 1, 0], np.float32)
  eps = 0.1
  smooth = onehot * (1 - eps) + eps / 3
  log_softmax = logits - np.log(np.exp(logits).sum(1, keepdims=True))
  expected = -(smooth * log_softmax).sum(1)[:3].mean()
  got = mlp_head.loss(logits, onehot, weights, multilabel=False, label_smoothing=eps)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
  multi = np.array([[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0]], np.float32)
  # Multi-ConvFiT Eq. (1), ls = 1 - eps: positives ls, negatives (1 - ls) * M_i / |C|
  t = np.array([[1 - eps, 2 * eps / 3, 1 - eps], [eps / 3, eps / 3, 1 - eps], [1 - eps, 1 - eps, 2 * eps / 3],
                [eps / 3, 1 - eps, eps / 3]], np.float32)
  p = 1 / (1 + np.exp(-logits))
  expected = -(t * np.log(p) + (1 - t) * np.log(1 - p)).sum(1)[:3].mean()
  got = mlp_head.loss(logits, multi, weights, multilabel=True, label_smoothing=eps)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_mlp_learns_separable_classes_and_round_trips(tmp_path):
  rng = np.random.default_rng(0)
  centres = rng.normal(size=(3, 16)) * 3
  labels = np.repeat(np.arange(3), 20)
  features = (centres[labels] + rng.normal(size=(60, 16))).astype(np.float32)
  layers = mlp_head.train(features, np.eye(3, dtype=np.float32)[labels],
                          mlp_head.MLPConfig(hidden=(32, 32), epochs=30, dropout=0.5, learning_rate=0.1))
  probs = mlp_head.predict_proba(layers, features)
  assert (probs.argmax(1) == labels).mean() == 1.0
  np.testing.assert_allclose(probs.sum(1), 1, rtol=1e-5)
  mlp_head.save(tmp_path, layers)
  again = mlp_head.load(tmp_path)
  np.testing.assert_array_equal(mlp_head.predict_proba(again, features), probs)


def test_class_weights_make_every_class_weigh_the_same():
  onehot = np.eye(4, dtype=np.float32)[[0, 1, 1, 1, 3, 3]]  # class 2 has no rows: 3 classes present
  weights = mlp_head.class_weights(onehot)
  np.testing.assert_allclose(weights, [6 / 3, 6 / 9, 6 / 9, 6 / 9, 6 / 6, 6 / 6])
  np.testing.assert_allclose([weights[onehot[:, c] > 0].sum() for c in (0, 1, 3)], 2.0)
  assert (mlp_head.class_weights(np.eye(3, dtype=np.float32)[[0, 1, 2, 2, 1, 0]]) == 1.0).all()
  with pytest.raises(ValueError, match="single-label"):
    mlp_head.MLPConfig(multilabel=True, class_balanced=True)


def test_class_balanced_head_is_the_plain_head_on_a_balanced_pool_and_lifts_a_rare_class():
  rng = np.random.default_rng(0)
  centres = rng.normal(size=(3, 8))
  linear = dict(hidden=(), dropout=0.0, optimizer="adamw", learning_rate=1e-2, epochs=50, decay="constant")
  labels = np.repeat(np.arange(3), 4)
  features = (centres[labels] + rng.normal(size=(12, 8))).astype(np.float32)
  targets = np.eye(3, dtype=np.float32)[labels]
  plain = mlp_head.train(features, targets, mlp_head.MLPConfig(**linear))
  balanced = mlp_head.train(features, targets, mlp_head.MLPConfig(**linear, class_balanced=True))
  np.testing.assert_array_equal(balanced[0]["kernel"], plain[0]["kernel"])  # weights of 1.0: the same steps
  # one example of class 2 among 20 of classes 0 and 1, which overlap it: balancing raises its probability
  labels = np.array([0] * 20 + [1] * 20 + [2])
  features = (centres[labels] * 0.3 + rng.normal(size=(41, 8))).astype(np.float32)
  targets = np.eye(3, dtype=np.float32)[labels]
  probe = (centres[2] * 0.3)[None].astype(np.float32)
  rare = [mlp_head.predict_proba(mlp_head.train(features, targets, mlp_head.MLPConfig(**linear, class_balanced=b)),
                                 probe)[0, 2] for b in (False, True)]
  assert rare[1] > rare[0]

# ------------------------------------------------------------------------------------------ intent model

def test_vote_sums_cosines_per_label_and_keeps_the_nearer_on_ties():
  n = [Neighbour("a", "x", 0.9), Neighbour("b", "y", 0.6), Neighbour("c", "y", 0.5)]
  assert vote(n[:1]) == ("x", 0.9)
  assert vote(n) == ("y", pytest.approx(1.1))
  assert vote([Neighbour("a", "x", 0.5), Neighbour("b", "y", 0.5)])[0] == "x"


def test_intent_model_predicts_explains_grows_and_round_trips(tiny_bert_dir, tmp_path):
  encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
  texts, labels = tiny.CORPUS[:6], ["bank", "weather", "food", "music", "bank", "bank"]
  model = IntentModel.from_examples(encoder, texts, labels)
  [p] = model.predict([texts[3]])
  assert p.label == "music" and p.score == pytest.approx(1.0, abs=1e-5)
  assert p.neighbours[0] == Neighbour(texts[3], "music", pytest.approx(1.0, abs=1e-5)) and len(p.neighbours) == 3
  model.add_examples([tiny.CORPUS[6]], ["alarm"])  # a new intent, no retraining
  assert model.predict([tiny.CORPUS[6]])[0].label == "alarm" and "alarm" in model.labels
  model.save(tmp_path / "export")
  loaded = IntentModel.load(tmp_path / "export")
  assert loaded.predict(tiny.CORPUS) == model.predict(tiny.CORPUS)
  assert len(loaded.index) == 7


def test_prototype_classifier_is_the_nearest_class_mean_and_follows_the_index(tiny_bert_dir, tmp_path):
  encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
  texts, labels = tiny.CORPUS[:6], ["bank", "weather", "food", "music", "bank", "bank"]
  model = IntentModel.from_examples(encoder, texts, labels, classifier="prototype")
  x = encoder.encode(texts)
  x = x / np.linalg.norm(x, axis=1, keepdims=True)
  means = {l: x[[i for i, m in enumerate(labels) if m == l]].mean(0) for l in model.labels}  # numpy reference
  queries = encoder.encode(tiny.CORPUS)
  queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
  expected = np.stack([queries @ (means[l] / np.linalg.norm(means[l])) for l in model.labels], axis=1)
  np.testing.assert_allclose(model.scores(tiny.CORPUS), expected, rtol=1e-5, atol=1e-5)
  predictions = model.predict(tiny.CORPUS)
  assert [p.label for p in predictions] == [model.labels[i] for i in expected.argmax(1)]
  np.testing.assert_allclose([p.score for p in predictions], expected.max(1), rtol=1e-5, atol=1e-5)
  assert predictions[0].neighbours[0].text == texts[0]  # the nearest examples are still the evidence
  model.add_examples([tiny.CORPUS[6]], ["alarm"])  # a new intent's prototype at once, nothing retrained
  assert model.predict([tiny.CORPUS[6]])[0].label == "alarm"
  assert model.rejection_score == "nearest"
  model.save(tmp_path / "export")
  loaded = IntentModel.load(tmp_path / "export")
  assert loaded.classifier == "prototype" and loaded.predict(tiny.CORPUS) == model.predict(tiny.CORPUS)


def test_a_linear_head_learns_added_intents_and_the_grown_export_keeps_it(tiny_bert_dir, tmp_path):
  encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
  texts, labels = tiny.CORPUS[:6], ["bank", "weather", "food", "music", "bank", "bank"]
  head = mlp_head.MLPConfig(hidden=(), dropout=0.0, optimizer="adamw", learning_rate=1e-1, epochs=100,
                            decay="constant")
  model = IntentModel.from_examples(encoder, texts, labels, classifier="mlp", head=head)
  assert [len(layer["bias"]) for layer in model.mlp] == [4]  # trained on the indexed examples
  assert [p.label for p in model.predict(texts)] == labels
  model.save(tmp_path / "export")
  grown = IntentModel.load(tmp_path / "export")
  assert grown.head == head
  grown.add_examples(tiny.CORPUS[6:8], ["alarm", "alarm"])  # a new intent: the head is retrained with it
  assert grown.labels[-1] == "alarm" and [len(layer["bias"]) for layer in grown.mlp] == [5]
  assert [p.label for p in grown.predict(tiny.CORPUS[6:8])] == ["alarm", "alarm"]
  grown.save_rows(tmp_path / "export")
  again = IntentModel.load(tmp_path / "export")
  assert again.labels == grown.labels
  np.testing.assert_array_equal(again.scores(tiny.CORPUS), grown.scores(tiny.CORPUS))
  older = IntentModel(encoder, model.index, model.labels, classifier="mlp", mlp=model.mlp)  # saved without head
  with pytest.raises(ValueError, match=r"new labels \['chat'\]"):
    older.add_examples([tiny.CORPUS[9]], ["chat"])


# --------------------------------------------------------------------------------------- end to end

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
    ({"stage2__loss": "smax", "stage2__sampling": "paper", "stage2__negatives": 1, "classifier__kind": "knn"},
     "LM+S2-SMAX (knn)"),
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
  if config.eval.calibration_split:  # on the split's utterances, not the pool
    assert loaded.rejection.rule.endswith("of 2 intent_folder/test in-scope utterances") and loaded.rejection.rows == 2
  else:
    assert loaded.rejection.rule.startswith("leave-one-out")


def test_auto_classifier_is_the_candidate_most_accurate_on_the_development_split(tmp_path, tiny_bert_dir,
                                                                                  toy_intents):
  config = _stage2_config(toy_intents, tiny_bert_dir, classifier__select_split="train", train__epochs=1,
                          classifier__candidates=("knn", "prototype", "linear"))
  results = main.run(config, tmp_path / "run")
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


# ----------------------------------------------------------------------------------------------- stage 1

def _reddit_folder(root):
  root.mkdir(parents=True)
  c = tiny.CORPUS
  lines = [{"context": c[i], "response": c[(i + 1) % len(c)]} for i in range(len(c))]
  (root / "train-00000-of-00001.json").write_text("".join(json.dumps(l) + "\n" for l in lines))
  return root


def _stage1_run(tmp_path, tiny_bert_dir, cache_chunks):
  config = stage1_config.get_config()
  config.model.name = str(tiny_bert_dir)
  config.data.builder, config.data.builder_config = "reddit_conversational", ""
  config.data.raw_dir = str(tmp_path / "reddit")
  config.data.tfds_dir = str(tmp_path / "tfds")
  config.data.eval_split = ""
  config.train.batch_size, config.train.max_steps, config.train.log_every = 8, 1, 1
  config.loss.cache_chunks = cache_chunks
  config.mesh.data = 1
  config.compilation_cache_dir = ""
  workdir = tmp_path / f"run{cache_chunks}"
  results = main.run(config, workdir)
  loss = json.loads((workdir / "metrics.jsonl").read_text().splitlines()[0])["train/loss"]
  return results, loss, pretrained.load_pretrained(str(workdir / "export"))


def test_stage1_end_to_end_plain_and_gradient_cached_agree(tmp_path):
  # without dropout, so the plain and the chunked forward passes see the same network
  (tmp_path / "tiny").mkdir()
  tiny_bert_dir = tiny.write_checkpoint(tmp_path / "tiny", "bert")
  hf = json.loads((tiny_bert_dir / "config.json").read_text())
  hf.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  (tiny_bert_dir / "config.json").write_text(json.dumps(hf))
  _reddit_folder(tmp_path / "reddit")
  results, loss, plain = _stage1_run(tmp_path, tiny_bert_dir, 0)
  assert results["steps"] == 1 and results["pairs"] == 12
  assert convfit.is_stage1_model(plain.directory)
  _, cached_loss, cached = _stage1_run(tmp_path, tiny_bert_dir, 2)
  np.testing.assert_allclose(cached_loss, loss, rtol=1e-5, atol=1e-6)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5), cached.params, plain.params)


def test_decision_rule_without_development_split_follows_the_pools_skew():
  rule = convfit.no_development_rule
  assert rule(["linear", "prototype"], collections.Counter({"a": 5, "b": 5, "c": 4}))[0] == "linear"
  assert rule(["linear", "prototype"], collections.Counter({"a": 10, "b": 10, "c": 3}))[0] == "prototype"
  assert rule(["linear", "prototype"], collections.Counter({"a": 10, "b": 10, "c": 4}))[0] == "linear"
  assert rule(["linear", "knn"], collections.Counter({"a": 10, "b": 1}))[0] == "linear"  # no prototype to pick
