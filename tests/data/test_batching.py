"""``data.batching``: length-grouped padded batches and packed rows (first fit decreasing)."""

import numpy as np
import pytest

from fewshot_nlu.data import batching


def test_pad_in_length_groups_sorts_and_pads_each_group_to_its_bucket():
  seqs = [[1] * n for n in (30, 3, 12, 5, 40)]
  order, groups = batching.pad_in_length_groups(seqs, 2, (8, 16, 32, 48), pad_id=0, batch_size=6)
  assert list(order) == [1, 3, 2, 0, 4]
  assert [g["input_ids"].shape for g in groups] == [(3, 16), (3, 48)]
  lengths = np.concatenate([g["attention_mask"].sum(1) for g in groups])
  np.testing.assert_array_equal(lengths, [3, 5, 12, 30, 40, 0])  # padding row last
  with pytest.raises(ValueError, match="does not split into 4"):
    batching.pad_in_length_groups(seqs, 4, (8, 48), 0, 6)


def test_pack_rows_places_every_sequence_once_first_fit_decreasing():
  sequences = [[1] * 5, [2] * 9, [3] * 3, [4] * 6, [5] * 2]
  packed = batching.pack_rows(sequences, 10, row_multiple=4)
  assert packed["ids"].shape == packed["owner"].shape == packed["offsets"].shape == (4, 10)
  # decreasing: 9 -> row 0; 6 -> row 1; 5 -> row 2; 3 -> row 1 (first with room); 2 -> row 2
  assert packed["owner"][:3].tolist() == [[1] * 9 + [-1], [3] * 6 + [2] * 3 + [-1], [0] * 5 + [4] * 2 + [-1] * 3]
  assert (packed["owner"][3] == -1).all()
  for i, seq in enumerate(sequences):
    assert packed["ids"][packed["owner"] == i].tolist() == seq
    assert packed["offsets"][packed["owner"] == i].tolist() == list(range(len(seq)))
  with pytest.raises(ValueError, match="longer than the packed row length 4"):
    batching.pack_rows(sequences, 4, row_multiple=1)
