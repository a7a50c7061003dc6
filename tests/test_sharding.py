"""Mesh construction, partition rules, and the sharded train step == the single-device step."""

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from configs import intent_mneg as baseline_config
from fewshot_nlu import sharding
from fewshot_nlu.encoders import pretrained, transformer
from fewshot_nlu.methods import baseline as intent_mneg
from fewshot_nlu.train.setup import build_training
from fewshot_nlu.train.step import loss_and_grads, step_rng
from tests import tiny


def test_make_mesh_sizes_and_errors():
  assert dict(sharding.make_mesh({"data": -1}).shape) == {"data": 8, "fsdp": 1, "model": 1}
  assert dict(sharding.make_mesh({"data": 2, "fsdp": -1, "model": 2}).shape) == {"data": 2, "fsdp": 2, "model": 2}
  with pytest.raises(ValueError, match="needs 16 devices"):
    sharding.make_mesh({"data": 4, "fsdp": 4})
  with pytest.raises(ValueError, match="not divisible"):
    sharding.make_mesh({"data": -1, "fsdp": 3})
  assert sharding.make_mesh({"data": 1}).devices.size == 1
  with pytest.raises(ValueError, match="unknown"):
    sharding.make_mesh({"batch": 8})


def test_param_rules():
  cfg = transformer.EncoderConfig.from_hf(tiny.hf_config("bert", 50))
  params = transformer.init_params(cfg, jax.random.key(0))
  axes = transformer.logical_axes(cfg)
  mesh = sharding.make_mesh({"data": 2, "fsdp": 2, "model": 2})
  specs = sharding.param_specs(params, axes, mesh, rules=(("embeddings/.*", "replicate"), (".*", "logical")))
  assert specs["layer_0"]["intermediate"]["kernel"] == P("fsdp", "model")
  assert specs["layer_0"]["attention"]["output"]["kernel"] == P("model", "fsdp")
  assert specs["layer_0"]["output_norm"]["scale"] == P("fsdp")
  assert specs["embeddings"]["word_embeddings"]["embedding"] == P()
  # vocab 50 is not divisible by model=2? it is; 51 is not: falls back to replication of that dimension
  odd = transformer.EncoderConfig.from_hf(tiny.hf_config("bert", 51))
  odd_specs = sharding.param_specs(transformer.init_params(odd, jax.random.key(0)), transformer.logical_axes(odd),
                                   mesh)
  assert odd_specs["embeddings"]["word_embeddings"]["embedding"] == P(None, "fsdp")
  with pytest.raises(ValueError, match="strategy"):
    sharding.param_specs(params, axes, mesh, rules=((".*", "shard-it"),))


def _tiny_training(directory, mesh_shape):
  model = pretrained.load_pretrained(str(directory))
  config = baseline_config.get_config()
  config.train.batch_size = 16
  mesh = sharding.make_mesh(mesh_shape, jax.devices()[: int(np.prod(list(mesh_shape.values())))])
  loss_fn = intent_mneg.make_loss_fn(model.config, config)
  training = build_training(model.params, transformer.logical_axes(model.config), loss_fn, 10, mesh, config)
  split = intent_mneg.IntentSplit(tiny.CORPUS + tiny.CORPUS[:4], [f"l{i % 5}" for i in range(16)], None)
  make_batch = intent_mneg.make_batcher(split, {f"l{i}": i for i in range(5)}, model.tokenizer, 32, seed=0)
  host_batch = make_batch(np.arange(14), 0, 16)  # 14 real rows + 2 padding rows
  return model, config, mesh, loss_fn, training, host_batch


@pytest.mark.parametrize("mesh_shape", [pytest.param({"data": 8}, marks=pytest.mark.slow),  # every axis: below
                                        {"data": 2, "fsdp": 2, "model": 2}])
def test_sharded_step_equals_single_device(tiny_bert_dir, mesh_shape):
  one = _tiny_training(tiny_bert_dir, {"data": 1})
  many = _tiny_training(tiny_bert_dir, mesh_shape)
  results = []
  for model, config, mesh, loss_fn, training, host_batch in (one, many):
    batch = sharding.global_batch(host_batch, mesh)
    state = training.init_state()
    params = state.params
    grad_fn = jax.jit(lambda p, b: loss_and_grads(loss_fn, p, b, step_rng(config.seed, 0)),
                      in_shardings=(training.shardings.params, sharding.batch_sharding(mesh)))
    loss, _, grads = grad_fn(params, batch)
    new_state, metrics = training.step(state, batch)
    results.append((float(loss), jax.device_get(grads), float(metrics["loss"]),
                    jax.device_get(new_state.params)))
  (loss1, grads1, mloss1, params1), (loss8, grads8, mloss8, params8) = results
  np.testing.assert_allclose(loss8, loss1, atol=1e-5)
  np.testing.assert_allclose(mloss8, mloss1, atol=1e-5)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), grads8, grads1)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), params8, params1)
