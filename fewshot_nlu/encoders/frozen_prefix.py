"""Frozen-prefix caching: freeze the embeddings and the lower N layers, compute their output once per distinct
utterance, and train only the layers above.

On a CPU a training step is compute-bound and its cost is spread over every layer; few-shot fine-tuning
visits each utterance many times (ConvFiT: 10 epochs), so the frozen layers would recompute the same states
each time. With ``layers = N`` (``config.train.frozen_prefix_layers``):

  * ``PrefixCache`` runs the embeddings and layers 0..N-1 once per distinct token id sequence (deterministic:
    no dropout in the frozen part) and keeps each sequence's [length, H] states in memory. Entries are keyed by
    the token ids themselves, so a different tokenizer or max length can never be served a stale entry; the
    cache belongs to one set of frozen params and dtype (one run).
  * Batches carry those states, padded like token ids (``batching.pad_token_ids`` pads [length, H] rows with
    zeros) or packed several to a row (``batching.pack_rows``, ``encoders.packing``), where they would carry
    ids; ``encode_tokens`` takes either and runs the whole encoder on ids or only layers N.. on cached states
    (with dropout, as in the full forward, from layer N up).
  * What trains (and what the optimizer holds) is ``split(params, N)[1]``: layers N.. only; the frozen params
    never enter the train state, so they come back bit-identical (``merge``).
  * MPNet adds one relative position bias, from a table all its layers share, to every layer's attention
    logits. The table is frozen with the prefix (its 32 x heads numbers are position statistics of pre-training,
    not of a task); the layers above carry it read-only: no gradient (``apply_layers``) and frozen in the
    optimizer (``read_only_patterns``, which ``train.setup.build_training`` adds to ``train.frozen``).

Measured on this 2-core CPU (MiniLM-L6, 32 x 32 tokens, OCL-like loss + AdamW): a full step 0.68-0.75 s; with
the embeddings + 2 layers frozen 0.36-0.39 s, + 3 layers 0.27 s, + 4 layers 0.18-0.20 s (the word-embedding
gradient and its AdamW update over 11.7M rows are a large share of the full step). Accuracy per method:
``bench/results/``.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from fewshot_nlu.data import batching
from fewshot_nlu.encoders import inference, transformer

FROZEN = "embeddings"  # the params key of the embeddings, always part of a frozen prefix
# MPNet's relative position bias table, which every layer reads (``transformer.relative_position_bias``): frozen
# with the prefix, and carried read-only by the layers above it (``split``, ``read_only_patterns``)
SHARED_TABLE = "relative_attention_bias"


def _layer_names(cfg: transformer.EncoderConfig, first: int, last: int) -> list[str]:
  return [f"layer_{i}" for i in range(first, last)]


def validate_layers(cfg: transformer.EncoderConfig, layers: int) -> None:
  """``layers`` in 0..num_layers - 1 (at least the top layer trains)."""
  if not 0 <= layers < cfg.num_layers:
    raise ValueError(f"a frozen prefix of {layers} layers must leave at least one of the encoder's "
                     f"{cfg.num_layers} layers to train (0 <= layers < {cfg.num_layers})")


def split(params: dict, cfg: transformer.EncoderConfig, layers: int) -> tuple[dict, dict]:
  """(frozen, trainable): the embeddings + layers 0..``layers``-1, and the layers above. MPNet's relative
  position bias table (``SHARED_TABLE``) is frozen with the prefix and carried by both parts, since every layer
  adds the bias it gives: the layers above read it without gradient (``apply_layers``) and the optimizer leaves it
  alone (``read_only_patterns``), so it stays bit-identical."""
  validate_layers(cfg, layers)
  frozen_names = {FROZEN, *_layer_names(cfg, 0, layers)}
  unknown = set(params) - {FROZEN, SHARED_TABLE, *_layer_names(cfg, 0, cfg.num_layers)}
  if unknown:
    raise ValueError(f"encoder params hold {sorted(unknown)} besides the embeddings and layers")
  shared = {SHARED_TABLE: params[SHARED_TABLE]} if SHARED_TABLE in params else {}
  return ({**{k: v for k, v in params.items() if k in frozen_names}, **shared},
          {**{k: v for k, v in params.items() if k not in frozen_names and k != SHARED_TABLE}, **shared})


def read_only_patterns(encoder_params: dict, root: str = "encoder") -> tuple[str, ...]:
  """``train.frozen`` regexes for what the layers above a frozen prefix (``split``'s trainable part, under
  ``root``) carry but must not train: MPNet's shared table. Empty for a whole encoder (which holds its
  embeddings) and for encoders without the table."""
  if SHARED_TABLE not in encoder_params or FROZEN in encoder_params:
    return ()
  return (f"{root}/{SHARED_TABLE}/.*" if root else f"{SHARED_TABLE}/.*",)


def merge(frozen: dict, trainable: dict) -> dict:
  """The whole encoder's params again (the inverse of ``split``)."""
  return {**frozen, **trainable}


