"""ConvFiT on the shipped MiniLM, CPU: k-NN with the untouched encoder, the MLP baseline, Stage 2 (OCL, COS),
Stage 1 + Stage 2, and the paper's pair sampling vs the fast P x K mode; full test sets, 10-shot.

  python bench/convfit.py                       # the whole plan (hours on 2 cores; resumable)
  python bench/convfit.py --only b77-ocl,hwu-cos --seeds 0   # some runs
  python bench/convfit.py --table               # rewrite bench/results/convfit.md from what has run

Every run is ``python -m fewshot_nlu.main`` in its own process on a config of configs/ with the overrides
listed in the table, so each row is reproducible with the command it prints. A finished run (its
``results.json`` in ``--runs-dir``) is not repeated; rows accumulate in ``bench/results/convfit.jsonl`` and the
Markdown table is rewritten after every run. Times: fit is ``stage2_seconds``, the Stage 2 train loop (compiles
included), plus ``classifier_seconds`` where a classifier is trained (logistic regression, MLP: pool encoding and
the fit), ``wall`` the whole process (data, model load, fit, encoding the pool and the full test set).
Runs go one at a time: two at once on 2 cores ruin both timings.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics

from runner import REPO, RESULTS, finish_table, mean_std, run_main
from runner import load_rows as runner_rows

DATASETS = {"b77": "banking77", "clinc": "clinc150", "hwu": "hwu64"}
STAGE1_OVERRIDES = ("--config.train.batch_size=64", "--config.train.max_steps=80", "--config.eval.max_pairs=2000")
# Paper numbers, ROB+S1+S2-OCL 10-shot (Table 2 / Table 5, epoch 2) and ROB+S1 + MLP (Table 2).
PAPER = {"banking77": 87.38, "clinc150": 92.89, "hwu64": 85.32}

# The rows here compare variants of the paper's method as it was shipped until 2026-11-25: the paper's 1-NN on
# padded rows in the projected space, unless a variant sets these fields itself (today's shipped ConvFiT, packed rows + logistic
# regression, is measured by bench/peers.py; the decision rules by bench/decision_rules.py).
PAPER_DEFAULTS = {"--config.classifier.kind": "knn", "--config.classifier.space": "projected",
                  "--config.train.packing": "False"}

# name -> (datasets, overrides, seeds?) ; "{s1}" is replaced by the Stage 1 export folder
VARIANTS = {
    "knn": ("LM k-NN (untouched)", ("--config.stage2.enabled=False",), False),
    "mlp": ("LM + MLP", ("--config.stage2.enabled=False", "--config.classifier.kind=mlp"), True),
    "ocl": ("LM+S2-OCL (fast)", ("--config.eval.before_training=False",), True),
    "cos": ("LM+S2-COS (fast)", ("--config.stage2.loss=cos", "--config.eval.before_training=False"), True),
    "s1mlp": ("LM+S1 + MLP", ("--config.stage2.enabled=False", "--config.classifier.kind=mlp",
                              "--config.model.name={s1}"), True),
    "s1ocl": ("LM+S1+S2-OCL (fast)", ("--config.model.name={s1}", "--config.eval.before_training=False"), True),
    "oclpk": ("LM+S2-OCL (fast, packed rows)", ("--config.train.packing=True", "--config.eval.before_training=False"),
              True),
    "oclfp2": ("LM+S2-OCL (fast, packed, frozen prefix: embeddings + 2 layers)",
               ("--config.train.frozen_prefix_layers=2", "--config.train.packing=True",
                "--config.eval.before_training=False"), True),
    "oclfp3": ("LM+S2-OCL (fast, packed, frozen prefix: embeddings + 3 layers)",
               ("--config.train.frozen_prefix_layers=3", "--config.train.packing=True",
                "--config.eval.before_training=False"), True),
    "linfp2": ("LM+S2-OCL (fast, packed, frozen prefix 2, logistic regression)",
               ("--config.train.frozen_prefix_layers=2", "--config.train.packing=True",
                "--config.classifier.kind=linear", "--config.eval.before_training=False"), True),
    "paper1": ("LM+S2-OCL (paper pairs, 1 epoch)", ("--config.stage2.sampling=paper", "--config.train.epochs=1",
                                                    "--config.eval.before_training=False"), True),
}
# The default plan, most informative first (each a dataset-variant; seeds from --seeds for "seeded" ones).
PLAN = ("b77-knn", "b77-mlp", "b77-ocl", "b77-cos", "hwu-knn", "hwu-mlp", "hwu-ocl", "hwu-cos", "hwu-paper1",
        "clinc-knn", "clinc-mlp", "clinc-ocl", "stage1", "b77-s1ocl", "b77-s1mlp", "hwu-s1ocl", "clinc-cos")


def run_one(name: str, seed: int, args) -> dict | None:
  workdir = pathlib.Path(args.runs_dir) / f"{name}-seed{seed}"
  if name == "stage1":
    config_args = ["--config=configs/convfit_stage1.py", *STAGE1_OVERRIDES]
  else:
    key, variant = name.split("-")
    _, overrides, _ = VARIANTS[variant]
    s1 = str(pathlib.Path(args.runs_dir) / "stage1-seed0" / "export")
    config_args = [f"--config=configs/convfit_{DATASETS[key]}.py:10", f"--config.seed={seed}",
                   *(o.format(s1=s1) for o in overrides)]
    config_args += [f"{field}={value}" for field, value in PAPER_DEFAULTS.items()
                    if not any(a.startswith(field + "=") for a in overrides)]
  row = run_main(name, seed, config_args, workdir, RESULTS / "convfit.jsonl")
  if row:
    result = row["results"]
    print(f"  {name} seed {seed}: {json.dumps({k: result.get(k) for k in ('accuracy', 'r1_at_100', 'stage2_seconds')})}"
          f" wall {row['wall_seconds']:.0f}s", flush=True)
  return row


def _fit_seconds(result: dict) -> float | None:
  """The Stage 2 train loop, plus a trained classifier (logistic regression / MLP incl. encoding the pool); for
  rows without Stage 2 the classifier alone."""
  classifier = result.get("classifier_seconds") if result.get("classifier", "knn") != "knn" else 0
  if result.get("stage2_seconds") is None:
    return result.get("classifier_seconds")
  return result["stage2_seconds"] + (classifier or 0)


def load_rows() -> list[dict]:
  return runner_rows(RESULTS / "convfit.jsonl")





def _time(rows: list[dict]) -> str:
  fits = [_fit_seconds(r["results"]) for r in rows]
  return f"{statistics.median(fits) / 60:.1f} / {statistics.median(r['wall_seconds'] for r in rows) / 60:.1f}"


def write_table() -> None:
  rows = load_rows()
  by_name: dict[str, list[dict]] = {}
  for r in rows:
    by_name.setdefault(r["name"], []).append(r)
  lines = ["# ConvFiT on MiniLM-L6 (CPU), 10-shot, full test sets", "",
           "Generated by `python bench/convfit.py` from `bench/results/convfit.jsonl` (one JSON row per run, with "
           "its exact command). Accuracy in %, mean ± std over the seeds run (n); time = fit / whole process in "
           "minutes (fit: the Stage 2 train loop incl. compiles, plus a trained classifier's pool encoding and fit "
           "(logistic regression, MLP); for rows without Stage 2 the classifier). Unless its command says otherwise "
           "a row ran the paper's 1-NN on padded rows (the shipped defaults until 2026-11-25; today's shipped "
           "ConvFiT, packed rows + logistic regression: bench/results/peers.md). Machine: " + (rows[0]["machine"] if rows else "–") + ".", "",
           "| variant | " + " | ".join(f"{d} acc (n) | {d} time" for d in DATASETS.values()) + " |",
           "| --- |" + " ---: | ---: |" * len(DATASETS)]
  for variant, (label, _, _) in VARIANTS.items():
    cells = []
    for key in DATASETS:
      runs = by_name.get(f"{key}-{variant}", [])
      acc = [r["results"]["accuracy"] for r in runs]
      cells += [f"{mean_std(acc)} ({len(acc)})" if acc else "–", _time(runs) if runs else "–"]
    if any(c != "–" for c in cells):
      lines.append(f"| {label} | " + " | ".join(cells) + " |")
  lines.append("| paper: ROB+S1+S2-OCL (RoBERTa-base, Table 5 epoch 2) | " +
               " | ".join(f"{PAPER[d]:.2f} | –" for d in DATASETS.values()) + " |")
  if "stage1" in by_name:
    s = by_name["stage1"][0]["results"]
    lines += ["", f"Stage 1 (`stage1`): {s['steps']} steps of batch "
              f"{STAGE1_OVERRIDES[0].split('=')[1]} on {s['pairs']} SGD + Taskmaster-4 (context, response) pairs "
              f"({s['epochs_run']:.2f} of the config's 2 epochs), {by_name['stage1'][0]['wall_seconds'] / 60:.1f} min; "
              f"held-out response selection R@1/100 {100 * s['before_training']['r1_at_100']:.1f} -> "
              f"{100 * s['r1_at_100']:.1f}, MRR {s['before_training']['mrr']:.3f} -> {s['mrr']:.3f} "
              f"({s['num_eval']} pairs)."]
  finish_table(lines, rows, "convfit")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--only", help="comma-separated runs (default: the whole plan), e.g. b77-ocl,stage1")
  parser.add_argument("--seeds", default="0", help="seeds for the seeded variants, e.g. 0,1,2")
  parser.add_argument("--runs-dir", default=str(REPO / "runs" / "bench_convfit"))
  parser.add_argument("--table", action="store_true", help="only rewrite the Markdown table")
  args = parser.parse_args()
  RESULTS.mkdir(parents=True, exist_ok=True)
  if not args.table:
    names = args.only.split(",") if args.only else PLAN
    seeds = [int(s) for s in args.seeds.split(",")]
    for name in names:
      seeded = name != "stage1" and VARIANTS[name.split("-")[1]][2]
      for seed in (seeds if seeded else [0]):
        run_one(name, seed, args)
        write_table()
  write_table()


if __name__ == "__main__":
  main()
