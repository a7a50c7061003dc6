"""encoders.inference.encode_bucketed with a fake per-batch function: order, bucket padding, outputs, empty."""

import jax
import numpy as np
import pytest

from fewshot_nlu.data import batching
from fewshot_nlu.encoders import inference

BUCKETS = (4, 8, 16)
PAD = 0
# Token ids 1 + input index, so a row's output says which input it came from; lengths 1..13, in no order.
LENGTHS = [3, 13, 1, 7, 5, 5, 9, 2, 11, 4]
TOKEN_IDS = [[i + 1] * n for i, n in enumerate(LENGTHS)]


class FakeFn:
  """Records what each call sees; returns (input id per row [B, 2], token matrix [B, L, 3] with the token ids)."""

  def __init__(self):
    self.calls = []

  def __call__(self, batch, rows):
    ids, mask = batch["input_ids"], batch["attention_mask"]
    self.calls.append((ids.shape, mask.shape, list(rows), mask.sum(axis=1)))
    first = ids[:, :1].astype(np.float32)
    return np.concatenate([first, 2 * first], axis=1), np.repeat(ids[..., None] * mask[..., None], 3, axis=-1)


def test_fixed_outputs_in_input_order_and_bucketed_batches():
  fn = FakeFn()
  vectors, matrices = inference.encode_bucketed(
      TOKEN_IDS, fn, pad_id=PAD, buckets=BUCKETS, batch_size=4,
      out=(jax.ShapeDtypeStruct((2,), np.float32), jax.ShapeDtypeStruct((16, 3), np.int32)))
  first = np.arange(1, len(LENGTHS) + 1, dtype=np.float32)
  np.testing.assert_array_equal(vectors, np.stack([first, 2 * first], axis=1))
  assert vectors.dtype == np.float32 and matrices.dtype == np.int32 and matrices.shape == (10, 16, 3)
  for i, n in enumerate(LENGTHS):
    np.testing.assert_array_equal(matrices[i, :n], i + 1)
    np.testing.assert_array_equal(matrices[i, n:], 0)
  # Longest first, ties in input order; every batch [batch_size, bucket of its longest row], the last one's rows
  # padded only to the next power of two (2 rows: 2, not 4) and its length to a coarse bucket (8, not 4).
  assert [rows for _, _, rows, _ in fn.calls] == [[1, 8, 6, 3], [4, 5, 9, 0], [7, 2]]
  assert [shape for shape, _, _, _ in fn.calls] == [(4, 16), (4, 8), (2, 8)]
  for shape, mask_shape, rows, lengths in fn.calls:
    buckets = BUCKETS if shape[0] in (1, 4) else batching.coarse_buckets(BUCKETS)
    assert mask_shape == shape and shape[1] == batching.bucket_for(max(LENGTHS[r] for r in rows), buckets)
    np.testing.assert_array_equal(lengths, [LENGTHS[r] for r in rows] + [0] * (shape[0] - len(rows)))


@pytest.mark.parametrize("rows,batch_size,padded", [(1, 32, 1), (2, 32, 2), (3, 32, 4), (5, 32, 8), (17, 32, 32),
                                                    (32, 32, 32), (7, 6, 6), (0, 8, 1)])
def test_a_short_batch_pads_its_rows_to_the_next_power_of_two(rows, batch_size, padded):
  assert batching.row_bucket(rows, batch_size) == padded


def test_coarse_buckets_keep_the_multiples_of_eight_and_the_last():
  assert batching.coarse_buckets((8, 10, 12, 14, 16, 18, 24, 32, 40, 48)) == (8, 16, 24, 32, 40, 48)
  assert batching.coarse_buckets((4, 8, 16, 20)) == (8, 16, 20)


def test_fixed_outputs_cut_to_the_shared_width():
  # Results narrower than the bucket (and wider than a short batch's bucket) keep the overlap, zeros past it.
  fn = FakeFn()
  _, matrices = inference.encode_bucketed(
      TOKEN_IDS, fn, pad_id=PAD, buckets=BUCKETS, batch_size=4,
      out=(jax.ShapeDtypeStruct((2,), np.float32), jax.ShapeDtypeStruct((6, 3), np.int32)))
  for i, n in enumerate(LENGTHS):
    np.testing.assert_array_equal(matrices[i, : min(n, 6)], i + 1)
    np.testing.assert_array_equal(matrices[i, min(n, 6):], 0)


def test_ragged_outputs_sliced_per_row():
  fn = FakeFn()
  rows = inference.encode_bucketed(TOKEN_IDS, fn, pad_id=PAD, buckets=BUCKETS, batch_size=3,
                                   row_sizes=LENGTHS)
  assert len(rows) == len(LENGTHS) and [shape[0] for shape, _, _, _ in fn.calls] == [3, 3, 3, 1]  # 10 = 3+3+3+1
  for i, (vector, matrix) in enumerate(rows):
    np.testing.assert_array_equal(vector, [i + 1, 2 * (i + 1)][: LENGTHS[i]])
    assert matrix.shape == (LENGTHS[i], 3)
    np.testing.assert_array_equal(matrix, i + 1)


def test_empty_input_calls_nothing():
  fn = FakeFn()
  vectors = inference.encode_bucketed([], fn, pad_id=PAD, buckets=BUCKETS, batch_size=4,
                                      out=jax.ShapeDtypeStruct((5,), np.float32))
  assert vectors.shape == (0, 5) and vectors.dtype == np.float32
  assert inference.encode_bucketed([], fn, pad_id=PAD, buckets=BUCKETS, batch_size=4, row_sizes=[]) == []
  assert fn.calls == []


def test_needs_exactly_one_output_kind():
  with pytest.raises(ValueError, match="exactly one"):
    inference.encode_bucketed(TOKEN_IDS, FakeFn(), pad_id=PAD, buckets=BUCKETS, batch_size=4)
  with pytest.raises(ValueError, match="row_sizes"):
    inference.encode_bucketed(TOKEN_IDS, FakeFn(), pad_id=PAD, buckets=BUCKETS, batch_size=4, row_sizes=[1])
