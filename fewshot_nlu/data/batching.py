"""Length-bucketed padding, so jit compiles one program per bucket instead of one per batch.

Measured on CPU (see brief): padding every utterance to 64 tokens is ~4x slower than buckets, and each new
input shape costs a compile, so there are few buckets and the batch dimension is always padded to a fixed size.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

# Training: a train step compiles in ~3.5 s on CPU, so few, coarse buckets.
TRAIN_BUCKETS = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512)
# Inference: a forward compiles in ~0.4 s (and is cached across processes), while padding costs every call:
# fine buckets for short utterances. Measured (bench/encode.py, 2,000 CLINC150 utterances, mean 10.8 tokens):
# 347 sentences/s with TRAIN_BUCKETS vs 518/s with these.
INFERENCE_BUCKETS = tuple(range(8, 33, 2)) + (40, 48, 56, 64, 80, 96, 128, 160, 192, 256, 320, 384, 448, 512)


def length_buckets(max_length: int, buckets: Sequence[int] = TRAIN_BUCKETS) -> tuple[int, ...]:
  """The bucket lengths in use for a given ``max_length`` (which is always the last bucket)."""
  return tuple(b for b in buckets if b < max_length) + (max_length,)


def coarse_buckets(buckets: Sequence[int]) -> tuple[int, ...]:
  """Of ``buckets``, the multiples of 8 and the last: the lengths a short multi-row batch pads to, so that the
  programs a server's gathered batches need (rows 2, 4, 8, ... x length) stay few enough to compile at start-up."""
  return tuple(b for b in buckets if b % 8 == 0 or b == buckets[-1])


def row_bucket(rows: int, batch_size: int) -> int:
  """The padded batch dimension for ``rows`` real rows: the smallest power of two that holds them, at most
  ``batch_size`` (a short batch runs at its own size, from a bounded set of compiled shapes)."""
  return min(batch_size, 1 << max(rows - 1, 0).bit_length())


