"""Frozen-prefix caching and packed rows: the cached prefix + the top layers equal the whole encoder; the cache
computes each distinct sequence once and pads like token ids; packed rows (ids or cached states) pool to the
unpacked vectors and give the MNEG losses' values and gradients; ConvFiT with a frozen prefix leaves it
bit-identical and trains the rest; the baseline runs packed; the default job is ConvFiT with a frozen prefix."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import convfit_stage1 as stage1_config_module
from configs import intent_mneg as baseline_config
from fewshot_nlu import main
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.data import batching
from fewshot_nlu.data.intent_folder import IntentSplit
from fewshot_nlu.encoders import frozen_prefix, packing, pooling, pretrained, transformer
from fewshot_nlu.methods import baseline
from fewshot_nlu.methods.convfit import stage1
from tests import tiny
from tests.test_api import _flat
from tests.test_convfit import _stage2_config, toy_intents  # noqa: F401  (fixture)
from tests.test_main import _toy_config, _toy_dataset


def _batch(model, texts, length=16):
  ids = model.tokenizer.encode(texts, length)
  return batching.pad_token_ids(ids, length, model.tokenizer.pad_id), ids


@pytest.mark.parametrize("kind", ["bert", "roberta"])
@pytest.mark.parametrize("layers", [0, 1])
def test_cached_prefix_then_top_layers_equals_the_whole_encoder(kind, layers, tiny_bert_dir, tiny_roberta_dir):
  model = pretrained.load_pretrained(str(tiny_roberta_dir if kind == "roberta" else tiny_bert_dir))
  batch, _ = _batch(model, tiny.CORPUS[:5])
  ids, mask = jnp.asarray(batch["input_ids"]), jnp.asarray(batch["attention_mask"])
  whole = transformer.encoder_for(model.config, model.params).apply({"params": model.params}, ids, mask)
  frozen, top = frozen_prefix.split(model.params, model.config, layers)
  states = frozen_prefix.prefix_states(model.config, frozen, ids, mask)
  cached = frozen_prefix.encode_tokens(model.config, top, states, mask)
  np.testing.assert_allclose(np.asarray(cached), np.asarray(whole), rtol=1e-5, atol=1e-5)
  # the ids path of encode_tokens is the whole encoder itself
  np.testing.assert_array_equal(np.asarray(frozen_prefix.encode_tokens(model.config, model.params, ids, mask)),
                                np.asarray(whole))
  assert frozen_prefix.merge(frozen, top).keys() == model.params.keys()
  assert frozen_prefix.first_layer(top) == layers


def test_split_refuses_a_prefix_without_a_layer_left_to_train(tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  for layers in (-1, tiny.LAYERS):
    with pytest.raises(ValueError, match="at least one of the encoder's 2 layers"):
      frozen_prefix.split(model.params, model.config, layers)


def test_cache_computes_each_distinct_sequence_once_and_pads_like_token_ids(tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  frozen, _ = frozen_prefix.split(model.params, model.config, 1)
  cache = frozen_prefix.PrefixCache(model.config, frozen, pad_id=model.tokenizer.pad_id, max_length=16,
                                    batch_size=4)
  texts = [tiny.CORPUS[0], tiny.CORPUS[10], tiny.CORPUS[0], tiny.CORPUS[3]]
  batch, ids = _batch(model, texts)
  rows = cache.states(ids)
  assert len(cache) == 3 and rows[0] is rows[2]
  assert [r.shape for r in rows] == [(len(i), tiny.HIDDEN) for i in ids]
  reference = frozen_prefix.prefix_states(model.config, frozen, jnp.asarray(batch["input_ids"]),
                                          jnp.asarray(batch["attention_mask"]))
  for row, ref, n in zip(rows, np.asarray(reference), map(len, ids)):
    np.testing.assert_allclose(row, ref[:n], rtol=1e-5, atol=1e-5)  # padding does not change real tokens
  padded = batching.pad_token_ids(rows, 16, model.tokenizer.pad_id, batch_size=5)
  assert padded["input_ids"].shape == (5, 16, tiny.HIDDEN) and padded["input_ids"].dtype == np.float32
  np.testing.assert_array_equal(padded["attention_mask"], batch["attention_mask"].tolist() + [[0] * 16])
  assert not padded["input_ids"][4].any() and not padded["input_ids"][1, len(ids[1]):].any()
  cache.states([ids[1]])
  assert len(cache) == 3  # nothing recomputed


def test_pack_rows_places_every_sequence_once_first_fit_decreasing():
  sequences = [[1] * 5, [2] * 9, [3] * 3, [4] * 6, [5] * 2]
  packed = batching.pack_rows(sequences, 10, row_multiple=4)
  assert packed["ids"].shape == packed["owner"].shape == packed["offsets"].shape == (4, 10)
  # decreasing: 9 -> row 0; 6 -> row 1; 5 -> row 2; 3 -> row 1 (first with room); 2 -> row 2
  assert packed["owner"][:3].tolist() == [[1] * 9 + [-1], [3] * 6 + [2] * 3 + [-1], [0] * 5 + [4] * 2 + [-1] * 3]
  assert (packed["owner"][3] == -1).all()
  for i, seq in enumerate(sequences):
    assert packed["ids"][packed["owner"] == i].tolist() == seq
    assert packed["offsets"][packed["owner"] == i].tolist() == list(range(len(seq)))
  with pytest.raises(ValueError, match="longer than the packed row length 4"):
    batching.pack_rows(sequences, 4, row_multiple=1)


@pytest.mark.parametrize("kind", ["bert", "roberta"])
@pytest.mark.parametrize("cached", [False, True])
def test_packed_rows_give_each_utterance_its_own_vector(kind, cached, tiny_bert_dir, tiny_roberta_dir):
  """Token ids (positions restart per utterance) or cached prefix states, packed several to a row, pool to the
  vectors of the utterances encoded one padded row each."""
  model = pretrained.load_pretrained(str(tiny_roberta_dir if kind == "roberta" else tiny_bert_dir))
  frozen, top = frozen_prefix.split(model.params, model.config, 1)
  cache = frozen_prefix.PrefixCache(model.config, frozen, pad_id=model.tokenizer.pad_id, max_length=16)
  batch, ids = _batch(model, tiny.CORPUS[:7])
  padded = {"text_ids": jnp.asarray(batch["input_ids"]), "text_mask": jnp.asarray(batch["attention_mask"])}
  expected = packing.encode_side(model.config, model.params, padded, "text", num_items=7)
  np.testing.assert_allclose(np.asarray(expected), np.asarray(pooling.mean_pool(
      transformer.encoder_for(model.config, model.params).apply({"params": model.params}, padded["text_ids"],
                                                                padded["text_mask"]), padded["text_mask"])))
  rows = cache.states(ids) if cached else ids
  side = batching.batch_side("text", rows, (16,), model.tokenizer.pad_id, 7, pack_length=48, row_multiple=2)
  assert side["text_ids"].shape[0] < len(ids)  # several utterances share a row
  vectors = packing.encode_side(model.config, top if cached else model.params, side, "text", num_items=7)
  np.testing.assert_allclose(np.asarray(vectors), np.asarray(expected), rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError, match="packed rows are mean-pooled"):
    packing.encode_side(model.config, model.params, side, "text", num_items=7, pool="cls")


@pytest.mark.parametrize("sampling,packing", [("fast", False), ("fast", True), ("paper", True)])
def test_convfit_with_a_frozen_prefix_keeps_it_bit_identical(tmp_path, tiny_bert_dir, toy_intents,  # noqa: F811
                                                             sampling, packing):
  config = _stage2_config(toy_intents, tiny_bert_dir, train__frozen_prefix_layers=1, stage2__sampling=sampling,
                          stage2__negatives=1, train__packing=packing)
  results = main.run(config, tmp_path / "run")
  assert results["steps"] > 0
  before = pretrained.load_pretrained(str(tiny_bert_dir)).params
  after = pretrained.load_pretrained(str(tmp_path / "run" / "export")).params
  same = jax.tree.map(lambda a, b: np.array_equal(np.asarray(a), np.asarray(b)), before, after)
  assert all(jax.tree.leaves({k: same[k] for k in ("embeddings", "layer_0")}))
  assert not all(jax.tree.leaves(same["layer_1"]))  # the layer above the prefix trained


def test_frozen_prefix_config_errors_name_the_field(tmp_path, tiny_bert_dir, toy_intents):  # noqa: F811
  with pytest.raises(ConfigError, match="config.train.frozen_prefix_layers: -2"):
    main.run(_stage2_config(toy_intents, tiny_bert_dir, train__frozen_prefix_layers=-2), tmp_path / "w")
  with pytest.raises(ConfigError, match="config.train.packing: packed rows are mean-pooled"):
    main.run(_stage2_config(toy_intents, tiny_bert_dir, train__packing=True, model__pooling="cls"), tmp_path / "w")


@pytest.fixture
def dropout_free_bert(tmp_path):
  (tmp_path / "tiny").mkdir()
  directory = tiny.write_checkpoint(tmp_path / "tiny", "bert")
  hf = json.loads((directory / "config.json").read_text())
  hf.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  (directory / "config.json").write_text(json.dumps(hf))
  return pretrained.load_pretrained(str(directory))


def test_mneg_losses_on_packed_batches_equal_the_padded_ones(dropout_free_bert):
  """The in-batch ranking losses of the baseline and ConvFiT Stage 1 give the same loss and gradients on packed
  batches as on padded ones (dropout off, so both layouts see the same network)."""
  model = dropout_free_bert
  split = IntentSplit(tiny.CORPUS, [f"l{i % 4}" for i in range(12)], "toy")
  config = baseline_config.get_config()
  labels = {f"l{i}": i for i in range(4)}
  stage1_config = stage1_config_module.get_config()
  stage1_config.loss.exclude_positive = False
  stage1_loss = stage1.make_loss(model.config, stage1_config)[0]
  contexts = model.tokenizer.encode(tiny.CORPUS[:6], 32)
  responses = model.tokenizer.encode(tiny.CORPUS[6:], 32)
  cases = [(baseline.make_loss_fn(model.config, config),
            lambda pack: baseline.make_batcher(split, labels, model.tokenizer, 32, 0, pack, 4)(np.arange(8), 0, 8)),
           (stage1_loss,
            lambda pack: batching.pair_batcher(contexts, responses, (16, 32), model.tokenizer.pad_id, pack, 4)(
                np.arange(6), 0, 8))]
  for loss_fn, make in cases:
    padded, packed = make(0), make(32)
    assert "anchor_owner" in packed or "context_owner" in packed
    values = [jax.value_and_grad(lambda p, b: loss_fn(p, b, jax.random.key(0))[0])(model.params, b)
              for b in (padded, packed)]
    np.testing.assert_allclose(values[1][0], values[0][0], rtol=1e-5, atol=1e-6)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5), values[1][1], values[0][1])


def test_baseline_trains_with_packed_batches(tmp_path, tiny_bert_dir):
  corpus = tiny.CORPUS
  data = _toy_dataset(tmp_path / "data", {"bank": corpus[:3], "music": corpus[3:6], "misc": corpus[6:11]},
                      {"bank": corpus[4:5], "music": corpus[11:12]})
  config = _toy_config(data, tiny_bert_dir)
  config.train.packing = True
  results = main.run(config, tmp_path / "run")
  assert results["steps"] == 2 and results["num_eval"] == 2


def test_one_convfit_default_everywhere():
  """configs/default.py (the README's first command) is ConvFiT's shipped BANKING77 10-shot config, and
  ``fit(..., method="convfit")`` trains the same model on 10-shot examples: every training, Stage 2 and model
  field equal (the two differ only in where the data comes from and in the development split ``fit`` has not)."""
  from configs import convfit_banking77, default
  from fewshot_nlu import api
  from fewshot_nlu.data.user_examples import Examples
  ours, shipped = _flat(default.get_config().to_dict()), _flat(convfit_banking77.get_config("10").to_dict())
  assert ours == shipped and ours["train.frozen_prefix_layers"] == -1 and ours["method"] == "convfit"
  texts = [f"utterance {i}" for i in range(30)]
  fitted = _flat(api.default_config("convfit", Examples(tuple(texts), tuple(f"intent{i % 3}" for i in range(30)),
                                                        False, "test")).to_dict())
  training = ("train.", "stage2.", "model.", "classifier.kind", "classifier.candidates", "classifier.space",
              "classifier.linear")
  differ = {k for k in ours.keys() | fitted.keys() if k.startswith(training) and ours.get(k) != fitted.get(k)}
  assert not differ, differ


def test_a_frozen_prefix_as_deep_as_the_encoder_is_a_config_error(tmp_path, tiny_bert_dir, toy_intents):  # noqa: F811
  """The default job's 2 frozen layers on a 2-layer encoder (``--config.model.name=...``): one line naming the
  field and the encoder's depth, before any training."""
  config = _stage2_config(toy_intents, tiny_bert_dir, train__frozen_prefix_layers=tiny.LAYERS)
  with pytest.raises(ConfigError, match=r"config.train.frozen_prefix_layers: a frozen prefix of 2 layers must leave"):
    main.run(config, tmp_path / "w")
  assert not (tmp_path / "w" / "checkpoints").exists()


@pytest.mark.parametrize("loss", ["ocl", "cos"])
def test_convfit_stage2_loss_on_packed_batches_equals_the_padded_one(dropout_free_bert, loss):
  """ConvFiT's all-pairs loss (the shipped default packs rows) gives the same loss and gradients on packed rows
  as on length-grouped padded ones: same sampled batch, dropout off."""
  from configs import convfit_base
  from fewshot_nlu import sharding
  from fewshot_nlu.methods.convfit import stage2
  from fewshot_nlu.train import specialisation
  model = dropout_free_bert
  split = IntentSplit(tiny.CORPUS, [f"l{i % 4}" for i in range(12)], "toy")
  values = []
  for packing in (False, True):
    config = convfit_base.get_config("intent_folder")
    config.stage2.loss, config.train.packing = loss, packing
    config.train.batch_size, config.stage2.examples_per_class, config.model.max_length = 8, 2, 32
    params, _ = specialisation.stage2_params(model.params, model.config, config)
    batch = next(stage2.fast_stream(split, {f"l{i}": i for i in range(4)}, model.tokenizer, config, 8,
                                    sharding.make_mesh({"data": 1})))
    loss_fn = specialisation.make_loss_fn(model.config, config)
    values.append(jax.value_and_grad(lambda p: loss_fn(p, batch, jax.random.key(0))[0])(params))
  np.testing.assert_allclose(values[1][0], values[0][0], rtol=1e-5, atol=1e-6)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5), values[1][1], values[0][1])
