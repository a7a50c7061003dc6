"""``bench/oos_bots.py``: what counts as out of scope for a bot, and the table from its rows."""

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "bench"))  # bench scripts import their siblings
from bench import oos_bots  # noqa: E402


def _folder(path, texts, labels):
  path.mkdir(parents=True)
  (path / "seq.in").write_text("\n".join(texts) + "\n")
  (path / "label").write_text("\n".join(labels) + "\n")


def test_out_of_scope_is_every_other_intent_and_clinc150s_own_split(tmp_path):
  _folder(tmp_path / "CLINC150" / "test", ["a1", "b1", "c1", "a2"], ["a", "b", "c", "a"])
  _folder(tmp_path / "CLINC150" / "oos" / "test", ["o1", "o2"], ["oos", "oos"])
  _folder(tmp_path / "HWU64" / "test", ["a1", "b1"], ["a", "b"])
  assert oos_bots.out_of_scope_texts("clinc150", "test", {"a"}, str(tmp_path)) == ["b1", "c1", "o1", "o2"]
  assert oos_bots.out_of_scope_texts("hwu64", "test", {"a"}, str(tmp_path)) == ["b1"]


def test_the_table_averages_each_rule_over_seeds(tmp_path, monkeypatch):
  monkeypatch.setattr(oos_bots, "ROWS", tmp_path / "oos_bots.jsonl")
  monkeypatch.setattr(oos_bots, "RESULTS", tmp_path)
  rows = []
  for seed, (kept, loo_kept) in enumerate(((0.9, 0.6), (0.8, 0.5))):
    results = {"test/accuracy": 0.95}
    for rule, k in (("held_out_half", kept), ("leave_one_out", loo_kept)):
      results[f"test/{rule}"] = {"threshold": 0.5, "rows": 9, "in_scope_kept": k, "out_of_scope_rejected": 1 - k,
                                 "accepted_and_right": k - 0.05}
    rows.append({"dataset": "hwu64", "seed": seed, "results": results, "stage2_seconds": 40 + seed,
                 "calibration_seconds": 30, "command": f"python bench/oos_bots.py --cells hwu64:bot --seeds {seed}"})
  (tmp_path / "oos_bots.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  oos_bots.write_table()
  text = (tmp_path / "oos_bots.md").read_text()
  assert "| hwu64 | `held_out_half` | 0.500 | 85.00 ± 7.07 (2) | 15.00 ± 7.07 | 80.00 ± 7.07 | 95.00 ± 0.00 | 40 + 30 |" in text
  assert "| hwu64 | `leave_one_out` | 0.500 | 55.00 ± 7.07 (2) | 45.00 ± 7.07 | 50.00 ± 7.07 |" in text
  assert "- `python bench/oos_bots.py --cells hwu64:bot --seeds 1`" in text
