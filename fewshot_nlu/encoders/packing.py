"""Packed rows: several short utterances share one row of ``max_length`` tokens, each attending only to itself.

Short task-oriented utterances padded to length buckets leave most of a batch as padding (BANKING77 10-shot
batches of 32, mean 15.8 tokens: 34% real tokens in one bucket, 50% in two length groups), and a CPU pays for
every padded token. ``batching.pack_rows`` places them first fit by decreasing length into rows (~90% real
tokens); here, what the encoder needs to treat a packed row as separate utterances:

  * a block-diagonal attention mask (``attention_mask``: a token sees the tokens of its own utterance only);
  * position ids restarting at each utterance (``position_ids``, in the checkpoint family's convention), so the
    embeddings are those of the utterance alone; token type 0 throughout, as unpacked;
  * pooling per utterance (``pooling.packed_mean_pool``).

A packed batch side is ``{"ids": [R, L] (or cached prefix states [R, L, H]), "owner": [R, L], "offsets": [R, L]}``
(``batching.pack_rows``); ``encode`` returns one vector per utterance. The result equals encoding the utterances
one by one (tests/encoders/test_packing.py checks it to 1e-5), so packing changes cost, not the model.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fewshot_nlu.encoders import frozen_prefix, pooling, transformer


def attention_mask(owner: jax.Array) -> jax.Array:
  """[R, L, L]: query token q of a row may see key token k when both belong to the same utterance."""
  return (owner[:, :, None] == owner[:, None, :]) & (owner[:, None, :] >= 0)


def position_ids(offsets: jax.Array, owner: jax.Array, cfg: transformer.EncoderConfig) -> jax.Array:
  """Each token's position within its own utterance, as ``transformer.position_ids`` numbers an unpacked row
  (BERT: 0..n-1; RoBERTa: pad_id + 1 .., pad_id on padding)."""
  if cfg.position_style == "roberta":
    return jnp.where(owner >= 0, offsets + cfg.pad_token_id + 1, cfg.pad_token_id)
  return offsets


def encode(cfg: transformer.EncoderConfig, params: dict, side: dict, num_items: int, *, dtype=jnp.float32,
           deterministic: bool = True, rng: jax.Array | None = None) -> jax.Array:
  """Mean-pooled vectors [num_items, H] of a packed batch side (module docstring); ``params`` are the whole
  encoder for token ids, or the layers above a frozen prefix for its cached states."""
  owner = side["owner"]
  hidden = frozen_prefix.encode_tokens(cfg, params, side["ids"], attention_mask(owner), dtype=dtype,
                                       deterministic=deterministic, rng=rng,
                                       position_ids=position_ids(side["offsets"], owner, cfg))
  return pooling.packed_mean_pool(hidden, owner, num_items)


def encode_side(cfg: transformer.EncoderConfig, params: dict, batch: dict, name: str, *, num_items: int,
                pool: str = "mean", dtype=jnp.float32, deterministic: bool = True,
                rng: jax.Array | None = None) -> jax.Array:
  """Pooled vectors [num_items, H] of the batch side ``name`` as ``batching.batch_side`` lays it out: packed
  (``<name>_owner`` present; mean pooling) or padded (``<name>_mask``; ``pool``). ``num_items``: the batch's
  item count (a padded side has that many rows)."""
  if f"{name}_owner" in batch:
    if pool != "mean":
      raise ValueError(f"packed rows are mean-pooled; pooling {pool!r} needs unpacked batches")
    side = {"ids": batch[f"{name}_ids"], "owner": batch[f"{name}_owner"], "offsets": batch[f"{name}_offsets"]}
    return encode(cfg, params, side, num_items, dtype=dtype, deterministic=deterministic, rng=rng)
  mask = batch[f"{name}_mask"]
  hidden = frozen_prefix.encode_tokens(cfg, params, batch[f"{name}_ids"], mask, dtype=dtype,
                                       deterministic=deterministic, rng=rng)
  return pooling.get_pooler(pool)(hidden, mask)
