"""Response selection (``evaluation.response_selection``): true-response ranks and R@k / MRR by hand."""

import numpy as np

from fewshot_nlu.evaluation.response_selection import response_selection, true_response_ranks


def test_true_response_ranks_and_top_k():
  q = np.eye(3)
  r = np.array([[1.0, 0.9, 0], [0.9, 0.5, 0], [0, 0, -1]])  # query 1 prefers r0; query 2's true response is worst
  np.testing.assert_array_equal(true_response_ranks(q, r, group=3), [1, 2, 3])

  class Oracle:  # text "t i" -> e_i: every query finds its response
    def __call__(self, texts):
      return np.eye(300, dtype=np.float32)[[int(t.split()[-1]) for t in texts]]
  texts = [f"t {i}" for i in range(250)]
  got = response_selection(Oracle(), texts, texts, group=100)
  assert got == {"r1_at_100": 1.0, "r3_at_100": 1.0, "r10_at_100": 1.0, "mrr": 1.0, "num_eval": 200}
