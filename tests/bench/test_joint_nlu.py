"""bench/joint_nlu.py's Commands section: one line per variant and options, cells and seeds joined, NLU++ folds as
ranges that ``--cells`` reads back."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "bench"))  # bench scripts import their siblings

from bench import joint_nlu  # noqa: E402


def _command(cell: str, seed: int, variant: str = "learned", extra: str = "") -> str:
  return f"python bench/joint_nlu.py --cells {cell} --seeds {seed} --variant {variant}{extra}"


def test_commands_join_cells_and_seeds_and_fold_runs_read_back():
  rows = [_command(c, s) for c in ("snips:k10", "snips:k5") for s in (0, 1, 2)]
  rows += [_command("snips:n64", 0), _command("snips:k10", 0, "retrieval")]
  rows += [_command(f"nlupp-hotels:f{k}", 0, "learned", " --span-encoder runs/x") for k in range(20)]
  rows += [_command(f"nlupp-banking:f{k}", 0, "learned", " --span-encoder runs/x") for k in (0, 1, 3)]
  assert joint_nlu.grouped_commands(rows) == [
      _command("snips:k10,snips:k5", "0,1,2"), _command("snips:n64", 0), _command("snips:k10", 0, "retrieval"),
      _command("nlupp-hotels:f0-19,nlupp-banking:f0,nlupp-banking:f1,nlupp-banking:f3", 0, "learned",
               " --span-encoder runs/x")]
  cells = [f"nlupp-hotels:f{k}" for k in range(20)] + ["snips:k5"]
  assert joint_nlu.expand_cells(joint_nlu.compress_cells(cells)) == cells
