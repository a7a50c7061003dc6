"""DSE's contrastive head (Appendix A.2): "a two-layer MLP with size (d x d, d x 128)" after mean pooling,
used only inside the training loss; evaluation uses the pooled encoder output itself.

The activation between the layers is not printed in the paper; ReLU follows the authors' PairSupCon head
(``Linear(d, d), ReLU, Linear(d, 128)``), on which DSE builds. Layers are initialised like torch
``nn.Linear`` (``encoders.projection.init``). Plain dicts, so the head trains, shards and checkpoints with the
encoder.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fewshot_nlu.encoders import projection


def init(rng: jax.Array, dim: int, out_dim: int = 128) -> dict:
  first, second = jax.random.split(rng)
  return {"dense_0": projection.init(first, dim, dim), "dense_1": projection.init(second, dim, out_dim)}


def logical_axes() -> dict:
  return {"dense_0": projection.logical_axes(), "dense_1": projection.logical_axes()}


def apply(params: dict, pooled: jax.Array) -> jax.Array:
  hidden = jax.nn.relu(pooled.astype(jnp.float32) @ params["dense_0"]["kernel"] + params["dense_0"]["bias"])
  return hidden @ params["dense_1"]["kernel"] + params["dense_1"]["bias"]
