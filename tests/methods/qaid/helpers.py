"""``_tokens``: random unit token vectors with padding (shared by methods/qaid/test_late_interaction and
test_losses)."""

import numpy as np


def _tokens(rng, b, length, d=8):
  x = rng.normal(size=(b, length, d)).astype(np.float32)
  x /= np.linalg.norm(x, axis=-1, keepdims=True)
  mask = np.zeros((b, length), bool)
  for i in range(b):
    mask[i, :rng.integers(1, length + 1)] = True
  return x * mask[..., None], mask
