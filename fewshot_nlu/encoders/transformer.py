"""Pure-functional Flax Transformer encoder for the BERT family (BERT, MiniLM), the RoBERTa family and MPNet.

The module is applied functionally: ``TransformerEncoder(cfg).apply({'params': params}, ...)``. Every
parameter carries logical axis names (``nn.with_logical_partitioning``), which ``fewshot_nlu.sharding`` maps
to mesh axes by rule, so the same params can be replicated, FSDP-sharded or tensor-parallel.

Parameter names mirror the Hugging Face layout (see ``pretrained.hf_name``), so loading is a rename plus a
transpose of dense kernels.

MPNet (``model_type = "mpnet"``; all-mpnet-base-v2, paraphrase-mpnet-base-v2) is BERT's post-LayerNorm block
with RoBERTa's positions, no token type embeddings, and a relative position bias added to every layer's
attention logits: one ``relative_attention_bias`` table [buckets, heads] shared by all layers, indexed by
T5-style log-spaced buckets of the key-query distance (HF ``MPNetEncoder.compute_position_bias`` /
``relative_position_bucket``: 32 buckets, half per direction, exact up to 8, log-spaced up to 128).

Logical axes used:
  ``vocab``      token-embedding rows
  ``embed``      the model (hidden) dimension
  ``joined_kv``  attention projection output (heads x head_dim)
  ``mlp``        feed-forward inner dimension
  ``positions``, ``token_types``  small embedding tables (never sharded by the default rules)
  ``adapter``    the bottleneck of an adapter (``adapter_size``; Multi-ConvFiT's C-ADAPT)
  ``relative_buckets``, ``heads``  MPNet's relative position bias table (never sharded by the default rules)

Bottleneck adapters (``adapter_size > 0``) follow Pfeiffer et al. (2021), the configuration Multi-ConvFiT §3
uses, as the ``adapters`` library implements it (``SeqBnConfig``: output adapter only, ReLU, no adapter
LayerNorm, residual taken before the layer's LayerNorm, that LayerNorm re-applied after): with ``x`` the
attention block's output and ``h`` the feed-forward output,
  ``out = LN(x + h + up(relu(down(LN(x + h)))))``
where ``LN`` is the layer's own ``output_norm``. Adapter weights are named ``layer_<i>/adapter/{down,up}``
(see ``encoders.adapters`` for splitting, saving and swapping them).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from fewshot_nlu.encoders import quantize

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}  # config.model.dtype -> compute dtype

ACTIVATIONS = {
    "gelu": lambda x: nn.gelu(x, approximate=False),  # HF "gelu" is the exact erf form
    "gelu_new": lambda x: nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: nn.gelu(x, approximate=True),
    "relu": nn.relu,
}


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
  """Architecture of a BERT/RoBERTa/MPNet-family encoder (the fields of a HF ``config.json`` we use)."""

  vocab_size: int
  hidden_size: int
  num_layers: int
  num_heads: int
  intermediate_size: int
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  layer_norm_eps: float = 1e-12
  hidden_dropout: float = 0.1
  attention_dropout: float = 0.1
  hidden_act: str = "gelu"
  pad_token_id: int = 0
  # "bert": positions 0..L-1.  "roberta": positions start at pad_token_id + 1 and count only real tokens
  # (HF ``create_position_ids_from_input_ids``); padding positions get pad_token_id.
  position_style: str = "bert"
  model_type: str = "bert"
  # MPNet: rows of the shared relative position bias table (0: no relative position bias). ``type_vocab_size``
  # 0 means no token type embeddings (MPNet has none).
  relative_attention_num_buckets: int = 0

  def __post_init__(self):
    if self.hidden_size % self.num_heads:
      raise ValueError(
          f"hidden_size={self.hidden_size} is not divisible by num_heads={self.num_heads}")
    if self.hidden_act not in ACTIVATIONS:
      raise ValueError(f"hidden_act={self.hidden_act!r} unsupported; known: {sorted(ACTIVATIONS)}")
    if self.position_style not in ("bert", "roberta"):
      raise ValueError(f"position_style={self.position_style!r} must be 'bert' or 'roberta'")
    if self.relative_attention_num_buckets and self.relative_attention_num_buckets < RELATIVE_BUCKETS:
      raise ValueError(f"relative_attention_num_buckets={self.relative_attention_num_buckets}: MPNet indexes "
                       f"{RELATIVE_BUCKETS} buckets, so the table needs at least that many rows")

  @property
  def max_length(self) -> int:
    """Longest input (in tokens, specials included) the position table allows."""
    if self.position_style == "roberta":
      return self.max_position_embeddings - self.pad_token_id - 1
    return self.max_position_embeddings

  @classmethod
  def from_hf(cls, hf: dict[str, Any]) -> "EncoderConfig":
    """Builds the config from a Hugging Face ``config.json`` dict (BERT, RoBERTa, XLM-R, MPNet layouts)."""
    model_type = hf.get("model_type", "bert")
    if model_type not in ("bert", "roberta", "xlm-roberta", "camembert", "mpnet"):
      raise ValueError(
          f"model_type={model_type!r} is not a BERT-, RoBERTa- or MPNet-family encoder; supported: "
          "bert, roberta, xlm-roberta, camembert, mpnet")
    is_mpnet = model_type == "mpnet"
    if is_mpnet and hf.get("pad_token_id", 1) != 1:
      raise ValueError(f"pad_token_id={hf['pad_token_id']}: MPNet numbers positions from its padding index 1 "
                       "(HF MPNetEmbeddings.padding_idx), so its pad token must be 1")
    if hf.get("position_embedding_type", "absolute") != "absolute":
      raise ValueError(
          f"position_embedding_type={hf['position_embedding_type']!r} unsupported (only 'absolute')")
    is_roberta = model_type != "bert"
    return cls(
        vocab_size=hf["vocab_size"],
        hidden_size=hf["hidden_size"],
        num_layers=hf["num_hidden_layers"],
        num_heads=hf["num_attention_heads"],
        intermediate_size=hf["intermediate_size"],
        max_position_embeddings=hf.get("max_position_embeddings", 512),
        type_vocab_size=0 if is_mpnet else hf.get("type_vocab_size", 2),
        layer_norm_eps=hf.get("layer_norm_eps", 1e-12),
        hidden_dropout=hf.get("hidden_dropout_prob", 0.1),
        attention_dropout=hf.get("attention_probs_dropout_prob", 0.1),
        hidden_act=hf.get("hidden_act", "gelu"),
        pad_token_id=hf.get("pad_token_id", 1 if is_roberta else 0),
        position_style="roberta" if is_roberta else "bert",
        model_type=model_type,
        relative_attention_num_buckets=hf.get("relative_attention_num_buckets", 32) if is_mpnet else 0,
    )

  def to_hf(self) -> dict[str, Any]:
    """The inverse of ``from_hf``: a HF ``config.json`` dict for this architecture."""
    if self.model_type == "mpnet":
      architecture = "MPNetModel"
    else:
      architecture = "RobertaModel" if self.position_style == "roberta" else "BertModel"
    hf = {
        "model_type": self.model_type,
        "architectures": [architecture],
        "vocab_size": self.vocab_size,
        "hidden_size": self.hidden_size,
        "num_hidden_layers": self.num_layers,
        "num_attention_heads": self.num_heads,
        "intermediate_size": self.intermediate_size,
        "max_position_embeddings": self.max_position_embeddings,
        "type_vocab_size": self.type_vocab_size,
        "layer_norm_eps": self.layer_norm_eps,
        "hidden_dropout_prob": self.hidden_dropout,
        "attention_probs_dropout_prob": self.attention_dropout,
        "hidden_act": self.hidden_act,
        "pad_token_id": self.pad_token_id,
        "position_embedding_type": "absolute",
    }
    if self.model_type == "mpnet":
      del hf["type_vocab_size"], hf["position_embedding_type"]
      hf["relative_attention_num_buckets"] = self.relative_attention_num_buckets
    return hf


class Int8Dense(nn.Module):
  """A dense layer whose kernel is int8 with a scale per output column (``encoders.quantize``: inference only)."""

  features: int
  axes: tuple[str, str]

  @nn.compact
  def __call__(self, x):
    kernel = self.param("kernel_int8", nn.with_logical_partitioning(nn.initializers.zeros_init(), self.axes),
                        (x.shape[-1], self.features), jnp.int8)
    scale = self.param("kernel_scale", nn.with_logical_partitioning(nn.initializers.ones_init(), (self.axes[1],)),
                       (self.features,), jnp.float32)
    bias = self.param("bias", nn.with_logical_partitioning(nn.initializers.zeros_init(), (self.axes[1],)),
                      (self.features,), jnp.float32)
    return quantize.int8_matmul(x, kernel, scale) + bias


def _dense(features: int, axes: tuple[str, str], dtype, name: str, int8: bool = False) -> nn.Module:
  if int8:
    return Int8Dense(features, axes, name=name)
  return nn.Dense(
      features,
      dtype=dtype,
      kernel_init=nn.with_logical_partitioning(nn.initializers.normal(0.02), axes),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), (axes[1],)),
      name=name,
  )


def _layer_norm(eps: float, dtype, name: str) -> nn.LayerNorm:
  return nn.LayerNorm(
      epsilon=eps,
      dtype=dtype,
      scale_init=nn.with_logical_partitioning(nn.initializers.ones_init(), ("embed",)),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), ("embed",)),
      name=name,
  )


def _embed(num: int, features: int, axes: tuple[str, str], dtype, name: str) -> nn.Embed:
  return nn.Embed(
      num, features, dtype=dtype,
      embedding_init=nn.with_logical_partitioning(nn.initializers.normal(0.02), axes), name=name)


def position_ids(attention_mask: jax.Array, cfg: EncoderConfig) -> jax.Array:
  """Position ids for a right-padded batch, following the checkpoint family's convention."""
  length = attention_mask.shape[-1]
  if cfg.position_style == "roberta":
    mask = attention_mask.astype(jnp.int32)
    return jnp.cumsum(mask, axis=-1) * mask + cfg.pad_token_id
  return jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32), attention_mask.shape)


