"""Out-of-scope rejection on small bots: how much new in-scope traffic each calibration keeps, how much of the rest
it turns away, when the team has no development split (the bots of bench/small_bots.py).

For each ``<dataset>:bot`` cell and seed, the bot of ``small_bots.bot_folder`` (one domain, 1-10 examples per
intent) is fitted with ``fewshot_nlu.fit(method="convfit")`` and the shipped defaults, which calibrate the
out-of-scope threshold by ``eval.calibration_rule = "held_out_half"`` (a second Stage 2 on half of each intent's
examples scores the other half); the same model is then calibrated the other way, ``leave_one_out`` (the training
examples left out one at a time under the final encoder: no second training). Each threshold is the 10th
percentile of its scores, aiming to keep 90% of new in-scope utterances. Scored on the dataset's ``valid`` and
``test`` splits, never used to choose anything here:
  * in-scope kept: the share of the bot's own intents' utterances (all of them) scoring at or above the threshold;
  * out-of-scope rejected: the share below it of every other utterance of the split — the dataset's other
    domains / scenarios / intents, and for CLINC150 its out-of-scope split (``oos/<split>``) too;
  * accepted and right: the share of in-scope utterances kept and given their intent.
The rejection score is the shipped one (the nearest training example's cosine for ConvFiT's decision rules).

  python bench/oos_bots.py --cells clinc150:bot,hwu64:bot,banking77:bot --seeds 0,1,2
  python bench/oos_bots.py --table                 # rewrite bench/results/oos_bots.md only

Rows go to ``bench/results/oos_bots.jsonl`` (each with the command that repeats it). One process at a time.
"""

from __future__ import annotations

import argparse
import copy
import json
import pathlib
import statistics
import time

import numpy as np

from runner import REPO, RESULTS, cpu, load_rows, machine, mean_std
from small_bots import BOT, DEFAULT_DATA, FOLDERS, bot_folder, read_raw

ROWS = RESULTS / "oos_bots.jsonl"
CELLS = ("clinc150", "hwu64", "banking77")  # SNIPS's bot is all 7 of its intents: nothing out of scope
RULES = ("held_out_half", "leave_one_out")


def out_of_scope_texts(dataset: str, split: str, intents: set[str], data_dir: str) -> list[str]:
  """Every utterance of ``split`` whose intent is not the bot's, plus CLINC150's out-of-scope ones."""
  raw = pathlib.Path(data_dir) / FOLDERS[dataset]
  texts, labels = read_raw(raw / split)
  outside = [t for t, l in zip(texts, labels) if l not in intents]
  if dataset == "clinc150":
    outside += read_raw(raw / "oos" / split)[0]
  return outside


def run_bot(dataset: str, seed: int, data_dir: str, root: pathlib.Path) -> dict:
  import fewshot_nlu as fn
  from fewshot_nlu.models import rejection
  folder = bot_folder(dataset, seed, data_dir, root / "data")
  texts, labels = read_raw(folder / "train")
  start = time.perf_counter()
  model = fn.fit(texts, labels, method="convfit", workdir=root / f"convfit-{dataset}-{BOT}-seed{seed}",
                 overwrite=True, seed=seed)
  wall = time.perf_counter() - start
  calibrations = {"held_out_half": model.rejection}
  assert "held out" in model.rejection.rule, model.rejection.rule  # the shipped rule ran
  calibrations["leave_one_out"] = copy.copy(model).calibrate_rejection()
  intents = set(json.loads((folder / "traffic.json").read_text()))
  results = {}
  for split in ("valid", "test"):
    in_texts, gold = read_raw(folder / split)
    inside = model.predict(in_texts, neighbours=1)
    outside = model.predict(out_of_scope_texts(dataset, split, intents, data_dir), neighbours=1)
    in_scores = np.array([rejection.score_of(p, model.rejection_score) for p in inside])
    out_scores = np.array([rejection.score_of(p, model.rejection_score) for p in outside])
    right = np.array([p.label == g for p, g in zip(inside, gold)])
    for rule, calibration in calibrations.items():
      kept = in_scores >= calibration.threshold
      results[f"{split}/{rule}"] = {
          "threshold": calibration.threshold, "rows": calibration.rows, "in_scope_kept": float(kept.mean()),
          "out_of_scope_rejected": float((out_scores < calibration.threshold).mean()),
          "accepted_and_right": float((kept & right).mean())}
    results[f"{split}/accuracy"] = float(right.mean())
    results[f"{split}/counts"] = {"in_scope": len(in_texts), "out_of_scope": len(outside)}
  r = model.results
  return {"dataset": dataset, "seed": seed, "results": results, "wall_seconds": round(wall, 1),
          "stage2_seconds": r.get("stage2_seconds"), "calibration_seconds": r.get("rejection_seconds"),
          "held_out_half_accuracy": r.get("held_out_half_accuracy"), "num_pool": len(texts),
          "command": f"python bench/oos_bots.py --cells {dataset}:{BOT} --seeds {seed}",
          "machine": cpu()}


