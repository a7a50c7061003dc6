"""``SentenceEncoder``: texts in, pooled vectors out (the sentence-transformers ``encode`` equivalent)."""

from __future__ import annotations

import copy
import functools
import pathlib
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from fewshot_nlu.data import batching
from fewshot_nlu.encoders import adapters, inference, pooling, pretrained, st_modules, transformer
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
    self.onnx = None  # an ``onnx_inference.OnnxForward`` in place of XLA (``onnx_inference.use_onnxruntime``)

  def _set_max_length(self, max_length: int) -> None:
    if max_length > self.cfg.max_length:
      raise ValueError(f"max_length={max_length} exceeds the model's {self.cfg.max_length} positions")
    self.max_length = max_length
    self.buckets = batching.length_buckets(max_length, batching.INFERENCE_BUCKETS)

  @classmethod
  def from_config(cls, config, model_config: transformer.EncoderConfig, params: Any, tokenizer: Tokenizer,
                  **kwargs) -> "SentenceEncoder":
    """The encoder a run evaluates with, as its config sets it up: ``config.model.pooling``,
    ``config.model.max_length``, ``config.eval.batch_size`` and ``config.model.dtype``; ``kwargs`` override
    (e.g. ``pooling_mode="cls", normalize=False`` for the Retriever, a ``projection``)."""
    if "pooling_mode" not in kwargs:
      kwargs["pooling_mode"] = config.model.pooling
    kwargs.setdefault("max_length", config.model.max_length)
    kwargs.setdefault("batch_size", config.eval.batch_size)
    kwargs.setdefault("dtype", transformer.DTYPES[config.model.dtype])
    return cls(model_config, params, tokenizer, **kwargs)

  @classmethod
  def from_pretrained(cls, source: str = pretrained.DEFAULT_MODEL, **kwargs) -> "SentenceEncoder":
    """Loads ``source`` (see ``pretrained.load_pretrained``), with its down-projection if it has one. A
    sentence-transformers directory encodes as it declares (``modules.json``: pooling, Dense, Normalize,
    ``max_seq_length`` capped at 128) unless ``kwargs`` say otherwise; a plain checkpoint pools by the mean and
    normalises."""
    model = pretrained.load_pretrained(source)
    declared = model.sentence
    projection = projection_head.load(model.directory)
    if declared is not None and "pooling_mode" not in kwargs:
      declared.require_supported()  # told how to pool instead, the caller encodes otherwise
    if declared is not None and not declared.unsupported:
      kwargs.setdefault("pooling_mode", declared.pooling)
      kwargs.setdefault("normalize", declared.normalize)
      projection = projection if projection is not None else declared.projection
    kwargs.setdefault("projection", projection)
    longest = min(model.config.max_length, (declared and declared.max_seq_length) or model.config.max_length)
    kwargs.setdefault("max_length", min(128, longest))
    return cls(model.config, model.params, model.tokenizer, **kwargs)

  def save(self, directory: str | pathlib.Path, *, heads: dict | None = None) -> pathlib.Path:
    """Writes the encoder as an HF checkpoint (``pretrained.save_pretrained``, with ``heads``), its projection
    (``encoders.projection``) and sentence-transformers' module files (``encoders.st_modules``), so that
    ``from_pretrained`` and ``SentenceTransformer(directory)`` both encode as this encoder does. The params must
    hold no adapters (an adapter is saved apart from its base: ``encoders.adapters``)."""
    directory = pathlib.Path(directory)
    pretrained.save_pretrained(directory, self.cfg, self.params, self.tokenizer, heads)
    if self.projection is not None:
      projection_head.save(directory, self.projection)
    st_modules.write(directory, hidden_size=self.cfg.hidden_size, pooling=self.pooling_mode,
                     normalize=self.normalize, max_length=self.max_length,
                     projection=None if self.projection is None else jax.device_get(self.projection))
    return directory

  def with_adapter(self, adapter: dict | None) -> "SentenceEncoder":
    """This encoder with ``adapter`` (``encoders.adapters``) in place of its own adapters (None: without any).
    The base weights are shared, not copied or reloaded: one base serves many task adapters in one process,
    and adapters of one size reuse the same compiled programs."""
    clone = copy.copy(self)
    clone.params = adapters.merge(self.params, jax.device_put(adapter) if adapter else {})
    clone.onnx = None  # other params: XLA runs them
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
      if self.onnx is not None:
        return self.onnx(batch["input_ids"], batch["attention_mask"])
      return encode_batch(self.params, batch["input_ids"], batch["attention_mask"], self.projection,
                          cfg=self.cfg, dtype=self.dtype, pool=self.pooling_mode, normalize=self.normalize)
    return inference.encode_bucketed(self.tokenizer.encode(texts, self.max_length), vectors,
                                     pad_id=self.tokenizer.pad_id, buckets=self.buckets,
                                     batch_size=self.batch_size, out=jax.ShapeDtypeStruct((self.dim,), np.float32),
                                     show_progress=show_progress)
