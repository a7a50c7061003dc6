"""QAID's late interaction: MaxSim (Eq. 1) against a numpy loop, chunked and sharded scoring against the dense
one, and the cosine ablation as one-token MaxSim of the projected pooled vector."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from fewshot_nlu import sharding
from fewshot_nlu.encoders import projection as projection_head
from fewshot_nlu.methods.qaid import late_interaction
from fewshot_nlu.methods.qaid.late_interaction import maxsim_scores, token_vectors
from tests.methods.qaid.helpers import _tokens


def numpy_maxsim(q, qm, d, dm):
  """Score(u, v) = 1/|u| sum_{i in u} max_{j in v} u_i . v_j, padding excluded, written as loops."""
  out = np.zeros((len(q), len(d)))
  for a in range(len(q)):
    for b in range(len(d)):
      u, v = q[a][qm[a]], d[b][dm[b]]
      out[a, b] = sum(max(float(ui @ vj) for vj in v) for ui in u) / len(u)
  return out


def test_maxsim_matches_the_loop_and_is_not_symmetric():
  rng = np.random.default_rng(0)
  q, qm = _tokens(rng, 5, 6)
  d, dm = _tokens(rng, 7, 4)
  np.testing.assert_allclose(maxsim_scores(q, qm, d, dm), numpy_maxsim(q, qm, d, dm), rtol=1e-5, atol=1e-6)
  s = np.asarray(maxsim_scores(q, qm, q, qm))
  assert not np.allclose(s, s.T)


@pytest.mark.parametrize("chunk", [1, 3, 7, 16])
def test_chunked_equals_dense(chunk):
  rng = np.random.default_rng(1)
  q, qm = _tokens(rng, 6, 5)
  d, dm = _tokens(rng, 7, 5)
  np.testing.assert_allclose(maxsim_scores(q, qm, d, dm, chunk=chunk), maxsim_scores(q, qm, d, dm), rtol=1e-6,
                             atol=1e-6)


def test_sharded_chunked_equals_single_device_dense():
  rng = np.random.default_rng(2)
  q, qm = _tokens(rng, 16, 6)
  d, dm = _tokens(rng, 16, 6)
  mesh = sharding.make_mesh({"data": 8})
  rows = NamedSharding(mesh, P(("data", "fsdp")))
  sharded = jax.jit(lambda *a: maxsim_scores(*a, chunk=4))(*(jax.device_put(x, rows) for x in (q, qm, d, dm)))
  # scores are means of cosines (|s| <= 1): atol for float32 reduction order, e.g. 1.5e-8 on a score of 0.006
  np.testing.assert_allclose(sharded, maxsim_scores(q, qm, d, dm), rtol=1e-6, atol=1e-6)


def test_token_vectors_are_unit_and_zero_at_padding():
  rng = np.random.default_rng(3)
  proj = {"kernel": rng.normal(size=(6, 4)).astype(np.float32), "bias": np.zeros(4, np.float32)}
  hidden = rng.normal(size=(2, 3, 6)).astype(np.float32)
  mask = np.array([[1, 1, 0], [1, 0, 0]], bool)
  z = np.asarray(token_vectors(proj, hidden, mask))
  np.testing.assert_allclose(np.linalg.norm(z, axis=-1), mask.astype(float), atol=1e-6)


def test_cosine_similarity_is_one_token_maxsim_of_the_projected_pooled_vector():
  rng = np.random.default_rng(0)
  hidden = jnp.asarray(rng.normal(0, 1, (3, 5, 8)), jnp.float32)
  mask = jnp.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
  projection = projection_head.init(jax.random.key(0), 8, 4)
  z, z_mask = late_interaction.represent(projection, hidden, mask, "cosine", "mean")
  assert z.shape == (3, 1, 4)
  pooled = np.asarray((hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True))
  v = pooled @ np.asarray(projection["kernel"]) + np.asarray(projection["bias"])
  v /= np.linalg.norm(v, axis=-1, keepdims=True)
  np.testing.assert_allclose(late_interaction.maxsim_scores(z, z_mask, z, z_mask), v @ v.T, rtol=1e-5, atol=1e-6)
  tokens, token_mask = late_interaction.represent(projection, hidden, mask, "late_interaction")
  full = late_interaction.maxsim_scores(tokens, token_mask, tokens, token_mask)
  np.testing.assert_allclose(late_interaction.maxsim_pairs(tokens, token_mask, tokens[::-1], token_mask[::-1]),
                             np.diag(np.asarray(full)[:, ::-1]), rtol=1e-6, atol=1e-6)