def first_layer(params: dict) -> int:
  """The index of the lowest layer ``params`` holds (0 when it holds the embeddings)."""
  if FROZEN in params:
    return 0
  return min(int(name.rsplit("_", 1)[1]) for name in params if name.startswith("layer_"))


def apply_layers(cfg: transformer.EncoderConfig, params: dict, hidden: jax.Array, attention_mask: jax.Array, *,
                 dtype=jnp.float32, deterministic: bool = True, rng: jax.Array | None = None) -> jax.Array:
  """Runs the ``layer_<i>`` entries of ``params`` (in order) on ``hidden``; dropout from ``rng`` per layer; with
  MPNet's ``SHARED_TABLE`` in ``params``, the relative position bias it gives (no gradient into the table)."""
  adapter_size = 0
  bias = None
  if SHARED_TABLE in params:  # MPNet: the frozen table's bias, for every layer
    bias = transformer.bias_from_table(jax.lax.stop_gradient(params[SHARED_TABLE]["embedding"]), hidden.shape[1])
  for name in sorted((n for n in params if n.startswith("layer_")), key=lambda n: int(n.rsplit("_", 1)[1])):
    layer_params = params[name]
    if "adapter" in layer_params:
      adapter_size = int(layer_params["adapter"]["down"]["kernel"].shape[-1])
    layer = transformer.TransformerLayer(cfg, dtype, adapter_size)
    rngs = {} if deterministic else {"dropout": jax.random.fold_in(rng, int(name.rsplit("_", 1)[1]))}
    hidden = layer.apply({"params": layer_params}, hidden, attention_mask, deterministic, bias, rngs=rngs)
  return hidden


def prefix_states(cfg: transformer.EncoderConfig, frozen: dict, input_ids: jax.Array, attention_mask: jax.Array,
                  dtype=jnp.float32) -> jax.Array:
  """The output of the embeddings and the layers in ``frozen`` (deterministic): [B, L, H]."""
  embeddings = transformer.Embeddings(cfg, dtype)
  hidden = embeddings.apply({"params": frozen[FROZEN]}, input_ids, attention_mask, None, True)
  return apply_layers(cfg, {k: v for k, v in frozen.items() if k != FROZEN}, hidden, attention_mask, dtype=dtype)


def encode_tokens(cfg: transformer.EncoderConfig, params: dict, tokens: jax.Array, attention_mask: jax.Array, *,
                  dtype=jnp.float32, deterministic: bool = True, rng: jax.Array | None = None,
                  position_ids: jax.Array | None = None) -> jax.Array:
  """Token states [B, L, H] of a batch whose ``tokens`` are either token ids [B, L] (``params``: the whole
  encoder) or a frozen prefix's cached states [B, L, H] (``params``: the layers above it). ``attention_mask``:
  [B, L], or [B, L, L] for packed rows (``encoders.packing``, which also gives the ids' ``position_ids``)."""
  rngs = {} if deterministic else {"dropout": rng}
  if tokens.ndim == 2:
    module = transformer.encoder_for(cfg, params, dtype)
    return module.apply({"params": params}, tokens, attention_mask, deterministic=deterministic, rngs=rngs,
                        position_ids=position_ids)
  return apply_layers(cfg, params, tokens.astype(dtype), attention_mask, dtype=dtype, deterministic=deterministic,
                      rng=rng)


@functools.partial(jax.jit, static_argnames=("cfg", "dtype"))
def prefix_batch(frozen, input_ids, attention_mask, *, cfg, dtype):
  """``prefix_states`` compiled, as float32."""
  return prefix_states(cfg, frozen, input_ids, attention_mask, dtype).astype(jnp.float32)


