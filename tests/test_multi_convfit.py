"""Multi-ConvFiT: multi-label pairs in the batch loss, Eq. (1) label smoothing, adapters (Pfeiffer layer, frozen
base, adapter-only artefacts, several adapters on one base), thresholds and metrics, and the method end to
end on a toy multi-label folder with the tiny BERT."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from configs import multi_convfit_base
from fewshot_nlu import main, predict, sharding
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.encoders import adapters, pretrained, transformer
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.losses import pairs as pair_losses
from fewshot_nlu.methods.multi_convfit import labels as multilabel
from fewshot_nlu.methods.multi_convfit import train as multi_convfit
from fewshot_nlu.methods.multi_convfit.model import MultiLabelModel
from fewshot_nlu.train import specialisation
from tests import report_checks, tiny

SETS = [("a",), ("a", "b"), ("b",), ("c",), (), ("b", "c"), ("a",), ("c",), ("b",), ("a", "c"), ("b",), ("c",)]


# ------------------------------------------------------------------------------------ pairs and the loss

def _setup(tiny_bert_dir, mode="fft"):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  config = multi_convfit_base.get_config("joint_nlu_folder", "", f"low,{mode}")
  config.train.batch_size = 8
  config.model.max_length = 32
  params, axes = specialisation.stage2_params(model.params, model.config, config)
  return model, config, params, axes


def test_in_batch_positive_is_label_set_intersection():
  sets = multilabel.multi_hot(SETS, ["a", "b", "c"])
  first, second = specialisation.all_pairs(len(SETS))
  got = np.asarray(specialisation.in_batch_positive({"label_sets": sets}, first, second))
  expected = [bool(set(SETS[i]) & set(SETS[j])) for i, j in zip(first, second)]
  np.testing.assert_array_equal(got, expected)
  assert not got[[k for k, (i, j) in enumerate(zip(first, second)) if 4 in (i, j)]].any()  # no labels: never


def test_multilabel_fast_loss_is_ocl_over_intersecting_pairs(tiny_bert_dir):
  model, config, params, _ = _setup(tiny_bert_dir)
  mesh = sharding.make_mesh({"data": 1})
  sets = multilabel.multi_hot(SETS, ["a", "b", "c"])
  stream = specialisation.in_batch_stream(tiny.CORPUS, {"label_sets": sets}, model.tokenizer, config, 8, mesh)
  batch = next(stream)
  rng = jax.random.key(1)
  loss, _ = specialisation.make_loss_fn(model.config, config)(params, batch, rng)
  embed = specialisation.embed_fn(model.config, config)
  vectors = tiny.embed_length_groups(embed, params, batch, rng)
  rows = [tuple(np.flatnonzero(r)) for r in batch["label_sets"]]
  first, second = np.triu_indices(8, k=1)
  positive = np.array([bool(set(rows[i]) & set(rows[j])) for i, j in zip(first, second)])
  expected = pair_losses.online_contrastive_loss(vectors[first], vectors[second], positive, margin=0.5)
  np.testing.assert_allclose(loss, expected, rtol=1e-5, atol=1e-6)


def test_adapter_loss_sharded_equals_single_device_and_reaches_only_adapters(tiny_bert_dir):
  model, config, params, axes = _setup(tiny_bert_dir, "adapter")
  sets = multilabel.multi_hot(SETS, ["a", "b", "c"])
  loss_fn = specialisation.make_loss_fn(model.config, config)
  _, grads = tiny.assert_sharded_loss_equals_single_device(
      params, axes, loss_fn,
      lambda mesh: next(specialisation.in_batch_stream(tiny.CORPUS, {"label_sets": sets}, model.tokenizer, config, 8,
                                                       mesh)))
  base_grads, adapter_grads = adapters.split(grads["encoder"])
  assert all(not np.any(g) for g in jax.tree.leaves(base_grads))
  assert any(np.any(g) for g in jax.tree.leaves(adapter_grads))


# ----------------------------------------------------------------------------------- Eq. (1) smoothing

def test_multilabel_smoothing_is_eq1():
  """y' = ls for positives, (1 - ls) M_i / |C| otherwise (M_i labels of row i); ls = 0.95."""
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(3, 4)).astype(np.float32)
  targets = np.array([[1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]], np.float32)
  ls = 0.95
  smoothed = np.where(targets == 1, ls, (1 - ls) * targets.sum(1, keepdims=True) / 4)
  assert smoothed[0, 2] == pytest.approx(0.025) and smoothed[1, 0] == 0 and smoothed[2, 0] == pytest.approx(0.0125)
  p = 1 / (1 + np.exp(-logits))
  expected = -(smoothed * np.log(p) + (1 - smoothed) * np.log(1 - p)).sum(1).mean()
  got = mlp_head.loss(logits, targets, np.ones(3, np.float32), multilabel=True, label_smoothing=1 - ls)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_multilabel_mlp_with_adamw_learns_label_sets():
  rng = np.random.default_rng(0)
  centres = rng.normal(size=(3, 16)) * 3
  targets = rng.integers(0, 2, size=(90, 3)).astype(np.float32)
  features = targets @ centres + rng.normal(size=(90, 16)) * 0.3
  config = mlp_head.MLPConfig(hidden=(32,), dropout=0.1, learning_rate=3e-3, epochs=60, batch_size=16,
                              multilabel=True, label_smoothing=0.05, optimizer="adamw", weight_decay=0.02,
                              warmup_fraction=0.1, decay="cosine")
  layers = mlp_head.train(features, targets, config)
  predicted = mlp_head.predict_proba(layers, features, multilabel=True) >= 0.3
  assert (predicted == (targets > 0)).all(1).mean() > 0.9
  with pytest.raises(ValueError, match="optimizer"):
    mlp_head.MLPConfig(optimizer="lbfgs")