class Embeddings(nn.Module):
  cfg: EncoderConfig
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, input_ids, attention_mask, token_type_ids, deterministic: bool, positions=None):
    cfg = self.cfg
    words = _embed(cfg.vocab_size, cfg.hidden_size, ("vocab", "embed"), self.dtype,
                   "word_embeddings")(input_ids)
    if positions is None:
      if attention_mask.ndim != 2:
        raise ValueError("a [B, L, L] attention mask (packed rows) needs explicit position ids "
                         "(encoders.packing.position_ids)")
      positions = position_ids(attention_mask, cfg)
    positions = _embed(cfg.max_position_embeddings, cfg.hidden_size, ("positions", "embed"),
                       self.dtype, "position_embeddings")(positions)
    x = words + positions
    if cfg.type_vocab_size:  # MPNet has no token types
      if token_type_ids is None:
        token_type_ids = jnp.zeros_like(input_ids)
      x = x + _embed(cfg.type_vocab_size, cfg.hidden_size, ("token_types", "embed"), self.dtype,
                     "token_type_embeddings")(token_type_ids)
    x = _layer_norm(cfg.layer_norm_eps, self.dtype, "LayerNorm")(x)
    return nn.Dropout(cfg.hidden_dropout)(x, deterministic=deterministic)


RELATIVE_BUCKETS, RELATIVE_MAX_DISTANCE = 32, 128  # what HF MPNet's compute_position_bias uses, whatever the config


