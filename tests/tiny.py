"""Tiny random checkpoints in Hugging Face format, written by the tests themselves.

Tensors are named and laid out exactly as HF's BertModel / RobertaModel / MPNetModel save them (written here by
hand, independently of ``fewshot_nlu.encoders.pretrained``), so loading them tests the name mapping for real.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import safetensors.numpy
import tokenizers
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers

CORPUS = [
    "i want to transfer money to my savings account", "what is the weather like in boston tomorrow",
    "book a table for two at an italian restaurant", "play some jazz music please",
    "my card has not arrived yet", "how do i reset my pin", "set an alarm for seven am",
    "cancel my order", "what time is it", "thanks a lot", "hi", "is there a fee for top ups",
]

HIDDEN, LAYERS, HEADS, INTERMEDIATE, POSITIONS = 32, 2, 4, 64, 64


def bert_tokenizer() -> tokenizers.Tokenizer:
  words = sorted({w for s in CORPUS for w in s.split()})
  vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words)}
  tok = tokenizers.Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
  tok.normalizer = normalizers.BertNormalizer(lowercase=True)
  tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  tok.post_processor = processors.TemplateProcessing(
      single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
      special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
  tok.decoder = decoders.WordPiece()
  tok.enable_padding(length=POSITIONS, pad_id=0, pad_token="[PAD]")  # like the shipped MiniLM: must be undone
  return tok


def roberta_tokenizer() -> tokenizers.Tokenizer:
  tok = tokenizers.Tokenizer(models.BPE(unk_token=None))
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = decoders.ByteLevel()
  trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
  tok.train_from_iterator(CORPUS, trainer)
  tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
  return tok


RELATIVE_BUCKETS = 32
# MPNet's attention names (HF MPNetAttention: attn.{q,k,v,o}, then LayerNorm) vs BERT's
_ATTENTION_NAMES = {
    "bert": ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
             "attention.output.LayerNorm"),
    "mpnet": ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o", "attention.LayerNorm"),
}


def _prefix(kind: str) -> str:
  return {"roberta": "roberta.", "mpnet": "mpnet."}.get(kind, "")


def hf_tensors(kind: str, vocab_size: int, seed: int = 0) -> dict[str, np.ndarray]:
  """Random weights under HF names, torch layout ([out, in] for Linear). MPNet's are named as in
  MPNetForMaskedLM (``mpnet.`` prefix), with the shared ``encoder.relative_attention_bias`` and no token types."""
  rng = np.random.default_rng(seed)
  normal = lambda *shape: rng.normal(0, 0.2, shape).astype(np.float32)
  prefix = _prefix(kind)
  positions = POSITIONS if kind == "bert" else POSITIONS + 2
  t = {
      "embeddings.word_embeddings.weight": normal(vocab_size, HIDDEN),
      "embeddings.position_embeddings.weight": normal(positions, HIDDEN),
  }
  if kind != "mpnet":  # drawn in this order: other tests' expectations rest on these random weights
    t["embeddings.token_type_embeddings.weight"] = normal(1 if kind == "roberta" else 2, HIDDEN)
  t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"] = 1 + normal(HIDDEN), normal(HIDDEN)
  if kind == "mpnet":
    t["encoder.relative_attention_bias.weight"] = rng.normal(0, 1.0, (RELATIVE_BUCKETS, HEADS)).astype(np.float32)
  attention = _ATTENTION_NAMES["mpnet" if kind == "mpnet" else "bert"]
  for i in range(LAYERS):
    p = f"encoder.layer.{i}."
    for name in attention[:4]:
      t[p + name + ".weight"] = normal(HIDDEN, HIDDEN)
      t[p + name + ".bias"] = normal(HIDDEN)
    t[p + attention[4] + ".weight"] = 1 + normal(HIDDEN)
    t[p + attention[4] + ".bias"] = normal(HIDDEN)
    t[p + "intermediate.dense.weight"] = normal(INTERMEDIATE, HIDDEN)
    t[p + "intermediate.dense.bias"] = normal(INTERMEDIATE)
    t[p + "output.dense.weight"] = normal(HIDDEN, INTERMEDIATE)
    t[p + "output.dense.bias"] = normal(HIDDEN)
    t[p + "output.LayerNorm.weight"] = 1 + normal(HIDDEN)
    t[p + "output.LayerNorm.bias"] = normal(HIDDEN)
  t = {prefix + k: v for k, v in t.items()}
  t[prefix + "embeddings.position_ids"] = np.arange(positions, dtype=np.int64)[None]  # a buffer
  return t


def hf_config(kind: str, vocab_size: int) -> dict:
  config = {"model_type": kind, "vocab_size": vocab_size, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
            "num_attention_heads": HEADS, "intermediate_size": INTERMEDIATE, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "layer_norm_eps": 1e-12}
  if kind == "roberta":
    config.update(max_position_embeddings=POSITIONS + 2, type_vocab_size=1, pad_token_id=1,
                  layer_norm_eps=1e-5)
  elif kind == "mpnet":
    config.update(max_position_embeddings=POSITIONS + 2, pad_token_id=1, layer_norm_eps=1e-5,
                  relative_attention_num_buckets=RELATIVE_BUCKETS)
  else:
    config.update(max_position_embeddings=POSITIONS, type_vocab_size=2, pad_token_id=0)
  return config


def write_checkpoint(directory: pathlib.Path, kind: str, tensors: dict | None = None) -> pathlib.Path:
  tok = bert_tokenizer() if kind == "bert" else roberta_tokenizer()  # <s> 0, <pad> 1, </s> 2 as MPNet's
  vocab_size = tok.get_vocab_size()
  tok.save(str(directory / "tokenizer.json"))
  (directory / "config.json").write_text(json.dumps(hf_config(kind, vocab_size)))
  safetensors.numpy.save_file(tensors if tensors is not None else hf_tensors(kind, vocab_size),
                              str(directory / "model.safetensors"))
  return directory


def write_dropout_free_checkpoint(directory: pathlib.Path, kind: str) -> pathlib.Path:
  """``write_checkpoint`` with dropout off: training losses become deterministic, so two batch layouts of the same
  items (padded, packed) see the same network."""
  directory = write_checkpoint(directory, kind)
  hf = json.loads((directory / "config.json").read_text())
  hf.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  (directory / "config.json").write_text(json.dumps(hf))
  return directory


# ------------------------------------------------------------------------- numpy reference forward pass

def _layer_norm(x, w, b, eps):
  mu = x.mean(-1, keepdims=True)
  var = ((x - mu) ** 2).mean(-1, keepdims=True)
  return (x - mu) / np.sqrt(var + eps) * w + b


def _gelu(x):
  from math import erf, sqrt
  return 0.5 * x * (1 + np.vectorize(erf)(x / sqrt(2)))


def mpnet_relative_buckets(length: int) -> np.ndarray:
  """HF ``MPNetEncoder.relative_position_bucket`` of (key - query) for every pair, line by line in float32
  numpy (num_buckets 32, max_distance 128)."""
  position = np.arange(length)
  relative_position = position[None, :] - position[:, None]
  num_buckets, max_distance = 32, 128
  ret = 0
  n = -relative_position
  num_buckets //= 2
  ret += (n < 0).astype(np.int64) * num_buckets
  n = np.abs(n)
  max_exact = num_buckets // 2
  is_small = n < max_exact
  with np.errstate(divide="ignore"):
    val_if_large = max_exact + np.nan_to_num(
        np.log(n.astype(np.float32) / max_exact) / np.float32(np.log(max_distance / max_exact))
        * (num_buckets - max_exact), neginf=0).astype(np.int64)
  val_if_large = np.minimum(val_if_large, num_buckets - 1)
  return ret + np.where(is_small, n, val_if_large)


def int8_linear_reference(h: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
  """``h @ weight.T + bias`` as vector-wise absmax int8 (LLM.int8() §3.1 without outliers; ``encoders.quantize``):
  each output row of the HF weight [out, in] and each row of ``h`` scaled by its max |value| / 127, rounded to
  integers, multiplied exactly, scaled back. float64."""
  weight_scale = np.abs(weight).max(axis=1) / 127
  weight_scale = np.where(weight_scale > 0, weight_scale, 1.0)
  row_scale = np.abs(h).max(axis=-1, keepdims=True) / 127
  row_scale = np.where(row_scale > 0, row_scale, 1.0)
  integer = np.rint(h / row_scale) @ np.rint(weight / weight_scale[:, None]).T
  return integer * row_scale * weight_scale + bias


def reference_forward(tensors: dict, config: dict, input_ids: np.ndarray, mask: np.ndarray,
                      int8: bool = False) -> np.ndarray:
  """BertModel / RobertaModel / MPNetModel last hidden state in float64 numpy, straight from the HF
  definitions; ``int8``: every layer's dense products as ``int8_linear_reference``."""
  kind = config["model_type"]
  prefix = _prefix(kind)
  w = {k[len(prefix):]: v.astype(np.float64) for k, v in tensors.items() if k.startswith(prefix)}
  eps = config["layer_norm_eps"]
  if kind in ("roberta", "mpnet"):
    pad = config["pad_token_id"]
    not_pad = (input_ids != pad).astype(np.int64)
    positions = np.cumsum(not_pad, axis=1) * not_pad + pad
  else:
    positions = np.broadcast_to(np.arange(input_ids.shape[1]), input_ids.shape)
  x = w["embeddings.word_embeddings.weight"][input_ids] + w["embeddings.position_embeddings.weight"][positions]
  if kind != "mpnet":
    x = x + w["embeddings.token_type_embeddings.weight"][np.zeros_like(input_ids)]
  x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
  heads, d = config["num_attention_heads"], config["hidden_size"] // config["num_attention_heads"]
  if int8:
    linear = lambda h, name: int8_linear_reference(h, w[name + ".weight"], w[name + ".bias"])
  else:
    linear = lambda h, name: h @ w[name + ".weight"].T + w[name + ".bias"]
  b, l, _ = x.shape
  bias = np.where(mask[:, None, None, :] == 0, -1e30, 0.0)
  if kind == "mpnet":  # one relative position bias [1, heads, L, L] for every layer
    table = w["encoder.relative_attention_bias.weight"]
    bias = bias + table[mpnet_relative_buckets(l)].transpose(2, 0, 1)[None]
  attention = _ATTENTION_NAMES["mpnet" if kind == "mpnet" else "bert"]
  for i in range(config["num_hidden_layers"]):
    p = f"encoder.layer.{i}."
    split = lambda h: h.reshape(b, l, heads, d).transpose(0, 2, 1, 3)
    q, k, v = (split(linear(x, p + name)) for name in attention[:3])
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, l, heads * d)
    x = _layer_norm(x + linear(ctx, p + attention[3]), w[p + attention[4] + ".weight"],
                    w[p + attention[4] + ".bias"], eps)
    h = _gelu(linear(x, p + "intermediate.dense"))
    x = _layer_norm(x + linear(h, p + "output.dense"), w[p + "output.LayerNorm.weight"],
                    w[p + "output.LayerNorm.bias"], eps)
  return x