# ------------------------------------------------------------------------------------------- adapters

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


# ------------------------------------------------------------------------------ thresholds and metrics

def test_scores_micro_f1_and_exact_match():
  gold = [("a", "b"), ("c",), (), ("a",)]
  predicted = [("a",), ("c",), ("b",), ("a",)]
  s = multilabel.scores(gold, predicted)
  # tp = 3 (a, c, a), fp = 1 (b), fn = 1 (b)
  assert s["precision"] == pytest.approx(0.75) and s["recall"] == pytest.approx(0.75)
  assert s["f1"] == pytest.approx(0.75) and s["exact_match"] == pytest.approx(0.5)


def test_decide_and_per_intent_thresholds():
  probs = np.array([[0.9, 0.35, 0.1], [0.2, 0.31, 0.6], [0.5, 0.1, 0.25]], np.float32)
  assert multilabel.decide(probs, 0.3, ["a", "b", "c"]) == [("a", "b"), ("b", "c"), ("a",)]
  assert multilabel.decide(probs, np.array([0.95, 0.3, 0.2]), ["a", "b", "c"]) == [("b",), ("b", "c"), ("c",)]
  targets = np.array([[1, 0, 0], [0, 0, 1], [1, 0, 1]], np.float32)
  best = multilabel.best_thresholds(probs, targets, default=0.3)
  # a: any threshold in (0.2, 0.5] separates -> nearest to 0.3 is 0.3; b never positive -> default;
  # c: positives 0.6 and 0.25, negative 0.1 -> a threshold in (0.1, 0.25], nearest to 0.3 is 0.25
  np.testing.assert_allclose(best, [0.3, 0.3, 0.25])


