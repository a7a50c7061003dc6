"""BERT masking (``data.masking``): round 15% of the real tokens, split 80 / 10 / 10, against counts."""

import jax
import jax.numpy as jnp
import numpy as np

from fewshot_nlu.data import masking

MASK, CLS, SEP, PAD, VOCAB = 4, 2, 3, 0, 50


def _token_batch(rows=400, length=24, seed=0):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(3, length + 1, rows)
  ids = np.full((rows, length), PAD, np.int32)
  for r, n in enumerate(lengths):
    ids[r, :n] = np.concatenate([[CLS], rng.integers(5, VOCAB, n - 2), [SEP]])
  return ids, (ids != PAD).astype(np.int32), lengths


def test_bert_mask_chooses_round_15_percent_of_real_tokens_and_splits_80_10_10():
  ids, mask, lengths = _token_batch()
  out = masking.bert_mask(jax.random.key(0), jnp.asarray(ids), jnp.asarray(mask), mask_id=MASK, vocab_size=VOCAB,
                          special_ids=(CLS, SEP, PAD))
  corrupted, positions, targets, weights = map(np.asarray, out)
  assert positions.shape == (len(ids), masking.max_predictions(ids.shape[1])) == (len(ids), 4)
  kinds = {"mask": 0, "random": 0, "same": 0}
  for r, n in enumerate(lengths):
    real = n - 2
    chosen = positions[r][weights[r] > 0]
    assert len(chosen) == max(1, round(0.15 * real)) and len(set(chosen)) == len(chosen)
    assert all(1 <= p <= n - 2 for p in chosen)  # never [CLS], [SEP] or padding
    np.testing.assert_array_equal(targets[r][weights[r] > 0], ids[r, chosen])
    untouched = np.setdiff1d(np.arange(ids.shape[1]), chosen)
    np.testing.assert_array_equal(corrupted[r, untouched], ids[r, untouched])
    for p in chosen:
      kinds["mask" if corrupted[r, p] == MASK else "same" if corrupted[r, p] == ids[r, p] else "random"] += 1
  total = sum(kinds.values())
  assert abs(kinds["mask"] / total - 0.8) < 0.06
  assert abs(kinds["random"] / total - 0.1 * (1 - 1 / VOCAB)) < 0.05  # a random token may equal the original
  assert abs(kinds["same"] / total - 0.1) < 0.05
