"""Packed rows (``encoders.packing``): token ids or cached prefix states, several utterances to a row, pool to
the unpacked vectors, and give the MNEG and ConvFiT Stage 2 losses' values and gradients of the padded batches."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import convfit_stage1 as stage1_config_module
from configs import intent_mneg as baseline_config
from fewshot_nlu.data import batching
from fewshot_nlu.data.intent_folder import IntentSplit
from fewshot_nlu.encoders import frozen_prefix, packing, pooling, pretrained, transformer
from fewshot_nlu.methods import baseline
from fewshot_nlu.methods.convfit import stage1
from tests import tiny
from tests.encoders.helpers import _batch


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


@pytest.fixture
def dropout_free_bert(tmp_path):
  return pretrained.load_pretrained(str(tiny.write_dropout_free_checkpoint(tmp_path, "bert")))


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