def test_out_of_fold_probabilities_never_see_their_own_example():
  features = np.arange(10, dtype=np.float32)[:, None]
  targets = np.zeros((10, 1), np.float32)
  seen = []

  def fit_predict(x, y, held):
    seen.append((set(x[:, 0]), set(held[:, 0])))
    return np.full((len(held), 1), len(x), np.float32)

  out = multilabel.out_of_fold_probabilities(features, targets, 5, 0, fit_predict)
  assert len(seen) == 5 and all(not (train & held) for train, held in seen)
  np.testing.assert_array_equal(out[:, 0], 8)


# ------------------------------------------------------------------------------------------ end to end

TOY = {
    "train": [("i want to transfer money", "transfer"), ("transfer money to my savings account", "transfer"),
              ("cancel my order", "cancel"), ("cancel my order and reset my pin", "cancel#pin"),
              ("how do i reset my pin", "pin"), ("reset my pin please", "pin"),
              ("transfer money and cancel my order", "transfer#cancel"), ("is there a fee for top ups", "fee"),
              ("is there a fee to transfer money", "fee#transfer"), ("my card has not arrived yet", "card"),
              ("my card has not arrived yet cancel my order", "card#cancel"), ("a fee for top ups", "fee")],
    "test": [("transfer money please", "transfer"), ("cancel my order", "cancel"),
             ("reset my pin and cancel my order", "pin#cancel"), ("is there a fee", "fee"),
             ("my card has not arrived", "card")],
}


@pytest.fixture
def toy_multilabel(tmp_path):
  return write_toy_multilabel(tmp_path / "MULTI")


def write_toy_multilabel(root):
  """``TOY`` as a joint-NLU folder (seq.in, all-O seq.out, '#'-joined labels per split) at ``root``."""
  for split, rows in TOY.items():
    (root / split).mkdir(parents=True)
    (root / split / "seq.in").write_text("".join(t + "\n" for t, _ in rows))
    (root / split / "seq.out").write_text("".join(" ".join("O" for _ in t.split()) + "\n" for t, _ in rows))
    (root / split / "label").write_text("".join(l + "\n" for _, l in rows))
  return root


def _config(data, model, mode, **overrides):
  config = multi_convfit_base.get_config("joint_nlu_folder", "", f"low,{mode}")
  config.data.raw_dir = str(data)
  config.data.tfds_dir = str(data.parent / "tfds")
  config.data.train_split, config.data.eval_split = "train", "test"
  config.model.name = str(model)
  config.model.max_length = 32
  config.train.batch_size = 8
  config.train.epochs = 2
  config.train.log_every = 1
  config.compilation_cache_dir = ""
  config.stage2.length_groups = 1
  config.stage2.fast_epochs_factor = 1
  config.classifier.mlp.epochs = 20
  config.classifier.calibration_folds = 3
  for key, value in overrides.items():
    target = config
    *parents, leaf = key.split(".")
    for p in parents:
      target = target[p]
    target[leaf] = value
  return config