def write_table() -> None:
  rows = load_rows(ROWS)
  lines = ["# Out-of-scope rejection on small bots (bench/oos_bots.py)", "",
           "ConvFiT fitted with `fewshot_nlu.fit`'s defaults on each bot of bench/small_bots.py (no development "
           "split); its threshold calibrated two ways, each the 10th percentile of its scores (aiming to keep 90% "
           "of new in-scope utterances): `held_out_half` (the shipped rule: half of each intent's examples held "
           "out of a second Stage 2) and `leave_one_out` (the training examples under the final encoder). "
           "In-scope kept / out-of-scope rejected (every other utterance of the split: other domains, and "
           "CLINC150's out-of-scope split) / accepted and right, in %, on `test`, mean ± std over seeds (n); "
           "fit s: Stage 2 + calibration (median). " + machine(rows), "",
           "| bot | rule | threshold | in-scope kept | out-of-scope rejected | accepted and right | accuracy, no rejection | fit s (Stage 2 + calibration) |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
  for dataset in CELLS:
    rs = [r for r in rows if r["dataset"] == dataset]
    if not rs:
      continue
    for rule in RULES:
      got = [r["results"][f"test/{rule}"] for r in rs]
      fit = (f"{statistics.median(r['stage2_seconds'] for r in rs):.0f} + "
             f"{statistics.median(r['calibration_seconds'] for r in rs):.0f}") if rule == RULES[0] else "–"
      lines.append(f"| {dataset} | `{rule}` | {statistics.mean(g['threshold'] for g in got):.3f} | "
                   f"{mean_std([g['in_scope_kept'] for g in got])} ({len(got)}) | "
                   f"{mean_std([g['out_of_scope_rejected'] for g in got])} | "
                   f"{mean_std([g['accepted_and_right'] for g in got])} | "
                   f"{mean_std([r['results']['test/accuracy'] for r in rs])} | {fit} |")
  lines += ["", "## Commands", ""] + [f"- `{c}`" for c in dict.fromkeys(r["command"] for r in rows)]
  notes = RESULTS / "oos_bots_notes.md"
  if notes.exists():
    lines += ["", notes.read_text().strip()]
  (RESULTS / "oos_bots.md").write_text("\n".join(lines) + "\n")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--cells", default=",".join(f"{d}:{BOT}" for d in CELLS))
  parser.add_argument("--seeds", default="0,1,2")
  parser.add_argument("--data-dir", default=DEFAULT_DATA)
  parser.add_argument("--workdirs", default=str(REPO / "runs" / "bench_oos_bots"))
  parser.add_argument("--table", action="store_true", help="only rewrite bench/results/oos_bots.md")
  args = parser.parse_args()
  if not args.table:
    for cell in args.cells.split(","):
      dataset, kind = cell.split(":")
      if kind != BOT or dataset not in CELLS:
        raise SystemExit(f"{cell}: cells are <dataset>:{BOT}, dataset one of {CELLS}")
      for seed in map(int, args.seeds.split(",")):
        if any(r["dataset"] == dataset and r["seed"] == seed for r in load_rows(ROWS)):
          continue
        row = run_bot(dataset, seed, args.data_dir, pathlib.Path(args.workdirs))
        with open(ROWS, "a", encoding="utf-8") as f:
          f.write(json.dumps(row) + "\n")
        t = row["results"]["test/held_out_half"]
        print(f"{dataset} seed {seed}: kept {100 * t['in_scope_kept']:.1f}, rejected "
              f"{100 * t['out_of_scope_rejected']:.1f} (held_out_half)", flush=True)
  write_table()


if __name__ == "__main__":
  main()