def relative_position_buckets(length: int, num_buckets: int = RELATIVE_BUCKETS,
                              max_distance: int = RELATIVE_MAX_DISTANCE) -> np.ndarray:
  """[length, length] bucket of each (query i, key j) pair, as HF ``MPNetEncoder.relative_position_bucket`` of
  ``j - i`` (float32 arithmetic as there): half the buckets per direction, distances below a quarter of the
  buckets exact, larger ones log-spaced up to ``max_distance``. Computed on the host: it depends on the
  (static) length only."""
  positions = np.arange(length)
  n = -(positions[None, :] - positions[:, None])
  half = num_buckets // 2
  bucket = (n < 0).astype(np.int64) * half
  n = np.abs(n)
  max_exact = half // 2
  with np.errstate(divide="ignore"):
    scaled = (np.log(n.astype(np.float32) / np.float32(max_exact)) / np.float32(np.log(max_distance / max_exact))
              * np.float32(half - max_exact))
  large = max_exact + np.where(n < max_exact, 0, scaled).astype(np.int64)
  return bucket + np.where(n < max_exact, n, np.minimum(large, half - 1))


def relative_position_bias(cfg: EncoderConfig, length: int) -> jax.Array:
  """MPNet's attention bias [1, heads, L, L], read from the table [buckets, heads] all layers share (a param
  ``relative_attention_bias/embedding`` of the module calling this)."""
  table = _embed(cfg.relative_attention_num_buckets, cfg.num_heads, ("relative_buckets", "heads"), jnp.float32,
                 "relative_attention_bias")
  return bias_from_table(table.embedding, length)