def assert_sharded_loss_equals_single_device(params, axes, loss_fn, make_batch, atol=1e-5):
  """``loss_fn(params, batch, rng)`` and its gradients on a (data 2, fsdp 2, model 2) mesh equal one device.
  ``make_batch(mesh)`` gives the host batch for a mesh. Returns the single-device (loss, grads)."""
  import jax

  from fewshot_nlu import sharding
  values = []
  for shape in ({"data": 1}, {"data": 2, "fsdp": 2, "model": 2}):
    mesh = sharding.make_mesh(shape)
    specs = sharding.param_specs(params, axes, mesh)
    placed = sharding.place(params, sharding.shardings_from_specs(specs, mesh))
    batch = sharding.global_batch(make_batch(mesh), mesh)
    value, grads = jax.jit(jax.value_and_grad(lambda p, b: loss_fn(p, b, jax.random.key(0))[0]))(placed, batch)
    values.append((float(value), jax.device_get(grads)))
  np.testing.assert_allclose(values[1][0], values[0][0], rtol=1e-5, atol=1e-6)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=atol), values[1][1], values[0][1])
  return values[0]


def embed_length_groups(embed, params, batch, rng):
  """Reference for the all-pairs losses: every length group (side ``group<g>``) of ``batch`` embedded with the
  dropout key the loss uses (``fold_in(rng, g)``), concatenated in row order."""
  import jax
  groups = sorted(int(k[len("group"):].split("_")[0]) for k in batch if k.startswith("group") and k.endswith("_mask"))
  return np.concatenate([embed(params, batch, f"group{g}", jax.random.fold_in(rng, g),
                               batch[f"group{g}_mask"].shape[0]) for g in groups])
