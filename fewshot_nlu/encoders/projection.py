"""ConvFiT Stage 2's down-projection: a d_o-dim dense layer with tanh after pooling (ConvFiT §2.2,
"we add a down-projection d_o-dim layer with non-linearity (Tanh used) after pooling"; d_o = 512 in §3).

A plain dict ``{"kernel": [H, d_o], "bias": [d_o]}``, so it trains, shards, checkpoints and exports like
any other parameter. Initialised as sentence-transformers' ``models.Dense`` (torch ``nn.Linear``): kernel and
bias uniform in +-1/sqrt(H).
"""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from fewshot_nlu import workdirs

FILE = "projection.safetensors"


def init(rng: jax.Array, in_dim: int, out_dim: int) -> dict:
  bound = 1.0 / np.sqrt(in_dim)
  k_kernel, k_bias = jax.random.split(rng)
  return {"kernel": jax.random.uniform(k_kernel, (in_dim, out_dim), jnp.float32, -bound, bound),
          "bias": jax.random.uniform(k_bias, (out_dim,), jnp.float32, -bound, bound)}


def logical_axes() -> dict:
  """Small enough to replicate everywhere."""
  return {"kernel": P(None, None), "bias": P(None)}


def linear(params: dict, x: jax.Array) -> jax.Array:
  """x W + b in float32, without the activation (QAID's Proj, linear classifiers)."""
  return x.astype(jnp.float32) @ params["kernel"] + params["bias"]


def apply(params: dict, pooled: jax.Array) -> jax.Array:
  return jnp.tanh(linear(params, pooled))


def save(directory: str | pathlib.Path, params: dict, *, file: str = FILE, activation: str = "tanh") -> None:
  """Writes ``params`` to ``directory/file`` (another ``file`` for other linear layers, e.g. QAID's
  ``late_interaction.PROJECTION_FILE``, so that they are not mistaken for this head)."""
  workdirs.save_safetensors({k: np.ascontiguousarray(np.asarray(v, np.float32)) for k, v in params.items()},
                            pathlib.Path(directory) / file, metadata={"activation": activation})


def load(directory: str | pathlib.Path, *, file: str = FILE) -> dict | None:
  """The projection saved in ``directory`` (as ``file``), or None if it has none."""
  path = pathlib.Path(directory) / file
  if not path.exists():
    return None
  from safetensors.numpy import load_file
  tensors = load_file(str(path))
  if set(tensors) != {"kernel", "bias"} or tensors["kernel"].shape[1:] != tensors["bias"].shape:
    raise ValueError(f"{path}: expected tensors 'kernel' [H, d] and 'bias' [d], got "
                     f"{ {k: v.shape for k, v in tensors.items()} }")
  return tensors
