"""The MLM head (``heads.mlm``): transform + tied decoder against numpy, its loss the mean cross-entropy over the
masked tokens, and its round trip through BERT / RoBERTa checkpoint names."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot_nlu.data import masking
from fewshot_nlu.encoders import transformer
from fewshot_nlu.heads import mlm as mlm_head

MASK, CLS, SEP, PAD, VOCAB = 4, 2, 3, 0, 50


def _cfg(vocab=VOCAB, hidden=8, model_type="bert"):
  return transformer.EncoderConfig(vocab_size=vocab, hidden_size=hidden, num_layers=1, num_heads=2,
                                   intermediate_size=16, position_style="roberta" if model_type == "roberta"
                                   else "bert", model_type=model_type, pad_token_id=1 if model_type == "roberta"
                                   else 0, layer_norm_eps=1e-5)


def test_mlm_head_is_transform_plus_tied_decoder_and_its_loss_is_mean_ce_over_masked_tokens():
  cfg = _cfg()
  rng = np.random.default_rng(1)
  head = jax.tree.map(lambda x: np.asarray(x) + rng.normal(0, 0.1, np.shape(x)), mlm_head.init(jax.random.key(0), cfg))
  embeddings = rng.normal(0, 1, (VOCAB, 8))
  hidden = rng.normal(0, 1, (3, 6, 8))
  x = hidden @ head["dense"]["kernel"] + head["dense"]["bias"]
  x = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
  x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
  x = x * head["norm"]["scale"] + head["norm"]["bias"]
  expected = x @ embeddings.T + head["output_bias"]
  np.testing.assert_allclose(mlm_head.logits(head, jnp.asarray(hidden), jnp.asarray(embeddings), cfg), expected,
                             rtol=1e-4, atol=1e-4)
  masked = masking.Masked(None, jnp.array([[1, 4], [0, 5], [2, 3]]), jnp.array([[7, 9], [11, 13], [5, 6]]),
                          jnp.array([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]]))
  log_probs = expected - np.log(np.exp(expected).sum(-1, keepdims=True))
  want = -np.mean([log_probs[0, 1, 7], log_probs[0, 4, 9], log_probs[1, 0, 11]])
  got = mlm_head.mlm_loss(head, jnp.asarray(hidden), masked, jnp.asarray(embeddings), cfg)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("model_type", ["bert", "roberta"])
def test_mlm_head_round_trips_through_checkpoint_names(model_type):
  cfg = _cfg(model_type=model_type)
  head = jax.device_get(mlm_head.init(jax.random.key(3), cfg))
  tensors = mlm_head.to_checkpoint(head, cfg, np.ones((VOCAB, 8)))
  prefix = "lm_head." if model_type == "roberta" else "cls.predictions."
  assert all(k.startswith(prefix) for k in tensors) and f"{prefix}decoder.weight" in tensors
  loaded, found = mlm_head.from_checkpoint(tensors, cfg, jax.random.key(9))
  assert found
  jax.tree.map(np.testing.assert_array_equal, loaded, head)
  fresh, found = mlm_head.from_checkpoint({"pooler.dense.bias": np.zeros(8)}, cfg, jax.random.key(9))
  assert not found and float(np.std(fresh["dense"]["kernel"])) == pytest.approx(0.02, rel=0.3)
