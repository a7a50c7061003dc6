"""Late interaction (ColBERT MaxSim) as QAID uses it (§2.1, Eq. 1 and §3.2).

z(u) = normalize(Proj(Enc(u))): every token vector of the encoder projected to D_P = 128 and put on the unit
sphere. The relevance of u to v is

    Score(u, v) = 1/|u| * sum_{i in u} max_{j in v} z(u)_i . z(v)_j                                    (Eq. 1)

with padding excluded on both sides and the sum normalised by u's token count (§3.2: "we normalize the score
by the number of tokens in the summation"). Score is not symmetric.

``maxsim_scores`` scores every query against every candidate ([B_q, B_d]) as one jitted computation whose
memory is bounded: the candidate axis is cut into chunks of ``chunk`` candidates and scanned with
``lax.map``, so a global batch of 1,024 x 1,024 pairs of 32 x 32 tokens never materialises its
[B_q, B_d, m, l] = 4 GiB token-similarity tensor at once. Under jit with the queries sharded over the mesh's
batch axes each device scores its own queries against all candidates (XLA gathers the candidates).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fewshot_nlu.encoders import pooling
from fewshot_nlu.encoders import projection as projection_head
from fewshot_nlu.encoders.pooling import l2_normalize

_MASKED = -1e9
PROJECTION_FILE = "late_interaction_projection.safetensors"  # Proj of an export (encoders.projection format)


def token_vectors(projection: dict, hidden: jax.Array, mask: jax.Array) -> jax.Array:
  """z: [B, L, D_P] unit-length projected token vectors (a linear layer, no activation), zero at padding."""
  z = l2_normalize(projection_head.linear(projection, hidden))
  return z * mask[..., None].astype(z.dtype)


SIMILARITIES = ("late_interaction", "cosine")


def represent(projection: dict, hidden: jax.Array, mask: jax.Array, similarity: str = "late_interaction",
              pooling_mode: str = "mean") -> tuple[jax.Array, jax.Array]:
  """(vectors [B, L', D_P], mask [B, L']) that ``maxsim_scores`` compares.

  ``late_interaction``: ``token_vectors`` (L' = L). ``cosine`` (Table 3's "QAID - cosine similarity"): one
  vector per text, the pooled encoder output projected and normalised (L' = 1), for which Eq. (1)'s MaxSim
  is exactly the cosine of the two pooled vectors. The paper pools the [CLS] token; ``pooling_mode`` says
  which pooling (the shipped MiniLM is a mean-pooling model)."""
  if similarity == "late_interaction":
    return token_vectors(projection, hidden, mask), mask
  if similarity != "cosine":
    raise ValueError(f"similarity {similarity!r} unknown; choose one of {SIMILARITIES}")
  pooled = pooling.get_pooler(pooling_mode)(hidden, mask)
  has_tokens = jnp.any(mask > 0, axis=-1, keepdims=True)
  z = l2_normalize(projection_head.linear(projection, pooled))
  return (z * has_tokens)[:, None, :], has_tokens.astype(mask.dtype)


def _token_maxima_block(queries, candidates, candidate_mask):
  """[B_q, C, m]: each query token's best similarity among each candidate's tokens."""
  sims = jnp.einsum("qmd,cld->qcml", queries, candidates)
  return jnp.max(jnp.where(candidate_mask[None, :, None, :].astype(bool), sims, _MASKED), axis=-1)


def _maxsim_block(queries, query_mask, candidates, candidate_mask):
  """[B_q, C] scores of all queries against one block of C candidates."""
  best = _token_maxima_block(queries, candidates, candidate_mask)  # [B_q, C, m]
  qm = query_mask.astype(best.dtype)[:, None, :]
  return jnp.sum(best * qm, axis=-1) / jnp.maximum(jnp.sum(qm, axis=-1), 1.0)


def _in_chunks(block, candidates: jax.Array, candidate_mask: jax.Array, chunk: int | None) -> jax.Array:
  """``block(candidates, mask)`` -> [B_q, C, ...] over all B_d candidates, ``chunk`` at a time under ``lax.map``
  (None: all at once); B_d need not divide by ``chunk`` (the tail is padded and cut)."""
  b_d = candidates.shape[0]
  if chunk is None or chunk >= b_d:
    return block(candidates, candidate_mask)
  pad = (-b_d) % chunk
  candidates = jnp.pad(candidates, ((0, pad), (0, 0), (0, 0))).reshape((-1, chunk) + candidates.shape[1:])
  candidate_mask = jnp.pad(candidate_mask, ((0, pad), (0, 0))).reshape((-1, chunk) + candidate_mask.shape[1:])
  out = jnp.moveaxis(jax.lax.map(lambda b: block(*b), (candidates, candidate_mask)), 0, 1)  # [B_q, n, chunk, ...]
  return out.reshape((out.shape[0], -1) + out.shape[3:])[:, :b_d]


def maxsim_scores(queries: jax.Array, query_mask: jax.Array, candidates: jax.Array, candidate_mask: jax.Array,
                  *, chunk: int | None = None) -> jax.Array:
  """Score(q, d) of Eq. (1) for every query q ([B_q, m, D] token vectors, mask [B_q, m]) and candidate d
  ([B_d, l, D], mask [B_d, l]) -> [B_q, B_d]. ``chunk``: candidates scored at a time (None: all at once);
  B_d need not divide by it (the tail is padded and cut). A candidate without tokens scores -1e9."""
  return _in_chunks(lambda c, m: _maxsim_block(queries, query_mask, c, m), candidates, candidate_mask, chunk)


def token_maxima(queries: jax.Array, candidates: jax.Array, candidate_mask: jax.Array, *, chunk: int | None = None
                 ) -> jax.Array:
  """Eq. (1) before its sum: for every query token, its best similarity in each candidate ([B_q, m, D] against
  [B_d, l, D], mask [B_d, l]) -> [B_q, B_d, m] (-1e9 against a candidate without tokens). The max over a union
  of candidates is the max of their maxima, so this scores any grouping of the candidates (an intent document
  without one of its examples: QAID's leave-one-out calibration). ``chunk``: candidates at a time."""
  return _in_chunks(lambda c, m: _token_maxima_block(queries, c, m), candidates, candidate_mask, chunk)


def maxsim_pairs(queries: jax.Array, query_mask: jax.Array, candidates: jax.Array, candidate_mask: jax.Array
                 ) -> jax.Array:
  """Score(q_b, d_b) of Eq. (1) for aligned rows ([B, m, D] against [B, l, D]) -> [B]: ColBERT's triplets."""
  sims = jnp.einsum("bmd,bld->bml", queries, candidates)
  sims = jnp.where(candidate_mask[:, None, :].astype(bool), sims, _MASKED)
  qm = query_mask.astype(sims.dtype)
  return jnp.sum(jnp.max(sims, axis=-1) * qm, axis=-1) / jnp.maximum(jnp.sum(qm, axis=-1), 1.0)