def bias_from_table(table: jax.Array, length: int) -> jax.Array:
  """MPNet's attention bias [1, heads, L, L] from its table [buckets, heads] (``relative_position_bias``)."""
  return jnp.transpose(jnp.asarray(table, jnp.float32)[relative_position_buckets(length)], (2, 0, 1))[None]


class SelfAttention(nn.Module):
  cfg: EncoderConfig
  dtype: Any = jnp.float32
  int8: bool = False  # int8 query / key / value / output kernels (encoders.quantize)

  @nn.compact
  def __call__(self, x, attention_mask, deterministic: bool, position_bias=None):
    cfg = self.cfg
    head_dim = cfg.hidden_size // cfg.num_heads
    split = lambda t: t.reshape(t.shape[:-1] + (cfg.num_heads, head_dim))
    q = split(_dense(cfg.hidden_size, ("embed", "joined_kv"), self.dtype, "query", self.int8)(x))
    k = split(_dense(cfg.hidden_size, ("embed", "joined_kv"), self.dtype, "key", self.int8)(x))
    v = split(_dense(cfg.hidden_size, ("embed", "joined_kv"), self.dtype, "value", self.int8)(x))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / jnp.sqrt(head_dim)
    if position_bias is not None:  # MPNet: [1, heads, L, L]
      logits = logits + position_bias.astype(jnp.float32)
    # [B, L]: which keys are real tokens; [B, L, L]: which keys each query may see (packed rows, whose
    # utterances see only themselves: ``encoders.packing.attention_mask``)
    key_is_pad = (attention_mask[:, None, :, :] if attention_mask.ndim == 3 else attention_mask[:, None, None, :]) == 0
    logits = jnp.where(key_is_pad, jnp.finfo(jnp.float32).min, logits)
    probs = jax.nn.softmax(logits, axis=-1)
    probs = nn.Dropout(cfg.attention_dropout)(probs, deterministic=deterministic)
    context = jnp.einsum("bhqk,bkhd->bqhd", probs.astype(self.dtype), v)
    context = context.reshape(context.shape[:-2] + (cfg.hidden_size,))
    return _dense(cfg.hidden_size, ("joined_kv", "embed"), self.dtype, "output", self.int8)(context)


class BottleneckAdapter(nn.Module):
  """``up(relu(down(x)))``, hidden -> ``size`` -> hidden. Initialised as the ``adapters`` library's default
  ("bert": normal(0.02) kernels, zero biases), so a fresh adapter perturbs the layer only slightly."""

  size: int
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    hidden = x.shape[-1]
    down = _dense(self.size, ("embed", "adapter"), self.dtype, "down")(x)
    return _dense(hidden, ("adapter", "embed"), self.dtype, "up")(nn.relu(down))