@pytest.mark.parametrize("mode,overrides", [
    ("adapter", {}),
    ("fft", {"stage2.sampling": "paper", "classifier.calibrate": True}),
    ("none", {}),
])
def test_multi_convfit_end_to_end(tmp_path, tiny_bert_dir, toy_multilabel, mode, overrides):
  config = _config(toy_multilabel, tiny_bert_dir, mode, **overrides)
  results = main.run(config, tmp_path / "run")
  assert results["num_train"] == 12 and results["num_eval"] == 5 and results["num_labels"] == 5
  rows = (tmp_path / "run" / "predictions.tsv").read_text().splitlines()
  assert rows[0].startswith("text\tgold\tpredicted\texact") and len(rows) == 6
  # The reported metrics are those of the predictions file: micro P / R / F1 over (example, intent) decisions.
  pairs = [[set(filter(None, c.split("+"))) for c in r.split("\t")[1:3]] for r in rows[1:]]
  tp = sum(len(g & p) for g, p in pairs)
  n_predicted, n_gold = sum(len(p) for _, p in pairs), sum(len(g) for g, _ in pairs)
  precision, recall = (tp / n_predicted if n_predicted else 0.0), tp / n_gold
  assert results["precision"] == pytest.approx(precision) and results["recall"] == pytest.approx(recall)
  assert results["f1"] == pytest.approx(2 * tp / (n_predicted + n_gold))
  assert [r.split("\t")[3] for r in rows[1:]] == [str(g == p) for g, p in pairs]
  assert results["exact_match"] == results["accuracy"] == pytest.approx(sum(g == p for g, p in pairs) / 5)
  report = report_checks.assert_report_matches_predictions(tmp_path / "run", multilabel=True)
  assert ("specialised encoder" in report) == (mode != "none")
  export = tmp_path / "run" / "export"
  meta = json.loads((export / "multilabel_model.json").read_text())
  texts = [t for t, _ in TOY["test"]]
  if mode == "adapter":
    assert results["base_unchanged"] is True and results["adapter_bytes"] > 0
    assert (export / "adapter" / "adapter.safetensors").exists() and not (export / "model.safetensors").exists()
    base = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
    loaded = MultiLabelModel.load(export, base=base)
    assert loaded.encoder.params["embeddings"]["word_embeddings"]["embedding"] is \
        base.params["embeddings"]["word_embeddings"]["embedding"]
    assert not np.allclose(loaded.encoder.encode(texts), base.encode(texts), atol=1e-6)  # the adapter trained
  else:
    assert (export / "model.safetensors").exists() and results["adapter_bytes"] == 0
    loaded = MultiLabelModel.load(export)
  assert meta["labels"] == ["cancel", "card", "fee", "pin", "transfer"]
  if overrides.get("classifier.calibrate"):
    assert len(meta["thresholds"]) == 5
  predicted = [p.labels for p in loaded.predict(texts)]
  written = [tuple(filter(None, r.split("\t")[2].split("+"))) for r in rows[1:]]
  assert predicted == written
  # the predict CLI answers from the export (an adapter export goes on its recorded base model)
  assert predict.main(["--model", str(export), "--output", str(tmp_path / "p.jsonl"), *texts]) == 0
  assert [tuple(json.loads(l)["labels"]) for l in (tmp_path / "p.jsonl").read_text().splitlines()] == written


@pytest.mark.parametrize("field,value,message", [
    ("stage2.mode", "lora", "config.stage2.mode: 'lora' is not one of"),
    ("data.regime", "medium", "config.data.regime: 'medium' is not one of"),
    ("data.eval_split", "", "config.data.train_split / eval_split: set both"),
    ("classifier.threshold", 1.5, "config.classifier.threshold"),
])
def test_config_errors_name_the_field(tmp_path, tiny_bert_dir, toy_multilabel, field, value, message):
  config = _config(toy_multilabel, tiny_bert_dir, "fft", **{field: value})
  if field == "data.regime":
    config.data.builder, config.data.builder_config = "nlupp", "banking"
    config.data.raw_dir, config.data.train_split, config.data.eval_split = "", "", ""
  with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
    multi_convfit.validate(config)


def test_nlupp_protocol_and_mixatis_regimes():
  config = multi_convfit_base.get_config("nlupp", "banking", "low,adapter")
  config.data.fold = 3
  train, test = multi_convfit.resolve_splits(config)
  assert train == ["fold6", "fold7"] and len(test) == 18 and "fold6" not in test
  config.data.regime = "high"
  train, test = multi_convfit.resolve_splits(config)
  assert test == ["fold6", "fold7"] and len(train) == 18
  assert config.train.learning_rate == 4e-4 and config.stage2.mode == "adapter"
  mix = multi_convfit_base.get_config("mixatis", "", "high")
  assert multi_convfit.resolve_splits(mix) == (["train"], ["test"]) and mix.train.epochs == 3
  with pytest.raises(ValueError, match="unknown"):
    multi_convfit_base.get_config("mixatis", "", "huge")
