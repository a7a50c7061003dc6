"""Retriever on the shipped MiniLM-L6, CPU: SNIPS 5-shot slot filling over the 7 test domains (Retriever^frz,
Retriever, Proto; Table 2) and the CLINC (n_c, n_i) = (10, 10) 5-shot intent table (Table 1), next to the
paper's BERT-base numbers.

  python bench/retriever.py                   # the default plan (resumable: finished runs are not repeated)
  python bench/retriever.py --part snips      # only SNIPS (or --part clinc)
  python bench/retriever.py --table           # rewrite the Markdown table only

Every run is ``python -m fewshot_nlu.main`` in its own process, one at a time; rows go to
``bench/results/retriever.jsonl`` and the tables to ``bench/results/retriever.md``. The SNIPS runs use
``configs/retriever_snips.py``'s CPU protocol (its docstring says exactly how it is scaled down from App. A.1).
"""

from __future__ import annotations

import argparse
import pathlib

from runner import REPO, RESULTS, finish_table, load_rows, run_main

ROWS = RESULTS / "retriever.jsonl"
DOMAINS = ("GetWeather", "PlayMusic", "AddToPlaylist", "RateBook", "SearchScreeningEvent", "BookRestaurant",
           "SearchCreativeWork")
SNIPS = {"frz": "Retriever^frz", "cpu": "Retriever", "proto": "Proto"}
# Table 2 (BERT-base, 5-shot, 100 episodes per domain): GW PM ATP RB FSE BR SCW, average.
PAPER_SNIPS = {"Retriever^frz": (63.39, 46.01, 51.11, 79.65, 62.42, 62.13, 33.85, 56.94),
               "Retriever": (82.95, 61.74, 71.75, 81.65, 73.10, 79.54, 51.35, 71.72),
               "Proto": (64.47, 53.97, 54.64, 73.37, 42.89, 62.48, 27.76, 54.23)}


def run_snips(args, runs_dir: pathlib.Path) -> None:
  for variant in SNIPS:
    name = f"snips-{variant}"
    row = run_main(name, 0, [f"--config=configs/retriever_snips.py:{variant}", "--config.seed=0", *args.extra],
                   runs_dir / name, ROWS)
    if row:
      print(f"  {name}: average F1 {row['results']['average_f1']:.2f}  wall {row['wall_seconds']:.0f}s", flush=True)


def snips_table(rows: dict) -> list[str]:
  abbreviations = ("GW", "PM", "ATP", "RB", "FSE", "BR", "SCW")
  lines = ["## SNIPS 5-shot slot filling, F1 per test domain (Table 2)", "",
           "| model | " + " | ".join(abbreviations) + " | Average F1 |", "|---|" + "---:|" * 8]
  times = ["", "Wall-clock per run (all 7 folds: training, development evaluations, threshold search, test; "
           "tokenisation and compiles included):", ""]
  for variant, label in SNIPS.items():
    row = rows.get(f"snips-{variant}")
    if row is None:
      continue
    f1 = {fold["test_domain"]: fold["f1"] for fold in row["results"]["folds"]}
    cells = [f"{f1[d]:.2f}" if d in f1 else "–" for d in DOMAINS]
    lines.append(f"| {label} (MiniLM-L6, ours) | " + " | ".join(cells) + f" | {row['results']['average_f1']:.2f} |")
    times.append(f"- {label}: {row['wall_seconds']:.0f} s")
  for label, values in PAPER_SNIPS.items():
    lines.append(f"| {label} (BERT-base, paper) | " + " | ".join(f"{v:.2f}" for v in values) + " |")
  return lines + times


# Table 1, (n_c, n_i) = (10, 10), 5-shot, BERT-base: all (tgt, src, avg), balance (tgt, src, avg), tgt (tgt).
CLINC = {"clinc-frz": ("Retriever^frz (initial encoder)", (8.24, 54.76, 39.25, 22.09, 25.29, 24.22, 37.93)),
         "clinc-pretrain": ("Retriever, pre-trained on src", (62.69, 97.08, 85.62, 75.93, 95.44, 88.94, 88.53)),
         "clinc-finetune": ("Retriever, fine-tuned on tgt with src data",
                            (69.51, 97.04, 87.86, 84.95, 95.41, 91.92, 90.78))}


