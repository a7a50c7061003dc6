"""BERT's masked-language-modelling head, for QAID's auxiliary MLM loss (§2.2.1, §3.2).

    logits = LayerNorm(act(h W_t + b_t)) E^T + b        (BertLMPredictionHead / RobertaLMHead)

with the decoder tied to the encoder's word embeddings E (so only the transform and the output bias are
head parameters). ``from_checkpoint`` takes the head from a checkpoint's ``cls.predictions.*`` (BERT) or
``lm_head.*`` (RoBERTa) tensors; a checkpoint without them (the shipped all-MiniLM-L6-v2 has none: it is a
sentence-transformers export) gets a fresh head, initialised as BERT's (normal(0.02) kernel, unit LayerNorm,
zero biases), and the caller is told so. ``to_checkpoint`` writes the head back under the same names, so an
export keeps it for the next stage.

The loss is the mean cross-entropy over the masked tokens (§2.2.1: "the average cross-entropy loss over all
masked tokens").
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from fewshot_nlu.encoders import transformer

_NAMES = {  # our leaf -> (BERT name, RoBERTa name); dense weights are [out, in] (torch) in checkpoints
    ("dense", "kernel"): ("cls.predictions.transform.dense.weight", "lm_head.dense.weight"),
    ("dense", "bias"): ("cls.predictions.transform.dense.bias", "lm_head.dense.bias"),
    ("norm", "scale"): ("cls.predictions.transform.LayerNorm.weight", "lm_head.layer_norm.weight"),
    ("norm", "bias"): ("cls.predictions.transform.LayerNorm.bias", "lm_head.layer_norm.bias"),
    ("output_bias",): ("cls.predictions.bias", "lm_head.bias"),
}


def _family(cfg: transformer.EncoderConfig) -> int:
  return 1 if cfg.position_style == "roberta" else 0


def init(rng: jax.Array, cfg: transformer.EncoderConfig) -> dict:
  h = cfg.hidden_size
  return {"dense": {"kernel": 0.02 * jax.random.normal(rng, (h, h), jnp.float32), "bias": jnp.zeros((h,))},
          "norm": {"scale": jnp.ones((h,)), "bias": jnp.zeros((h,))},
          "output_bias": jnp.zeros((cfg.vocab_size,))}


def logical_axes() -> dict:
  return {"dense": {"kernel": P("embed", None), "bias": P(None)}, "norm": {"scale": P(None), "bias": P(None)},
          "output_bias": P("vocab")}


def from_checkpoint(heads: dict[str, np.ndarray], cfg: transformer.EncoderConfig, rng: jax.Array
                    ) -> tuple[dict, bool]:
  """(head params, whether they came from the checkpoint) — a fresh head when ``heads`` lacks any tensor."""
  names = {leaf: pair[_family(cfg)] for leaf, pair in _NAMES.items()}
  if not all(name in heads for name in names.values()):
    return init(rng, cfg), False
  params: dict = {"dense": {}, "norm": {}}
  for leaf, name in names.items():
    value = np.asarray(heads[name], np.float32)
    value = value.T if leaf == ("dense", "kernel") else value
    if len(leaf) == 1:
      params[leaf[0]] = value
    else:
      params[leaf[0]][leaf[1]] = value
  return params, True


def to_checkpoint(params: dict, cfg: transformer.EncoderConfig, word_embeddings) -> dict[str, np.ndarray]:
  """The head as checkpoint tensors (the tied decoder weight included, as HF writes it)."""
  out = {}
  for leaf, pair in _NAMES.items():
    value = np.asarray(params[leaf[0]] if len(leaf) == 1 else params[leaf[0]][leaf[1]], np.float32)
    out[pair[_family(cfg)]] = value.T if leaf == ("dense", "kernel") else value
  prefix = "lm_head" if _family(cfg) else "cls.predictions"
  out[f"{prefix}.decoder.weight"] = np.asarray(word_embeddings, np.float32)
  out[f"{prefix}.decoder.bias"] = out[f"{prefix}.bias"]
  return out


def logits(params: dict, hidden: jax.Array, word_embeddings: jax.Array, cfg: transformer.EncoderConfig
           ) -> jax.Array:
  """[..., vocab] logits of hidden states [..., H]."""
  act = transformer.ACTIVATIONS["gelu" if _family(cfg) else cfg.hidden_act]
  x = act(hidden.astype(jnp.float32) @ params["dense"]["kernel"] + params["dense"]["bias"])
  mean = jnp.mean(x, axis=-1, keepdims=True)
  var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
  x = (x - mean) * jax.lax.rsqrt(var + cfg.layer_norm_eps) * params["norm"]["scale"] + params["norm"]["bias"]
  return x @ word_embeddings.astype(jnp.float32).T + params["output_bias"]


def mlm_loss(params: dict, hidden: jax.Array, masked, word_embeddings: jax.Array,
             cfg: transformer.EncoderConfig) -> jax.Array:
  """Mean cross-entropy over the masked tokens of ``masked`` (``data.masking.Masked``); ``hidden`` [B, L, H]
  is the encoder output on ``masked.input_ids``."""
  at = jnp.take_along_axis(hidden, masked.positions[..., None], axis=1)  # [B, P, H]
  log_probs = jax.nn.log_softmax(logits(params, at, word_embeddings, cfg), axis=-1)
  nll = -jnp.take_along_axis(log_probs, masked.targets[..., None], axis=-1)[..., 0]
  return jnp.sum(nll * masked.weights) / jnp.maximum(jnp.sum(masked.weights), 1.0)
