"""MNEG (ConvFiT Eq. 1) against a plain numpy transcription of the equation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from fewshot_nlu import sharding
from fewshot_nlu.losses.ranking import mneg_loss


def numpy_eq1(c, r, scale, exclude_positive=True, valid=None, labels=None):
  """L = -sum_i S(c_i, r_i) + sum_i log sum_{j != i} exp S(c_i, r_j), averaged over valid rows."""
  b = len(c)
  valid = np.ones(b, bool) if valid is None else valid
  cn = c / np.linalg.norm(c, axis=1, keepdims=True)
  rn = r / np.linalg.norm(r, axis=1, keepdims=True)
  s = scale * cn @ rn.T
  total = 0.0
  for i in range(b):
    if not valid[i]:
      continue
    js = [j for j in range(b) if valid[j] and (j != i or not exclude_positive)
          and (labels is None or j == i or labels[j] != labels[i])]
    total += -s[i, i] + np.log(np.sum(np.exp(s[i, js])))
  return total / valid.sum()


@pytest.mark.parametrize("exclude_positive", [True, False])
def test_mneg_matches_equation(exclude_positive):
  rng = np.random.default_rng(0)
  c, r = rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
  got = mneg_loss(jnp.asarray(c), jnp.asarray(r), scale=20.0, exclude_positive=exclude_positive)
  np.testing.assert_allclose(got, numpy_eq1(c, r, 20.0, exclude_positive), rtol=1e-5, atol=1e-6)


def test_mneg_with_padding_and_labels():
  rng = np.random.default_rng(1)
  c, r = rng.normal(size=(8, 4)), rng.normal(size=(8, 4))
  valid = np.array([1, 1, 1, 1, 1, 1, 0, 0], bool)
  labels = np.array([0, 1, 0, 2, 1, 3, -1, -1])
  got = mneg_loss(jnp.asarray(c), jnp.asarray(r), jnp.asarray(valid), jnp.asarray(labels), scale=5.0)
  np.testing.assert_allclose(got, numpy_eq1(c, r, 5.0, True, valid, labels), rtol=1e-5, atol=1e-6)
  grads = jax.grad(lambda x: mneg_loss(x, jnp.asarray(r), jnp.asarray(valid), scale=5.0))(jnp.asarray(c))
  assert np.all(np.isfinite(grads)) and np.all(np.asarray(grads)[6:] == 0)


def test_mneg_sharded_equals_single_device():
  rng = np.random.default_rng(2)
  c, r = rng.normal(size=(16, 8)).astype(np.float32), rng.normal(size=(16, 8)).astype(np.float32)
  mesh = sharding.make_mesh({"data": 8})
  batch = NamedSharding(mesh, P(("data", "fsdp")))
  fn = jax.jit(jax.value_and_grad(lambda a, b: mneg_loss(a, b), argnums=(0, 1)))
  loss_1, grads_1 = fn(c, r)
  loss_8, grads_8 = fn(jax.device_put(c, batch), jax.device_put(r, batch))
  # The 8-way computation really ran: the loss is replicated on all 8 devices and each gradient stays split by
  # rows like its input, not gathered onto one device.
  assert loss_8.sharding.is_fully_replicated and len(loss_8.sharding.device_set) == 8
  assert all(g8.sharding.is_equivalent_to(batch, g8.ndim) for g8 in grads_8)
  np.testing.assert_allclose(loss_8, loss_1, rtol=1e-6, atol=1e-6)
  for g8, g1 in zip(grads_8, grads_1):
    np.testing.assert_allclose(g8, g1, rtol=1e-5, atol=1e-6)


def test_cached_mneg_equals_plain(tiny_bert_dir):
  """Gradient caching over 4 chunks == value_and_grad of Eq. (1) over the whole batch (dropout on)."""
  from fewshot_nlu.data import batching
  from fewshot_nlu.encoders import pooling, pretrained, transformer
  from fewshot_nlu.losses.ranking import cached_mneg_loss_and_grads
  from tests import tiny
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  module = transformer.TransformerEncoder(model.config)

  def embed(params, chunk, key):
    hidden = module.apply({"params": params}, chunk["ids"], chunk["mask"], deterministic=False,
                          rngs={"dropout": key})
    return pooling.mean_pool(hidden, chunk["mask"])

  def side(texts):
    b = batching.pad_token_ids(model.tokenizer.encode(texts, 16), 16, model.tokenizer.pad_id)
    return {"ids": b["input_ids"], "mask": b["attention_mask"]}
  contexts, responses = side(tiny.CORPUS[:8]), side(tiny.CORPUS[4:12])
  rng, n = jax.random.key(3), 4

  def plain(params):
    keys = [jax.random.fold_in(rng, i) for i in range(2 * n)]
    chunk = lambda d, i: {k: v[i * 2 : (i + 1) * 2] for k, v in d.items()}
    c = jnp.concatenate([embed(params, chunk(contexts, i), keys[i]) for i in range(n)])
    r = jnp.concatenate([embed(params, chunk(responses, i), keys[n + i]) for i in range(n)])
    return mneg_loss(c, r)

  loss, grads = jax.value_and_grad(plain)(model.params)
  cached_loss, cached_grads = jax.jit(lambda p: cached_mneg_loss_and_grads(
      embed, p, contexts, responses, rng, num_chunks=n))(model.params)
  np.testing.assert_allclose(cached_loss, loss, rtol=1e-6, atol=1e-6)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-5), cached_grads, grads)