def run_clinc(args, runs_dir: pathlib.Path) -> None:
  export = runs_dir / "clinc-pretrain" / "export"
  shown = export.relative_to(REPO) if export.is_relative_to(REPO) else export
  plan = [("clinc-frz", ["--config=configs/retriever_clinc.py:frz"]),
          ("clinc-pretrain", ["--config=configs/retriever_clinc.py:pretrain"]),
          ("clinc-finetune", ["--config=configs/retriever_clinc.py:finetune_tgt_src", f"--config.model.name={shown}"])]
  for name, config_args in plan[: args.clinc_runs]:
    row = run_main(name, 0, [*config_args, "--config.seed=0", f"--config.train.max_steps={args.clinc_steps}",
                             *args.extra], runs_dir / name, ROWS)
    if row:
      print(f"  {name}: {row['results']['accuracy']}  wall {row['wall_seconds']:.0f}s", flush=True)


def clinc_table(rows: dict) -> list[str]:
  lines = ["", "## CLINC intents, (n_c, n_i) = (10, 10), 5-shot: accuracy (Table 1)", "",
           "One sample of the source/target split (seed 0; the paper averages 3). support_set = all: every source "
           "training example + the target shots; balance: 5 examples of every intent; tgt: the target shots, "
           "scored on target test utterances only.", "",
           "| model | all: tgt | all: src | all: avg | balance: tgt | balance: src | balance: avg | tgt: tgt "
           "| wall (s) |",
           "|---|" + "---:|" * 8]
  for name, (label, paper) in CLINC.items():
    row = rows.get(name)
    if row is not None:
      a = row["results"]["accuracy"]
      cells = [a["all"]["tgt"], a["all"]["src"], a["all"]["avg"], a["balance"]["tgt"], a["balance"]["src"],
               a["balance"]["avg"], a["tgt"]["tgt"]]
      lines.append(f"| {label} (MiniLM-L6, ours) | " + " | ".join(f"{v:.2f}" for v in cells)
                   + f" | {row['wall_seconds']:.0f} |")
    lines.append(f"| {label} (BERT-base, paper) | " + " | ".join(f"{v:.2f}" for v in paper) + " | |")
  return lines


def write_table() -> None:
  rows = {r["name"]: r for r in load_rows(ROWS)}  # the latest row of each run
  lines = ["# Retriever on MiniLM-L6 (CPU)", "",
           "Generated by `python bench/retriever.py` from `bench/results/retriever.jsonl` (one JSON row per run "
           "with its exact command); one seed. Per-fold details (thresholds chosen, best step, timings) are in "
           "each run's `fold<k>/results.json`.", ""]
  lines += snips_table(rows) + clinc_table(rows)
  finish_table(lines, list(rows.values()), "retriever")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--part", choices=("all", "snips", "clinc"), default="all")
  parser.add_argument("--clinc-steps", type=int, default=10, help="training steps of the CLINC runs")
  parser.add_argument("--clinc-runs", type=int, default=3, help="how many of the CLINC runs (frz, pretrain, "
                      "finetune) to make")
  parser.add_argument("--runs", default=str(REPO / "runs" / "bench_retriever"), help="work directories")
  parser.add_argument("--table", action="store_true", help="only rewrite bench/results/retriever.md")
  parser.add_argument("extra", nargs="*", help="more --config.* overrides for every run")
  args = parser.parse_args()
  if not args.table and args.part in ("all", "snips"):
    run_snips(args, pathlib.Path(args.runs))
  if not args.table and args.part in ("all", "clinc"):
    run_clinc(args, pathlib.Path(args.runs))
  write_table()


if __name__ == "__main__":
  main()