class TransformerLayer(nn.Module):
  """Post-LayerNorm block (BERT): x = LN(x + Attn(x)); x = LN(x + FFN(x)); with an adapter (module
  docstring) x = LN(x + FFN(x) + Adapter(LN(x + FFN(x))))."""

  cfg: EncoderConfig
  dtype: Any = jnp.float32
  adapter_size: int = 0
  int8: bool = False  # int8 dense kernels (encoders.quantize); adapters stay float32

  @nn.compact
  def __call__(self, x, attention_mask, deterministic: bool, position_bias=None):
    cfg = self.cfg
    attended = SelfAttention(cfg, self.dtype, self.int8, name="attention")(x, attention_mask, deterministic,
                                                                           position_bias)
    attended = nn.Dropout(cfg.hidden_dropout)(attended, deterministic=deterministic)
    x = _layer_norm(cfg.layer_norm_eps, self.dtype, "attention_norm")(x + attended)
    h = _dense(cfg.intermediate_size, ("embed", "mlp"), self.dtype, "intermediate", self.int8)(x)
    h = ACTIVATIONS[cfg.hidden_act](h)
    h = _dense(cfg.hidden_size, ("mlp", "embed"), self.dtype, "output", self.int8)(h)
    h = nn.Dropout(cfg.hidden_dropout)(h, deterministic=deterministic)
    norm = _layer_norm(cfg.layer_norm_eps, self.dtype, "output_norm")
    if not self.adapter_size:
      return norm(x + h)
    return norm(x + h + BottleneckAdapter(self.adapter_size, self.dtype, name="adapter")(norm(x + h)))


class TransformerEncoder(nn.Module):
  """Token-level encoder: ``(input_ids, attention_mask[, token_type_ids]) -> [B, L, H]`` hidden states.

  ``dtype`` is the compute dtype (``jnp.bfloat16`` for bf16 compute); params stay float32. Attention
  logits and softmax are always float32. Pass ``deterministic=False`` and a ``'dropout'`` rng to train.
  ``attention_mask`` is [B, L] (real tokens) or, for packed rows, [B, L, L] with explicit ``position_ids``
  (``encoders.packing``).
  ``adapter_size > 0`` adds a bottleneck adapter to every layer (module docstring). ``int8`` applies params
  quantised by ``encoders.quantize`` (inference only).
  """

  cfg: EncoderConfig
  dtype: Any = jnp.float32
  adapter_size: int = 0
  int8: bool = False

  @nn.compact
  def __call__(self, input_ids, attention_mask, token_type_ids=None, deterministic: bool = True,
               position_ids=None):
    x = Embeddings(self.cfg, self.dtype, name="embeddings")(
        input_ids, attention_mask, token_type_ids, deterministic, position_ids)
    bias = None
    if self.cfg.relative_attention_num_buckets:  # MPNet: one bias for every layer, by row index as HF computes it
      bias = relative_position_bias(self.cfg, input_ids.shape[-1])
    for i in range(self.cfg.num_layers):
      x = TransformerLayer(self.cfg, self.dtype, self.adapter_size, self.int8, name=f"layer_{i}")(
          x, attention_mask, deterministic, bias)
    return x


def init_params(cfg: EncoderConfig, rng: jax.Array, length: int = 8, adapter_size: int = 0):
  """Randomly initialised, unboxed params (for tests and training from scratch)."""
  ids = jnp.zeros((1, length), jnp.int32)
  boxed = TransformerEncoder(cfg, adapter_size=adapter_size).init(rng, ids, jnp.ones_like(ids))["params"]
  return nn.meta.unbox(boxed)


def logical_axes(cfg: EncoderConfig, adapter_size: int = 0):
  """The logical-axis ``PartitionSpec`` of every parameter, as a pytree shaped like the params."""
  ids = jnp.zeros((1, 8), jnp.int32)
  boxed = jax.eval_shape(
      lambda: TransformerEncoder(cfg, adapter_size=adapter_size).init(jax.random.key(0), ids, ids + 1))
  return nn.get_partition_spec(boxed["params"])


def adapter_size_of(params) -> int:
  """The bottleneck size of the adapters in ``params`` (0 when it has none)."""
  adapter = params.get("layer_0", {}).get("adapter")
  return int(adapter["down"]["kernel"].shape[-1]) if adapter else 0


def encoder_for(cfg: EncoderConfig, params, dtype=jnp.float32) -> TransformerEncoder:
  """The module that applies ``params``: with adapters when ``params`` holds them, with int8 products when they
  were quantised (``encoders.quantize``)."""
  return TransformerEncoder(cfg, dtype, adapter_size_of(params), quantize.is_int8(params))