def padded_rows(n: int, *, finest: int) -> int:
  """Rows to pad ``n`` to for a jitted program (a search's queries and items, a support set's negatives): up to
  ``finest``, the next power of two; above it, the next multiple of a sixteenth of the next power of two (at
  least ``finest``). Padding is work: a product padded
  to powers of two computes up to twice the rows it needs (98 span queries x 2,675 unlabelled spans ran as
  128 x 4,096), while the compiled shapes stay few (at most 16 per octave, each compiled once)."""
  if n <= finest:
    return 1 << max(n - 1, 0).bit_length()
  step = max(finest, (1 << (n - 1).bit_length()) // 16)
  return -(-n // step) * step


def bucket_for(length: int, buckets: Sequence[int]) -> int:
  """The smallest bucket that holds ``length`` tokens."""
  for b in buckets:
    if length <= b:
      return b
  raise ValueError(f"sequence of {length} tokens exceeds the largest bucket {buckets[-1]}")


def pad_token_ids(sequences: Sequence[Sequence[int]], length: int, pad_id: int,
                  batch_size: int | None = None) -> dict[str, np.ndarray]:
  """Right-pads token id lists into ``input_ids``/``attention_mask`` int32 arrays of [batch_size, length].

  Rows past ``len(sequences)`` are all padding (mask 0); pooled outputs of such rows are zero and callers
  drop them. Sequences may instead be per-token state rows ([n, H] float arrays, a frozen prefix's cached
  output, ``encoders.frozen_prefix``): ``input_ids`` is then [batch_size, length, H], zero where padded.
  """
  rows = batch_size if batch_size is not None else len(sequences)
  if rows < len(sequences):
    raise ValueError(f"{len(sequences)} sequences do not fit batch_size={rows}")
  states = bool(sequences) and isinstance(sequences[0], np.ndarray) and sequences[0].ndim == 2
  if states:
    input_ids = np.zeros((rows, length, sequences[0].shape[1]), dtype=sequences[0].dtype)
  else:
    input_ids = np.full((rows, length), pad_id, dtype=np.int32)
  mask = np.zeros((rows, length), dtype=np.int32)
  for i, seq in enumerate(sequences):
    if len(seq) > length:
      raise ValueError(f"sequence {i} has {len(seq)} tokens, longer than the padded length {length}")
    input_ids[i, : len(seq)] = seq
    mask[i, : len(seq)] = 1
  return {"input_ids": input_ids, "attention_mask": mask}


def pad_to_bucket(sequences: Sequence[Sequence[int]], buckets: Sequence[int], pad_id: int,
                  batch_size: int | None = None) -> dict[str, np.ndarray]:
  """``pad_token_ids`` to the smallest of ``buckets`` that holds the longest sequence."""
  return pad_token_ids(sequences, bucket_for(max((len(s) for s in sequences), default=1), buckets), pad_id,
                       batch_size)


def pad_in_length_groups(sequences: Sequence[Sequence[int]], groups: int, buckets: Sequence[int], pad_id: int,
                         batch_size: int) -> tuple[np.ndarray, list[dict[str, np.ndarray]]]:
  """Sorts ``sequences`` by length and cuts the batch into ``groups`` equal sub-batches of
  ``batch_size / groups`` rows, each padded to its own bucket: a batch whose rows must stay together (P x K
  intents, all in-batch pairs) then pays for its long utterances only in the group that holds them (BANKING77
  batches of 32 at max length 48: 1,024 instead of 1,536 padded tokens with 2 groups).

  Returns ``(order, groups)``: row r of the concatenated groups holds ``sequences[order[r]]``; rows past
  ``len(sequences)`` (``order`` has only ``len(sequences)`` entries) are padding, always at the end.
  """
  if batch_size % groups:
    raise ValueError(f"batch_size={batch_size} does not split into {groups} length groups")
  rows = batch_size // groups
  order = np.argsort([len(s) for s in sequences], kind="stable")
  out = []
  for g in range(groups):
    out.append(pad_to_bucket([sequences[i] for i in order[g * rows : (g + 1) * rows]], buckets, pad_id, rows))
  return order, out


def pack_rows(sequences: Sequence[Any], length: int, row_multiple: int) -> dict[str, np.ndarray]:
  """Packs ``sequences`` (token id lists or [n, H] state rows) several to a row of ``length`` tokens, first fit
  by decreasing length (``encoders.packing``): ``ids`` [R, length(, H)] (zero-padded), ``owner`` [R, length] (the
  index of the sequence each token belongs to, -1 for padding) and ``offsets`` [R, length] (each token's index
  within its sequence). R, the rows used rounded up to a multiple of ``row_multiple``, takes few values, so few
  programs compile. BANKING77 batches of 32 (mean 15.8 tokens) carry 34-50% real tokens as length-bucketed rows
  and ~90% packed into rows of 48."""
  order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))
  free: list[int] = []  # tokens left per row
  placed: list[list[int]] = []
  for i in order:
    n = len(sequences[i])
    if n > length:
      raise ValueError(f"sequence {i} has {n} tokens, longer than the packed row length {length}")
    row = next((r for r, left in enumerate(free) if left >= n), None)
    if row is None:
      free.append(length)
      placed.append([])
      row = len(free) - 1
    free[row] -= n
    placed[row].append(i)
  rows = max(row_multiple, -(-len(placed) // row_multiple) * row_multiple)
  states = bool(sequences) and isinstance(sequences[0], np.ndarray) and sequences[0].ndim == 2
  shape = (rows, length, sequences[0].shape[1]) if states else (rows, length)
  packed = np.zeros(shape, sequences[0].dtype if states else np.int32)
  owner = np.full((rows, length), -1, np.int32)
  offsets = np.zeros((rows, length), np.int32)
  for r, members in enumerate(placed):
    start = 0
    for i in members:
      n = len(sequences[i])
      packed[r, start : start + n] = sequences[i]
      owner[r, start : start + n] = i
      offsets[r, start : start + n] = np.arange(n)
      start += n
  return {"ids": packed, "owner": owner, "offsets": offsets}


def packed_starts(owner: np.ndarray, offsets: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
  """Where each of ``count`` packed sequences begins (``pack_rows``'s ``owner`` / ``offsets``): its row and its
  first token's position in that row, [count] each (0, 0 for a sequence not placed: a padding item)."""
  row_of, start_of = np.zeros(count, np.int32), np.zeros(count, np.int32)
  rows, positions = np.nonzero((offsets == 0) & (owner >= 0))
  row_of[owner[rows, positions]], start_of[owner[rows, positions]] = rows, positions
  return row_of, start_of


def batch_side(name: str, sequences: Sequence[Any], buckets: Sequence[int], pad_id: int, batch_size: int,
               pack_length: int = 0, row_multiple: int = 1) -> dict[str, np.ndarray]:
  """One side of a batch, its arrays named ``<name>_*``: ``sequences`` padded to the smallest of ``buckets`` that
  holds the longest (``<name>_ids`` / ``<name>_mask``, [batch_size, bucket]) or, with ``pack_length`` > 0,
  packed several to a row of that length (``<name>_ids`` / ``<name>_owner`` / ``<name>_offsets``, ``pack_rows``).
  ``encoders.packing.encode_side`` turns either into one vector per sequence."""
  if pack_length:
    packed = pack_rows(sequences, pack_length, row_multiple)
    return {f"{name}_{key}": value for key, value in packed.items()}
  padded = pad_to_bucket(sequences, buckets, pad_id, batch_size)
  return {f"{name}_ids": padded["input_ids"], f"{name}_mask": padded["attention_mask"]}


def padded_batcher(sides: dict[str, tuple[Sequence[Sequence[int]], Sequence[int]]], pad_id: int,
                   fields: dict[str, np.ndarray] | None = None, pack_length: int = 0, row_multiple: int = 1):
  """``make_batch(indices, epoch, batch_size)`` for an ``EpochStream``: for each side ``name -> (token id lists,
  buckets)``, the rows at ``indices`` as ``batch_side`` lays them out (padded to a bucket, or packed with
  ``pack_length``); each of ``fields`` (per-item arrays) at ``indices``, zero past them; and ``valid``."""
  def make_batch(indices, epoch, batch_size):
    batch = {"valid": np.arange(batch_size) < len(indices)}
    for side, (ids, buckets) in sides.items():
      batch.update(batch_side(side, [ids[i] for i in indices], buckets, pad_id, batch_size, pack_length,
                              row_multiple))
    for name, values in (fields or {}).items():
      column = np.zeros((batch_size, *values.shape[1:]), values.dtype)
      column[: len(indices)] = values[np.asarray(indices)]
      batch[name] = column
    return batch
  return make_batch


def pair_batcher(context_ids, response_ids, buckets: Sequence[int], pad_id: int, pack_length: int = 0,
                 row_multiple: int = 1):
  """``padded_batcher`` over (context, response) pairs -> ``context_*``, ``response_*`` and ``valid``."""
  return padded_batcher({"context": (context_ids, buckets), "response": (response_ids, buckets)}, pad_id,
                        pack_length=pack_length, row_multiple=row_multiple)
