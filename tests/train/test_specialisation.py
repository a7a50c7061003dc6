"""Contrastive pair specialisation (``train.specialisation``, ConvFiT Stage 2 and Multi-ConvFiT): the fast loss
is the pair loss over all in-batch pairs (single- and multi-label) and its sharded form equals one device; the
paper's stream; adapter-only gradients."""

import jax
import numpy as np
import pytest

from configs import convfit_base, multi_convfit_base
from fewshot_nlu import sharding
from fewshot_nlu.data import samplers
from fewshot_nlu.encoders import adapters, pretrained
from fewshot_nlu.losses import pairs as pair_losses
from fewshot_nlu.methods.convfit import stage2 as convfit
from fewshot_nlu.methods.multi_convfit import labels as multilabel
from fewshot_nlu.train import optimizer, specialisation
from tests import tiny


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


@pytest.mark.parametrize("base", ["convfit", "multi_convfit"])
def test_smax_pair_classifier_trains_at_its_own_rate(tiny_bert_dir, base):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  config = (convfit_base.get_config("intent_folder") if base == "convfit"
            else multi_convfit_base.get_config("joint_nlu_folder", "", "low,fft"))
  assert specialisation.with_pair_classifier_rate(config) is config  # OCL: nothing added
  config.stage2.loss, config.stage2.smax_classifier_learning_rate = "smax", 3e-3
  run_config = specialisation.with_pair_classifier_rate(config)
  assert run_config.train.group_learning_rates == (("pair_classifier/.*", 3e-3),)
  assert config.train.group_learning_rates == ()  # the caller's config is left as it was
  params, _ = specialisation.stage2_params(model.params, model.config, run_config)
  labels = optimizer.group_labels(params, [g for g, _ in run_config.train.group_learning_rates])
  assert set(jax.tree.leaves(labels["pair_classifier"])) == {"group_0"}
  assert set(jax.tree.leaves(labels["encoder"])) == {"default"}
  # one AdamW step: the pair classifier moves ~lr (Adam's first step is lr x sign), 150x the encoder's 2e-5
  tx, _ = optimizer.make_optimizer(params, learning_rate=run_config.train.learning_rate, total_steps=10,
                                   warmup_fraction=0.0, decay="constant", weight_decay=0.0,
                                   group_learning_rates=run_config.train.group_learning_rates)
  grads = jax.tree.map(np.ones_like, params)
  updates, _ = tx.update(grads, tx.init(params), params)
  np.testing.assert_allclose(np.abs(updates["pair_classifier"]["kernel"]).max(), 3e-3, rtol=1e-3)
  assert np.abs(jax.tree.leaves(updates["encoder"])[0]).max() == pytest.approx(run_config.train.learning_rate, rel=1e-3)
  config.stage2.smax_classifier_learning_rate = 0.0
  with pytest.raises(ValueError, match="smax_classifier_learning_rate"):
    specialisation.validate_loss(config)


def test_paper_stream_pads_each_side_to_its_own_bucket(tiny_bert_dir):
  model, config, *_ , split = _stage2_setup(tiny_bert_dir)
  config.stage2.sampling, config.stage2.negatives = "paper", 1
  pairs = samplers.convfit_pairs(split.labels, config.stage2.negatives, seed=config.seed)
  stream = specialisation.paper_stream(split.texts, pairs, model.tokenizer, config, 8, sharding.make_mesh({"data": 1}))
  # 4 labels x 3 examples: 4 * C(3, 2) = 12 positives, each with 2n = 2 negatives
  assert stream.num_items == 12 * 3
  batch = next(stream)
  assert batch["first_ids"].shape[0] == 8 and batch["positive"].dtype == bool


SETS = [("a",), ("a", "b"), ("b",), ("c",), (), ("b", "c"), ("a",), ("c",), ("b",), ("a", "c"), ("b",), ("c",)]


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
