"""The one inference loop behind every encoder: length-sorted, bucket-padded batches through a jitted function.

``encode_bucketed`` is what ``SentenceEncoder.encode`` (pooled vectors), ``SpanEncoder.encode`` (span vectors)
and ``QAIDModel.represent`` (token matrices for late interaction) share:

  1. the sequences are sorted by token count, longest first (stable, so ties keep their input order), and cut
     into batches of ``batch_size``: a batch then holds sequences of similar length;
  2. each batch is padded to the smallest of ``buckets`` that holds its longest sequence, and its batch
     dimension to ``batching.row_bucket``: ``batch_size``, or for a last batch of fewer rows the smallest power
     of two that holds them: one utterance runs as one row, not as ``batch_size`` rows of padding (a chatbot's
     latency). A short batch of 2 or more rows pads its length to ``batching.coarse_buckets`` (multiples of 8):
     at most ``len(buckets) x 2 + len(coarse) x log2(batch_size)`` programs compile;
  3. the function runs on each padded batch and its outputs come back to the host at once;
  4. the real rows of each output (padding rows dropped) are written back in the original input order.

Outputs are either fixed per-row arrays (``out``: one ``jax.ShapeDtypeStruct`` of the per-row shape, or a
tuple of them matching the function's outputs), each trailing axis cut to what the output and the per-row shape
share (so a [B, bucket, D] token matrix fits an [N, width, D] result whatever the bucket), or ragged per-row
arrays (``row_sizes``): row i keeps the first ``row_sizes[i]`` entries of its outputs' first per-row axis.
"""

from __future__ import annotations

import functools
import operator
from typing import Any, Callable, Sequence

import jax
import numpy as np

from fewshot_nlu import console
from fewshot_nlu.data import batching

# fn(batch, rows): ``batch`` is ``pad_to_bucket``'s {"input_ids", "attention_mask"} of [row_bucket, bucket];
# ``rows`` are the input indices of its real rows (the first ``len(rows)``); returns an array or a tuple of
# arrays, each [rows padded, ...].
BatchFn = Callable[[dict[str, np.ndarray], np.ndarray], Any]


def encode_bucketed(token_ids: Sequence[Sequence[int]], fn: BatchFn, *, pad_id: int, buckets: Sequence[int],
                    batch_size: int, out: Any = None, row_sizes: Sequence[int] | None = None,
                    show_progress: bool = False, desc: str = "encode") -> Any:
  """Runs ``fn`` over ``token_ids`` in length-sorted, bucket-padded batches (see the module docstring).

  Args:
    token_ids: one token id list per input, each at most ``buckets[-1]`` long.
    fn: the per-batch function, usually jitted: ``fn(batch, rows)`` -> an array or a tuple of arrays, each
      [rows padded, ...] (rows past ``len(rows)`` are padding and dropped).
    pad_id: the padding token id.
    buckets: the padded lengths in use, ascending (``batching.length_buckets``).
    batch_size: rows per call of ``fn`` (padding included; a last, smaller batch pads to ``batching.row_bucket``).
    out: fixed outputs: the per-row ``jax.ShapeDtypeStruct`` (or a tuple of them, as ``fn`` returns).
    row_sizes: ragged outputs instead: per input, how many entries of the first per-row axis it keeps.
    show_progress: a tqdm bar over the batches.
    desc: the bar's label.

  Returns:
    With ``out``: arrays [len(token_ids), *shape] (zero where ``fn``'s output is shorter), structured as
    ``out``. With ``row_sizes``: a list with, per input, its outputs (structured as ``fn``'s) sliced to
    ``[:row_sizes[i]]``. Both in input order; ``fn`` is not called for an empty input.
  """
  if (out is None) == (row_sizes is None):
    raise ValueError("give exactly one of out (fixed per-row shapes) and row_sizes (ragged rows)")
  if row_sizes is not None and len(row_sizes) != len(token_ids):
    raise ValueError(f"{len(row_sizes)} row_sizes for {len(token_ids)} inputs")
  order = np.argsort([-len(t) for t in token_ids], kind="stable")
  if out is not None:
    results = jax.tree.map(lambda s: np.zeros((len(token_ids), *s.shape), s.dtype), out)
  else:
    results = [None] * len(token_ids)
  coarse = batching.coarse_buckets(buckets)
  for start in console.bar(range(0, len(order), batch_size), desc=desc, unit="batch", disable=not show_progress):
    rows = order[start : start + batch_size]
    padded_rows = batching.row_bucket(len(rows), batch_size)
    batch = batching.pad_to_bucket([token_ids[i] for i in rows], coarse if 1 < padded_rows < batch_size else buckets,
                                   pad_id, padded_rows)
    # Synchronous on purpose: with 2 CPU cores, letting the host run ahead (async dispatch) competes with
    # XLA's compute threads and measured ~10% slower in bench/encode.py.
    outputs = jax.tree.map(np.asarray, fn(batch, rows))
    if out is not None:
      jax.tree.map(functools.partial(_scatter, rows=rows), results, outputs)
    else:
      for r, i in enumerate(rows):
        results[i] = jax.tree.map(operator.itemgetter(np.s_[r, : row_sizes[i]]), outputs)
  return results


def _scatter(result: np.ndarray, output: np.ndarray, rows: np.ndarray) -> None:
  """``result[rows] = output[:len(rows)]`` on the per-row region the two share."""
  if result.ndim != output.ndim:
    raise ValueError(f"fn returned {output.ndim}-d outputs for {result.ndim}-d results")
  shared = tuple(slice(0, min(a, b)) for a, b in zip(result.shape[1:], output.shape[1:]))
  result[(rows, *shared)] = output[(slice(0, len(rows)), *shared)]
