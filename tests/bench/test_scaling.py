"""bench/scaling.py's HLO collective counter and analytic FLOP formula, on hand-written inputs."""

from __future__ import annotations

import types

from bench import scaling

HLO = """
  %all-reduce.1 = (f32[384]{0}, f32[30522,384]{1,0}) all-reduce(f32[384]{0} %a, f32[30522,384]{1,0} %b), channel_id=1
  %all-gather.2 = bf16[8,64]{1,0} all-gather(bf16[2,64]{1,0} %c), dimensions={0}
  %all-gather-start.3 = (s32[4]{0}, s32[16]{0}) all-gather-start(s32[4]{0} %d), dimensions={0}
  %all-gather-done.3 = s32[16]{0} all-gather-done((s32[4]{0}, s32[16]{0}) %all-gather-start.3)
  %reduce-scatter.4 = f32[2,3]{1,0} reduce-scatter(f32[8,3]{1,0} %e), dimensions={0}
  %add.5 = f32[384]{0} add(f32[384]{0} %f, f32[384]{0} %g)
"""


def test_collective_bytes_sums_result_shapes_per_collective():
  assert scaling.collective_bytes(HLO) == {
      "all-reduce": 4 * (384 + 30522 * 384),
      "all-gather": 2 * 8 * 64 + 4 * (4 + 16) // 2,  # the async start's (operand, result) tuple halved
      "reduce-scatter": 4 * 6,
  }


def test_train_flops_counts_matmuls_attention_and_scores():
  cfg = types.SimpleNamespace(hidden_size=4, intermediate_size=8, num_layers=2)
  seq, batch = 3, 5
  per_sequence = 2 * (8 * 3 * 16 + 4 * 3 * 4 * 8 + 4 * 9 * 4)
  forward = 2 * batch * per_sequence + 2 * 25 * 4
  assert scaling.train_flops(cfg, batch, seq) == {"forward": forward, "train": 3 * forward}