class PrefixCache:
  """The frozen prefix's states per distinct token id sequence, computed on first request (module docstring)."""

  def __init__(self, cfg: transformer.EncoderConfig, frozen: dict, *, pad_id: int, max_length: int,
               batch_size: int = 64, dtype=jnp.float32):
    self.cfg, self.frozen, self.pad_id, self.dtype = cfg, jax.device_put(frozen), pad_id, dtype
    self.buckets = batching.length_buckets(max_length, batching.INFERENCE_BUCKETS)
    self.batch_size = batch_size
    self._states: dict[tuple[int, ...], np.ndarray] = {}

  def __len__(self) -> int:
    return len(self._states)

  def states(self, token_ids: Sequence[Sequence[int]], *, show_progress: bool = False) -> list[np.ndarray]:
    """Per sequence, its [len, H] float32 prefix states (computing those not cached yet)."""
    keys = [tuple(int(t) for t in ids) for ids in token_ids]
    missing = list(dict.fromkeys(k for k in keys if k not in self._states))
    if missing:
      def run(batch, rows):
        return prefix_batch(self.frozen, batch["input_ids"], batch["attention_mask"], cfg=self.cfg,
                             dtype=self.dtype)
      computed = inference.encode_bucketed(missing, run, pad_id=self.pad_id, buckets=self.buckets,
                                           batch_size=self.batch_size, row_sizes=[len(k) for k in missing],
                                           show_progress=show_progress, desc="frozen prefix")
      self._states.update(zip(missing, (np.ascontiguousarray(c) for c in computed)))
    return [self._states[k] for k in keys]


def freeze(params: dict, axes: dict, cfg: transformer.EncoderConfig, layers: int, *, pad_id: int, max_length: int,
           dtype=jnp.float32, batch_size: int = 64) -> tuple[dict, dict, PrefixCache | None]:
  """For train-state ``params`` / logical ``axes`` holding the whole encoder under ``"encoder"``: the same with
  only the layers above a frozen prefix of ``layers`` under ``"encoder"``, and the ``PrefixCache`` of that
  prefix (``layers < 0``: unchanged, and no cache). ``thaw`` puts the encoder back together."""
  if layers < 0:
    return params, axes, None
  frozen, trainable = split(params["encoder"], cfg, layers)
  cache = PrefixCache(cfg, frozen, pad_id=pad_id, max_length=max_length, batch_size=batch_size, dtype=dtype)
  return ({**params, "encoder": trainable}, {**axes, "encoder": {k: axes["encoder"][k] for k in trainable}}, cache)


def thaw(params: dict, cache: PrefixCache | None) -> dict:
  """``params`` with the whole encoder under ``"encoder"`` again (the inverse of ``freeze``)."""
  return params if cache is None else {**params, "encoder": merge(jax.device_get(cache.frozen), params["encoder"])}


def frozen_param_patterns(cfg: transformer.EncoderConfig, layers: int, root: str = "encoder") -> tuple[str, ...]:
  """The prefix's params under ``root`` as ``train.frozen`` regexes (``train.optimizer.freeze_labels``): the
  optimizer gives them zero updates and holds no state for them. Empty when ``layers < 0``."""
  if layers < 0:
    return ()
  validate_layers(cfg, layers)
  shared = (SHARED_TABLE,) if cfg.relative_attention_num_buckets else ()
  return tuple(f"{root}/{name}/.*" for name in (FROZEN, *_layer_names(cfg, 0, layers), *shared))


def encode_through_prefix(cfg: transformer.EncoderConfig, params: dict, input_ids: jax.Array,
                          attention_mask: jax.Array, layers: int, *, dtype=jnp.float32, deterministic: bool = True,
                          rng: jax.Array | None = None) -> jax.Array:
  """Token states [B, L, H] of the whole encoder ``params`` with a frozen prefix of ``layers`` that is run, not
  cached: for inputs that differ at every step (QAID's randomly masked views). The prefix runs without dropout
  and without gradient (``stop_gradient``; pair it with ``frozen_param_patterns`` so the optimizer leaves it
  alone), the layers above with dropout unless ``deterministic``. ``layers < 0``: the ordinary full forward."""
  if layers < 0:
    return encode_tokens(cfg, params, input_ids, attention_mask, dtype=dtype, deterministic=deterministic, rng=rng)
  frozen, trainable = split(params, cfg, layers)
  hidden = prefix_states(cfg, jax.lax.stop_gradient(frozen), input_ids, attention_mask, dtype)
  return apply_layers(cfg, trainable, hidden, attention_mask, dtype=dtype, deterministic=deterministic, rng=rng)


def cached_or_ids(token_ids: Sequence[Sequence[int]], cache: PrefixCache | None) -> Sequence[Any]:
  """What a batch should carry for ``token_ids``: the ids themselves, or their cached prefix states."""
  return token_ids if cache is None else cache.states(token_ids, show_progress=True)
