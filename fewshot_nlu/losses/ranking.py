"""Response-ranking losses over the global in-batch negatives."""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from fewshot_nlu.encoders.pooling import l2_normalize


_MASKED = -1e9


def scaled_cosine(queries: jax.Array, candidates: jax.Array, scale: float) -> jax.Array:
  """S(c, r) = D * cos(c, r) for every query/candidate pair: [B_q, H] x [B_c, H] -> [B_q, B_c]."""
  q = l2_normalize(queries.astype(jnp.float32))
  c = l2_normalize(candidates.astype(jnp.float32))
  return scale * q @ c.T


def mneg_loss(contexts: jax.Array, responses: jax.Array, valid: jax.Array | None = None,
              labels: jax.Array | None = None, *, scale: float = 20.0,
              exclude_positive: bool = True) -> jax.Array:
  """Multiple negatives ranking loss, ConvFiT Eq. (1):

      L = - sum_i S(c_i, r_i) + sum_i log sum_{j != i} exp S(c_i, r_j),   S = D * cos.

  Deviations, on purpose:
    * the sum over i is a mean over the valid rows (Eq. 1 / B), so the learning rate does not depend on
      the batch size;
    * ``exclude_positive=False`` gives sentence-transformers' MultipleNegativesRankingLoss, whose
      denominator also contains j = i (a plain softmax cross-entropy). The default follows Eq. (1).

  ``contexts``/``responses`` are the GLOBAL batch [B, H] (row i of each is a positive pair); when they
  are sharded over devices, jit gathers the responses so every context ranks against all B responses.
  ``valid`` [B] marks real rows (padding rows are neither anchors nor negatives). ``labels`` [B], when
  given, removes same-label responses j != i from row i's negatives (they are false negatives when pairs
  come from labelled data; Eq. 1 assumes none exist).
  """
  b = contexts.shape[0]
  valid = jnp.ones((b,), bool) if valid is None else valid.astype(bool)
  scores = scaled_cosine(contexts, responses, scale)
  positive = jnp.diagonal(scores)
  allowed = valid[None, :] & valid[:, None]
  diagonal = jnp.eye(b, dtype=bool)
  if labels is not None:
    allowed = allowed & ((labels[:, None] != labels[None, :]) | diagonal)
  if exclude_positive:
    allowed = allowed & ~diagonal
  # A large finite negative instead of -inf keeps gradients finite for all-padding rows.
  denominator = jax.nn.logsumexp(jnp.where(allowed, scores, _MASKED), axis=-1)
  per_row = -positive + denominator
  return jnp.sum(jnp.where(valid, per_row, 0.0)) / jnp.maximum(jnp.sum(valid), 1)


def _chunked(tree, n: int):
  return jax.tree.map(lambda x: x.reshape((n, x.shape[0] // n) + x.shape[1:]), tree)


def cached_mneg_loss_and_grads(embed: Callable, params, contexts: dict, responses: dict, rng: jax.Array, *,
                               num_chunks: int, valid: jax.Array | None = None,
                               labels: jax.Array | None = None, scale: float = 20.0,
                               exclude_positive: bool = True):
  """MNEG (Eq. 1) loss and parameter gradients for a batch too large to back-propagate at once, by gradient
  caching (Gao et al. 2021, "GradCache"; sentence-transformers' CachedMNRL):

    1. embed all contexts and responses chunk by chunk, keeping no activations;
    2. take the loss and its gradient with respect to the embeddings only (cheap: [B, H]);
    3. re-embed chunk by chunk and back-propagate each chunk's embedding gradient into the parameters.

  The result equals ``jax.value_and_grad`` of ``mneg_loss`` over the whole batch (same dropout keys per
  chunk), while activation memory is that of one chunk. ``embed(params, chunk, rng) -> [chunk, H]``;
  ``contexts`` / ``responses`` are dicts of [B, ...] arrays with B divisible by ``num_chunks``. Chunk i of
  the contexts uses ``fold_in(rng, i)``, of the responses ``fold_in(rng, num_chunks + i)``.
  """
  keys = jax.vmap(lambda i: jax.random.fold_in(rng, i))(jnp.arange(2 * num_chunks))
  context_keys, response_keys = keys[:num_chunks], keys[num_chunks:]
  context_chunks, response_chunks = _chunked(contexts, num_chunks), _chunked(responses, num_chunks)

  def embed_all(chunks, chunk_keys):
    vectors = jax.lax.map(lambda xs: embed(params, xs[0], xs[1]), (chunks, chunk_keys))
    return jax.lax.stop_gradient(vectors.reshape((-1,) + vectors.shape[2:]))

  c, r = embed_all(context_chunks, context_keys), embed_all(response_chunks, response_keys)
  loss, (grad_c, grad_r) = jax.value_and_grad(
      lambda c, r: mneg_loss(c, r, valid, labels, scale=scale, exclude_positive=exclude_positive),
      argnums=(0, 1))(c, r)

  def backprop(chunks, chunk_keys, cotangents):
    def body(acc, xs):
      chunk, key, cotangent = xs
      _, vjp = jax.vjp(lambda p: embed(p, chunk, key), params)
      return jax.tree.map(jnp.add, acc, vjp(cotangent)[0]), None
    zeros = jax.tree.map(jnp.zeros_like, params)
    return jax.lax.scan(body, zeros, (chunks, chunk_keys, _chunked(cotangents, num_chunks)))[0]

  grads = jax.tree.map(jnp.add, backprop(context_chunks, context_keys, grad_c),
                       backprop(response_chunks, response_keys, grad_r))
  return loss, grads
