"""Bottleneck adapters as artefacts of their own (Multi-ConvFiT §2.3, C-ADAPT).

The adapter layers themselves live in ``encoders.transformer`` (``adapter_size``, Pfeiffer configuration).
Here: adding fresh adapters to a base encoder's params, splitting a params tree into (base, adapters) and
merging them back (no copy: the merged tree references the base arrays), stopping gradients into the base,
and saving / loading an adapter alone (``adapter.safetensors`` + ``adapter.json``, a few MB for MiniLM) with a
fingerprint of the base it was trained on, so loading it on another base fails loudly instead of silently
giving wrong vectors.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
from typing import Any

import flax
import jax
import numpy as np

from fewshot_nlu import workdirs
from fewshot_nlu.encoders import transformer

WEIGHTS_FILE = "adapter.safetensors"
META_FILE = "adapter.json"
KEY = "adapter"


def size_for(cfg: transformer.EncoderConfig, reduction_factor: int) -> int:
  """Bottleneck size = hidden size / reduction factor (the ``adapters`` library's definition; Multi-ConvFiT
  uses 4: 384 -> 96 for MiniLM)."""
  if reduction_factor <= 0 or cfg.hidden_size % reduction_factor:
    raise ValueError(f"adapter reduction factor {reduction_factor} must be positive and divide the hidden size "
                     f"{cfg.hidden_size}")
  return cfg.hidden_size // reduction_factor


def _is_adapter(path: tuple[str, ...]) -> bool:
  return KEY in path


def split(params: Any) -> tuple[dict, dict]:
  """(base params, adapter params): two nested dicts partitioning ``params`` (adapter paths keep their full
  ``layer_<i>/adapter/...`` names)."""
  flat = flax.traverse_util.flatten_dict(params)
  base = {p: v for p, v in flat.items() if not _is_adapter(p)}
  adapter = {p: v for p, v in flat.items() if _is_adapter(p)}
  return flax.traverse_util.unflatten_dict(base), flax.traverse_util.unflatten_dict(adapter)


def merge(base: Any, adapter: Any) -> dict:
  """``base`` with ``adapter`` inserted; ``base``'s own adapters (if any) are replaced. References, no copies."""
  flat = {p: v for p, v in flax.traverse_util.flatten_dict(base).items() if not _is_adapter(p)}
  extra = flax.traverse_util.flatten_dict(adapter)
  if not all(_is_adapter(p) for p in extra):
    raise ValueError("merge(): the adapter tree holds non-adapter weights")
  return flax.traverse_util.unflatten_dict({**flat, **extra})


def add_fresh(cfg: transformer.EncoderConfig, base: Any, reduction_factor: int, rng: jax.Array) -> dict:
  """``base`` with newly initialised adapters in every layer."""
  fresh = transformer.init_params(cfg, rng, adapter_size=size_for(cfg, reduction_factor))
  return merge(base, jax.device_get(split(fresh)[1]))


def freeze_base(params: Any) -> dict:
  """``params`` with ``stop_gradient`` on every non-adapter weight: gradients reach the adapters only, and XLA
  drops the base weights' gradient computations altogether (C-ADAPT trains faster than C-FFT)."""
  base, adapter = split(params)
  return merge(jax.tree.map(jax.lax.stop_gradient, base), adapter)


def fingerprint(cfg: transformer.EncoderConfig, base: Any) -> str:
  """A short hash of the base encoder's architecture and weights (a strided sample of every tensor)."""
  digest = hashlib.sha256(json.dumps(cfg.to_hf(), sort_keys=True).encode())
  for path, value in sorted(flax.traverse_util.flatten_dict(split(base)[0]).items()):
    flat = np.asarray(value, np.float32).reshape(-1)
    digest.update("/".join(path).encode())
    digest.update(np.ascontiguousarray(flat[:: max(1, flat.size // 256)]).tobytes())
  return digest.hexdigest()[:16]


def num_bytes(adapter: Any) -> int:
  return int(sum(np.asarray(v).nbytes for v in jax.tree.leaves(adapter)))


def save(directory: str | pathlib.Path, adapter: Any, cfg: transformer.EncoderConfig, base: Any,
         base_name: str) -> pathlib.Path:
  """Writes ``adapter.safetensors`` (only the adapter weights) and ``adapter.json`` (size, the base model's
  name and fingerprint)."""
  directory = pathlib.Path(directory)
  directory.mkdir(parents=True, exist_ok=True)
  flat = flax.traverse_util.flatten_dict(jax.device_get(adapter))
  if not flat:
    raise ValueError("save(): no adapter weights to save")
  workdirs.save_safetensors({"/".join(p): np.ascontiguousarray(np.asarray(v, np.float32)) for p, v in flat.items()},
                            directory / WEIGHTS_FILE)
  size = transformer.adapter_size_of(adapter)
  meta = {"adapter_size": size, "reduction_factor": cfg.hidden_size // size, "num_layers": cfg.num_layers,
          "hidden_size": cfg.hidden_size, "base_model": base_name, "base_fingerprint": fingerprint(cfg, base),
          "bytes": num_bytes(adapter)}
  (directory / META_FILE).write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
  return directory


def read_meta(directory: str | pathlib.Path) -> dict:
  path = pathlib.Path(directory) / META_FILE
  if not path.exists():
    raise FileNotFoundError(f"{path}: missing; {directory} is not a saved adapter")
  return json.loads(path.read_text(encoding="utf-8"))


def load(directory: str | pathlib.Path, cfg: transformer.EncoderConfig | None = None,
         base: Any | None = None) -> tuple[dict, dict]:
  """(adapter params, meta). With ``cfg`` and ``base``, checks the adapter was trained on that base."""
  from safetensors.numpy import load_file
  directory = pathlib.Path(directory)
  meta = read_meta(directory)
  tensors = load_file(str(directory / WEIGHTS_FILE))
  adapter = flax.traverse_util.unflatten_dict({tuple(k.split("/")): v for k, v in tensors.items()})
  if cfg is not None and base is not None:
    expected = fingerprint(cfg, base)
    if meta["base_fingerprint"] != expected:
      raise ValueError(f"{directory / META_FILE}: field base_fingerprint: the adapter was trained on "
                       f"{meta['base_model']!r} (fingerprint {meta['base_fingerprint']}), not on this base encoder "
                       f"(fingerprint {expected})")
    abstract = jax.eval_shape(lambda: transformer.init_params(cfg, jax.random.key(0),
                                                              adapter_size=meta["adapter_size"]))
    shapes = {p: v.shape for p, v in flax.traverse_util.flatten_dict(split(abstract)[1]).items()}
    if {p: v.shape for p, v in flax.traverse_util.flatten_dict(adapter).items()} != shapes:
      raise ValueError(f"{directory / WEIGHTS_FILE}: adapter tensors do not fit a {cfg.num_layers}-layer, "
                       f"{cfg.hidden_size}-d encoder with bottleneck {meta['adapter_size']}")
  return adapter, meta
