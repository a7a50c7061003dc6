"""Samplers: property tests (hypothesis) for pair sets and batch plans."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fewshot_nlu.data import samplers

labels_st = st.lists(st.sampled_from("abcde"), min_size=4, max_size=30).filter(lambda l: len(set(l)) >= 2)
label_sets_st = st.lists(st.sets(st.sampled_from("abcdef"), min_size=1, max_size=3), min_size=4,
                         max_size=20)


@settings(max_examples=40, deadline=None)
@given(labels=labels_st, n=st.integers(0, 3), seed=st.integers(0, 1000))
def test_convfit_pairs(labels, n, seed):
  pairs = samplers.convfit_pairs(labels, n, seed)
  same = [labels[a] == labels[b] for a, b in zip(pairs.first, pairs.second)]
  assert list(pairs.positive) == same  # every pair's flag matches its labels
  n_pos = int(pairs.positive.sum())
  expected_pos = sum(c * (c - 1) // 2 for c in np.unique(labels, return_counts=True)[1])
  assert n_pos == expected_pos  # all unordered positive pairs, once each
  assert len(pairs) == n_pos * (1 + 2 * n)  # 2n negatives per positive
  # negatives keep the anchor on its side: (x_i, neg) x n then (neg, x_j) x n after each positive (i, j)
  block = 1 + 2 * n
  for start in range(0, len(pairs), block):
    i, j = pairs.first[start], pairs.second[start]
    assert all(pairs.first[start + 1 : start + 1 + n] == i)
    assert all(pairs.second[start + 1 + n : start + block] == j)
  again = samplers.convfit_pairs(labels, n, seed)
  assert np.array_equal(again.first, pairs.first) and np.array_equal(again.second, pairs.second)


@settings(max_examples=40, deadline=None)
@given(label_sets=label_sets_st, n=st.integers(0, 3), seed=st.integers(0, 1000))
def test_multilabel_pairs(label_sets, n, seed):
  sets = [frozenset(s) for s in label_sets]
  everyone_overlaps = any(all(a & b for b in sets if b is not a) for a in sets)
  if n and everyone_overlaps:
    with pytest.raises(ValueError, match="no negative exists"):
      samplers.multilabel_pairs(label_sets, n, seed)
    return
  pairs = samplers.multilabel_pairs(label_sets, n, seed)
  for a, b, pos in zip(pairs.first, pairs.second, pairs.positive):
    assert pos == bool(sets[a] & sets[b])
    assert a != b or pos
  positives = {(a, b) for a, b, p in zip(pairs.first, pairs.second, pairs.positive) if p}
  assert all((b, a) in positives for a, b in positives)  # both orders
  expected = {(i, j) for i, j in itertools.permutations(range(len(sets)), 2) if sets[i] & sets[j]}
  assert positives == expected
  assert int((~pairs.positive).sum()) == n * len(positives)


def test_positive_subsampling():
  labels = [["a"]] * 20 + [["b"]] * 20
  full = samplers.multilabel_pairs(labels, 1, 0)
  half = samplers.multilabel_pairs(labels, 1, 0, keep_positive_fraction=0.5)
  ratio = half.positive.sum() / full.positive.sum()
  assert 0.35 < ratio < 0.65


@settings(max_examples=40, deadline=None)
@given(labels=st.lists(st.sampled_from("abcdefg"), min_size=6, max_size=60), p=st.integers(1, 4),
       k=st.integers(1, 4), seed=st.integers(0, 100), epoch=st.integers(0, 3))
def test_class_balanced_batches(labels, p, k, seed, epoch):
  if p > len(set(labels)):
    with pytest.raises(ValueError, match="classes"):
      samplers.ClassBalancedBatches(tuple(labels), p, k, seed)
    return
  plan = samplers.ClassBalancedBatches(tuple(labels), p, k, seed)
  batches = plan.batches(epoch)
  assert batches, "at least one batch per epoch"
  for batch in batches:
    assert len(batch) == p * k
    groups = [batch[g * k : (g + 1) * k] for g in range(p)]
    classes = [{labels[i] for i in g} for g in groups]
    assert all(len(c) == 1 for c in classes)  # each group is one class
    assert len({next(iter(c)) for c in classes}) == p  # P distinct classes
  assert all(np.array_equal(a, b) for a, b in zip(batches, plan.batches(epoch)))


@settings(max_examples=30, deadline=None)
@given(labels=st.lists(st.sampled_from("abcd"), min_size=4, max_size=40), b=st.integers(1, 5),
       seed=st.integers(0, 100))
def test_per_label_batches(labels, b, seed):
  plan = samplers.PerLabelBatches(tuple(labels), b, seed=seed)
  classes = sorted(set(labels))
  counts = {c: labels.count(c) for c in classes}
  batches = plan.batches(0)
  assert len(batches) == -(-max(counts.values()) // b)
  for batch in batches:
    got = [labels[i] for i in batch]
    assert got == [c for c in classes for _ in range(b)]  # b of each label, labels in order
  # within an epoch, the largest label's items are each seen exactly once (if divisible)
  biggest = max(classes, key=lambda c: counts[c])
  if counts[biggest] % b == 0:
    seen = [i for batch in batches for i in batch if labels[i] == biggest]
    assert sorted(seen) == [i for i, l in enumerate(labels) if l == biggest]
