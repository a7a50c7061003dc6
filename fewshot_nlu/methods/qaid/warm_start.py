"""A warm start for QAID's token projection Proj (§2.1): step 0 keeps the encoder's own token similarities.

The paper initialises Proj (H -> D_P = 128) freshly. On a small encoder and a CPU budget that throws the
pretrained similarity away at step 0: measured on BANKING77 5-shot (valid), the untouched MiniLM's token
vectors retrieve intent names at 60.1% and Match-QQ+QA at 74.0%; the paper's fresh 128-d projection, trained
10 epochs at its lr, ends at 67.3% on the test set, below the encoder's own 1-NN (bench/results/qaid.md). ``fit`` chooses Proj from the encoder's token vectors of the training texts:

  * D_P >= H: the identity (padded with zero columns above H), so z(u) are exactly the encoder's normalised token
    vectors (zero-padded);
  * D_P < H: the top D_P right singular vectors V of the matrix X whose rows are the normalised token vectors
    (uncentred PCA). Among all rank-D_P orthonormal projections this one keeps the most of sum_i |x_i|^2, i.e.
    it changes the dot products x_i . x_j between tokens the least in the least-squares sense (Eckart-Young).

The bias starts at zero. Either way the projection is an ordinary trainable linear layer afterwards.
"""

from __future__ import annotations

import numpy as np


def fit(token_vectors: np.ndarray, dim: int) -> dict:
  """Proj {"kernel": [H, dim], "bias": [dim]} from ``token_vectors`` [N, H] (one row per real token)."""
  tokens = np.asarray(token_vectors, np.float64)
  if tokens.ndim != 2:
    raise ValueError(f"token vectors must be [N, H], got shape {tokens.shape}")
  hidden = tokens.shape[1]
  if dim < 1:
    raise ValueError(f"projection width {dim} must be >= 1")
  if dim >= hidden:
    kernel = np.eye(hidden, dim)
  else:
    if len(tokens) < dim:
      raise ValueError(f"{len(tokens)} token vectors cannot span a {dim}-d projection")
    norms = np.linalg.norm(tokens, axis=1, keepdims=True)
    directions = tokens / np.maximum(norms, 1e-12)
    _, _, vt = np.linalg.svd(directions, full_matrices=False)
    kernel = vt[:dim].T
  return {"kernel": kernel.astype(np.float32), "bias": np.zeros(dim, np.float32)}


def retained_fraction(token_vectors: np.ndarray, projection: dict) -> float:
  """The share of the normalised tokens' squared norm that ``projection`` keeps (1.0 for the identity)."""
  tokens = np.asarray(token_vectors, np.float64)
  directions = tokens / np.maximum(np.linalg.norm(tokens, axis=1, keepdims=True), 1e-12)
  projected = directions @ np.asarray(projection["kernel"], np.float64)
  return float((projected ** 2).sum() / (directions ** 2).sum())
