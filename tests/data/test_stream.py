"""``data.stream.EpochStream``: deterministic and resumable mid-epoch (property tests with hypothesis), over a
batch plan too."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fewshot_nlu.data import samplers
from fewshot_nlu.data.stream import EpochStream


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 30), batch=st.integers(1, 7), stop=st.integers(0, 20), seed=st.integers(0, 50))
def test_stream_resumes_mid_epoch_with_the_remaining_items(n, batch, stop, seed):
  make = lambda idx, epoch, size: {"idx": np.asarray(idx), "epoch": epoch}
  total = 2 * -(-n // batch)  # two epochs
  stop = min(stop, total)
  straight = EpochStream(n, batch, make, seed)
  expected = [next(straight)["idx"].tolist() for _ in range(total)]
  first = EpochStream(n, batch, make, seed)
  got = [next(first)["idx"].tolist() for _ in range(stop)]
  resumed = EpochStream(n, batch, make, seed)
  resumed.set_state(first.get_state())
  got += [next(resumed)["idx"].tolist() for _ in range(total - stop)]
  assert got == expected
  epoch0 = sorted(i for b in expected[: total // 2] for i in b)
  assert epoch0 == list(range(n))  # one epoch visits every item exactly once


def test_stream_over_a_plan():
  plan = samplers.ClassBalancedBatches(tuple("aabbccdd" * 2), p=2, k=2, seed=1)
  stream = EpochStream(16, 4, lambda idx, e, b: {"idx": idx}, plan=plan)
  assert stream.total_steps(3) == sum(len(plan.batches(e)) for e in range(3))
  first = [next(stream)["idx"] for _ in range(stream.total_steps(1))]
  assert all(np.array_equal(a, b) for a, b in zip(first, plan.batches(0)))
  assert stream.epoch == 1 and stream.batch == 0


def test_stream_is_deterministic_and_resumable():
  make = lambda idx, epoch, b: {"idx": np.pad(idx, (0, b - len(idx)), constant_values=-1)}
  a = EpochStream(10, 4, make, seed=3)
  seen = [next(a)["idx"] for _ in range(7)]  # 3 steps per epoch: crosses two epoch boundaries
  assert sorted(np.concatenate(seen[:3])[np.concatenate(seen[:3]) >= 0]) == list(range(10))
  b = EpochStream(10, 4, make, seed=3)
  b.set_state(json.loads(json.dumps(EpochStream(10, 4, make, seed=3).get_state())))
  for _ in range(4):
    next(b)
  c = EpochStream(10, 4, make, seed=3)
  c.set_state(b.get_state())
  np.testing.assert_array_equal(next(c)["idx"], seen[4])
  with pytest.raises(ValueError, match="batch_size"):
    EpochStream(10, 5, make, seed=3).set_state(a.get_state())
