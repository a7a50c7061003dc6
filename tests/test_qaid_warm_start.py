"""QAID's warm start and throughput options: the warm projection keeps the encoder's token similarities (the
identity exactly; below full width, the uncentred principal directions, against numpy's eigenvectors and beating
random projections); a frozen prefix run (not cached) equals the whole encoder and gets no gradient; a QAID run
with a frozen prefix leaves it bit-identical and records its development curve from step 0."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import qaid_banking77
from fewshot_nlu import main
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.data import splits
from fewshot_nlu.encoders import frozen_prefix, pretrained, transformer
from fewshot_nlu.methods.qaid import late_interaction, warm_start
from fewshot_nlu.methods.qaid import train as qaid
from fewshot_nlu.methods.qaid.model import QAIDModel
from fewshot_nlu.train import selection
from tests import tiny
from tests.test_dse import _toy_data
from tests.test_qaid import _overrides


def _tokens(n=300, hidden=12, seed=0):
  rng = np.random.default_rng(seed)
  # anisotropic, as real token vectors are: a few strong directions
  return rng.normal(0, 1, (n, hidden)) * np.linspace(3.0, 0.2, hidden) + rng.normal(0, 0.5, hidden)


def test_full_width_warm_projection_is_the_identity_and_keeps_every_token_similarity():
  tokens = _tokens()
  for width in (12, 20):  # at and above the encoder's width (zero-padded)
    projection = warm_start.fit(tokens, width)
    z = tokens @ projection["kernel"] + projection["bias"]
    np.testing.assert_allclose(z @ z.T, tokens @ tokens.T, rtol=1e-6, atol=1e-5)
    assert warm_start.retained_fraction(tokens, projection) == pytest.approx(1.0)


def test_narrow_warm_projection_is_the_top_eigenvectors_of_the_normalised_tokens():
  tokens = _tokens()
  projection = warm_start.fit(tokens, 4)
  kernel = projection["kernel"].astype(np.float64)
  np.testing.assert_allclose(kernel.T @ kernel, np.eye(4), atol=1e-5)  # orthonormal columns
  directions = tokens / np.linalg.norm(tokens, axis=1, keepdims=True)
  values, vectors = np.linalg.eigh(directions.T @ directions)
  top = vectors[:, np.argsort(values)[::-1][:4]]
  np.testing.assert_allclose(kernel @ kernel.T, top @ top.T, atol=1e-5)  # the same subspace
  assert warm_start.retained_fraction(tokens, projection) == pytest.approx(np.sort(values)[::-1][:4].sum()
                                                                          / values.sum(), rel=1e-5)
  rng = np.random.default_rng(1)
  for _ in range(20):  # no other orthonormal 4-d projection keeps more
    q, _ = np.linalg.qr(rng.normal(size=(12, 4)))
    assert warm_start.retained_fraction(tokens, {"kernel": q}) < warm_start.retained_fraction(tokens, projection)
  with pytest.raises(ValueError, match="cannot span"):
    warm_start.fit(tokens[:3], 4)


@pytest.mark.parametrize("layers", [0, 1])
def test_prefix_run_not_cached_equals_the_whole_encoder_and_stops_its_gradient(layers, tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  ids = model.tokenizer.encode(tiny.CORPUS[:5], 16)
  from fewshot_nlu.data import batching
  batch = batching.pad_token_ids(ids, 16, model.tokenizer.pad_id)
  ids, mask = jnp.asarray(batch["input_ids"]), jnp.asarray(batch["attention_mask"])
  whole = transformer.encoder_for(model.config, model.params).apply({"params": model.params}, ids, mask)
  got = frozen_prefix.encode_through_prefix(model.config, model.params, ids, mask, layers)
  np.testing.assert_allclose(got, whole, rtol=1e-5, atol=1e-5)

  def total(params):
    return jnp.sum(frozen_prefix.encode_through_prefix(model.config, params, ids, mask, layers,
                                                       deterministic=False, rng=jax.random.key(0)) ** 2)

  grads = jax.grad(total)(model.params)
  frozen, trainable = frozen_prefix.split(grads, model.config, layers)
  assert all(not np.any(np.asarray(g)) for g in jax.tree.leaves(frozen))
  assert any(np.any(np.asarray(g)) for g in jax.tree.leaves(trainable))
  assert frozen_prefix.frozen_param_patterns(model.config, layers) == (
      "encoder/embeddings/.*", *[f"encoder/layer_{i}/.*" for i in range(layers)])
  assert frozen_prefix.frozen_param_patterns(model.config, -1) == ()


def test_warm_step_zero_scores_are_the_encoders_own_late_interaction(tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  config = qaid_banking77.get_config()
  config.qaid.projection_dim = 0
  params, _, notes = qaid.init_params(model, config, num_intents=3, texts=tiny.CORPUS[:6])
  assert notes["projection"].startswith("warm: the identity")
  qaid_model = QAIDModel(model.config, params["encoder"], model.tokenizer, params["projection"], batch_size=4)
  qaid_model.add_answers(["a", "b"], tiny.CORPUS[6:8])
  scores = qaid_model.scores(tiny.CORPUS[:3])
  ids = model.tokenizer.encode(tiny.CORPUS[:3] + tiny.CORPUS[6:8], 32)
  hidden = [np.asarray(transformer.encoder_for(model.config, model.params).apply(
      {"params": model.params}, jnp.asarray([t]), jnp.ones((1, len(t)), jnp.int32)))[0] for t in ids]
  unit = [h / np.linalg.norm(h, axis=1, keepdims=True) for h in hidden]
  want = np.array([[np.mean(np.max(unit[q] @ unit[3 + a].T, axis=1)) for a in range(2)] for q in range(3)])
  np.testing.assert_allclose(scores, want, rtol=1e-4, atol=1e-5)
  config.qaid.projection_dim = 8  # narrower than the tiny encoder: principal directions of the texts' tokens
  _, _, notes = qaid.init_params(model, config, num_intents=3, texts=tiny.CORPUS)
  assert notes["projection"].startswith("warm: the top 8 principal directions")


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
