"""``SentenceEncoder``: texts in, pooled vectors out (the sentence-transformers ``encode`` equivalent)."""

from __future__ import annotations

import copy
import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from fewshot_nlu.data import batching
from fewshot_nlu.encoders import adapters, inference, pooling, pretrained, transformer
from fewshot_nlu.encoders import projection as projection_head
from fewshot_nlu.encoders.tokenizer import Tokenizer


@functools.partial(jax.jit, static_argnames=("cfg", "dtype", "pool", "normalize"))
def encode_batch(params, input_ids, attention_mask, projection=None, *, cfg, dtype, pool: str,
                 normalize: bool):
  """One jitted forward (with adapters when ``params`` holds them) + pooling (+ the down-projection head,
  + L2 normalisation) of a padded batch."""
  hidden = transformer.encoder_for(cfg, params, dtype).apply({"params": params}, input_ids, attention_mask)
  vectors = pooling.get_pooler(pool)(hidden, attention_mask)
  if projection is not None:
    vectors = projection_head.apply(projection, vectors)
  return pooling.l2_normalize(vectors) if normalize else vectors


class SentenceEncoder:
  """Encodes texts with length buckets: texts are sorted by token count, cut into batches of ``batch_size``
  and each batch padded to the smallest of ``batching.INFERENCE_BUCKETS`` that fits it, so a bounded set of
  programs compiles (each once per process, or once ever with the persistent compilation cache).
  ``projection`` (``encoders.projection``) maps pooled vectors into ConvFiT's d_o-dim specialised space."""

  def __init__(self, cfg: transformer.EncoderConfig, params: Any, tokenizer: Tokenizer, *,
               pooling_mode: str = "mean", normalize: bool = True, max_length: int = 128,
               batch_size: int = 32, dtype=jnp.float32, projection: dict | None = None):
    pooling.get_pooler(pooling_mode)  # validate early
    self.cfg, self.tokenizer = cfg, tokenizer
    self._set_max_length(max_length)
    self.params = jax.device_put(params)
    self.projection = None if projection is None else jax.device_put(dict(projection))
    self.dim = cfg.hidden_size if projection is None else int(projection["kernel"].shape[1])
    self.pooling_mode, self.normalize = pooling_mode, normalize
    self.batch_size, self.dtype = batch_size, dtype

  def _set_max_length(self, max_length: int) -> None:
    if max_length > self.cfg.max_length:
      raise ValueError(f"max_length={max_length} exceeds the model's {self.cfg.max_length} positions")
    self.max_length = max_length
    self.buckets = batching.length_buckets(max_length, batching.INFERENCE_BUCKETS)

  @classmethod
  def from_pretrained(cls, source: str = pretrained.DEFAULT_MODEL, **kwargs) -> "SentenceEncoder":
    """Loads ``source`` (see ``pretrained.load_pretrained``), with its down-projection if it has one."""
    model = pretrained.load_pretrained(source)
    kwargs.setdefault("projection", projection_head.load(model.directory))
    kwargs.setdefault("max_length", min(128, model.config.max_length))
    return cls(model.config, model.params, model.tokenizer, **kwargs)

  def with_adapter(self, adapter: dict | None) -> "SentenceEncoder":
    """This encoder with ``adapter`` (``encoders.adapters``) in place of its own adapters (None: without any).
    The base weights are shared, not copied or reloaded: one base serves many task adapters in one process,
    and adapters of one size reuse the same compiled programs."""
    clone = copy.copy(self)
    clone.params = adapters.merge(self.params, jax.device_put(adapter) if adapter else {})
    return clone

  def with_max_length(self, max_length: int) -> "SentenceEncoder":
    """This encoder truncating at ``max_length`` tokens (same params, not copied)."""
    clone = copy.copy(self)
    clone._set_max_length(max_length)
    return clone

  def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
    """[len(texts), H] float32 vectors, in input order."""
    if isinstance(texts, str):
      raise TypeError("encode() takes a sequence of texts, not a single string")
    def vectors(batch, rows):
      return encode_batch(self.params, batch["input_ids"], batch["attention_mask"], self.projection,
                          cfg=self.cfg, dtype=self.dtype, pool=self.pooling_mode, normalize=self.normalize)
    return inference.encode_bucketed(self.tokenizer.encode(texts, self.max_length), vectors,
                                     pad_id=self.tokenizer.pad_id, buckets=self.buckets,
                                     batch_size=self.batch_size, out=jax.ShapeDtypeStruct((self.dim,), np.float32),
                                     show_progress=show_progress)
