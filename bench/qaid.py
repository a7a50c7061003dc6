"""QAID on the shipped MiniLM-L6, CPU, with the paper's fine-tuning protocol (10 epochs x batch 32, no step cap,
full test sets): BANKING77, CLINC150, HWU64 at 5 and 10 shots, beside the untouched encoder's 1-NN and logistic
regression on the same pools (bench/encoder_baselines.py), ConvFiT on the same splits and the paper's row.

  python bench/qaid.py                                  # the default plan, seed 0 (resumable)
  python bench/qaid.py --only qaid-banking77-5,convfit1nn-banking77-5 --seeds 0,1,2
  python bench/qaid.py --table                          # rewrite the Markdown table only

Variants (each ``python -m fewshot_nlu.main`` in its own process, one at a time; rows go to
``bench/results/qaid.jsonl``, the table to ``bench/results/qaid.md``):

  * ``qaid``: the config's defaults (fewshot_nlu/defaults/qaid_base.py: warm start at full width, lr 5e-5,
    intent-document inference, the step with the best accuracy on ``valid`` evaluated; the same model's Match-QA
    and Match-QQ+QA accuracies are reported beside it);
  * ``last``: the same training, the last step's model evaluated (the paper's rule; the default until
    2026-11-25, when these rows were run as ``qaid``);
  * ``paperinit``: the paper's initialisation and rates (a fresh 128-d projection, lr 1e-5, Match-QA), same
    protocol: what the method gives when followed to the letter on this encoder;
  * ``fp2``: ``qaid`` with the embeddings + 2 layers frozen (``train.frozen_prefix_layers=2``): the speed option;
  * ``convfit1nn``: ConvFiT Stage 2 (OCL) with the paper's 1-NN on padded rows (the shipped ConvFiT until
    2026-11-25) on the same split; today's shipped ConvFiT (packed rows, logistic regression) is in
    bench/results/peers.md.

Ablations (the paper's Table 3, each the ``qaid`` run with one change; rows in their own table beside the
paper's row of the same name; QAID without pre-training is the ``qaid`` row itself, which never pre-trains):

  * ``npairs``: N-pairs loss with in-batch negatives (one positive per query, its intent name);
  * ``triplet``: ColBERT's triplet loss with BM25-hard negatives (the paper's "ColBERT", without pre-training);
  * ``cosine``: the pooled vectors' cosine instead of the token-level late interaction (Eq. 1);
  * ``noaug``: no data augmentation (no masking / dropout views);
  * ``pt``: fine-tuning from QAID's pre-training (§2.2.1) at a CPU budget: one epoch over the 51,414 train +
    valid utterances of the four datasets at lr 5e-5 (the paper: 20 epochs at 1e-5), run once (seed 0, in
    ``RUNS/pretrain-cpu-seed0``, its row named ``pretrain-cpu``) before the first ``pt`` cell needs it.

  python bench/qaid.py --only npairs-hwu64-5,triplet-hwu64-5,cosine-hwu64-5,noaug-hwu64-5 --seeds 0
  python bench/qaid.py --only pt-hwu64-5,pt-hwu64-10 --seeds 0
"""

from __future__ import annotations

import argparse
import os
import pathlib

from runner import REPO, RESULTS, finish_table, load_rows, mean_std, run_main

ROWS = RESULTS / "qaid.jsonl"
BASELINES = RESULTS / "encoder_baselines.jsonl"
DATASETS = ("banking77", "clinc150", "hwu64")
SHOTS = ("5", "10")
LAST = ("--config.eval.select_best=False",)  # the step-selection default's opposite: the last step's model
VARIANTS = {
    "qaid": ("QAID (ours: warm, intent documents, step selected on valid)", ("{qaid}",)),
    "last": ("QAID (ours), last step", ("{qaid}", *LAST)),
    "paperinit": ("QAID, paper init (random 128-d, lr 1e-5, QA, last step)",
                  ("{qaid}", *LAST, "--config.qaid.projection_dim=128", "--config.qaid.projection_init=random",
                   "--config.train.learning_rate=1e-5", "--config.qaid.match=qa")),
    "fp2": ("QAID (ours) + frozen prefix 2, last step",
            ("{qaid}", *LAST, "--config.train.frozen_prefix_layers=2")),
    # ConvFiT as shipped until 2026-11-25 (padded rows, the paper's 1-NN); today's shipped ConvFiT (packed rows,
    # logistic regression) is bench/peers.py's row
    "convfit1nn": ("ConvFiT (OCL, 1-NN, padded)", ("--config=configs/convfit_{dataset}.py:{shots}",
                                                   "--config.eval.before_training=False",
                                                   "--config.classifier.kind=knn", "--config.classifier.space=projected",
                                                   "--config.train.packing=False")),
}
# Table 3's ablations: each the shipped QAID run with one change, and the paper's row it corresponds to.
ABLATIONS = {
    "npairs": ("QAID - N-pairs loss", ("{qaid}", "--config.qaid.loss=npairs"), "QAID - N-pairs loss"),
    "triplet": ("ColBERT (triplet loss, BM25-hard negatives)", ("{qaid}", "--config.qaid.loss=triplet"), "ColBERT"),
    "cosine": ("QAID - cosine similarity", ("{qaid}", "--config.qaid.similarity=cosine"),
               "QAID - cosine similarity"),
    "noaug": ("QAID w/o data augmentation", ("{qaid}", "--config.qaid.augment=False"),
              "QAID w/o data augmentation"),
    "pt": ("QAID + pre-training (1 epoch at lr 5e-5, CPU)", ("{qaid}", "--config.model.name={pretrained}"), "QAID"),
}
# The pre-training run the ``pt`` cells start from: one epoch (the paper's 20 do not fit a CPU budget of <= 60 min).
PRETRAIN = ("pretrain-cpu", ("--config=configs/qaid_pretrain.py", "--config.train.epochs=1",
                             "--config.train.learning_rate=5e-5"))
# The paper's change of an ablation row is against its QAID row, except for QAID itself (against w/o PT).
PAPER_BASE = {"QAID": "QAID w/o PT"}
# Paper Table 3 (RoBERTa-base), columns CLINC150 5 / 10, BANKING77 5 / 10, HWU64 5 / 10.
PAPER_TABLE3 = {
    "QAID": (93.41, 94.64, 85.25, 88.83, 85.52, 87.98),
    "ColBERT": (82.03, 88.10, 72.71, 79.25, 74.98, 81.78),
    "QAID - N-pairs loss": (92.38, 93.70, 84.47, 87.25, 84.19, 87.13),
    "QAID w/o PT": (90.52, 93.26, 81.61, 86.20, 80.45, 86.48),
    "QAID w/o data augmentation": (93.21, 94.64, 84.34, 88.46, 84.37, 88.46),
    "QAID - cosine similarity": (92.73, 93.71, 84.11, 87.24, 84.04, 87.70),
}
TABLE3_COLUMNS = (("clinc150", "5"), ("clinc150", "10"), ("banking77", "5"), ("banking77", "10"), ("hwu64", "5"),
                  ("hwu64", "10"))
# Paper Table 2, QAID with RoBERTa-base (mean of 5 seeds).
PAPER = {("clinc150", "5"): 93.41, ("clinc150", "10"): 94.64, ("banking77", "5"): 85.25,
         ("banking77", "10"): 88.83, ("hwu64", "5"): 85.52, ("hwu64", "10"): 87.98}
PLAN = tuple(f"{v}-{d}-{s}" for s in SHOTS for d in DATASETS for v in ("qaid", "convfit1nn"))


def pretrained_export(runs_dir: pathlib.Path) -> pathlib.Path:
  """Runs ``PRETRAIN`` once (seed 0; resumable) and returns its export directory."""
  name, args = PRETRAIN
  workdir = runs_dir / f"{name}-seed0"
  row = run_main(name, 0, [args[0], "--config.seed=0", *args[1:]], workdir, ROWS)
  if row:
    print(f"  {name}: {row['results']['steps']} steps, wall {row['wall_seconds']:.0f}s", flush=True)
  return workdir / "export"


def config_args(variant: str, dataset: str, shots: str, seed: int, runs_dir: pathlib.Path) -> list[str]:
  overrides = VARIANTS[variant][1] if variant in VARIANTS else ABLATIONS[variant][1]
  qaid = f"--config=configs/qaid_{dataset}.py:{shots}"
  pretrained = (os.path.relpath(pretrained_export(runs_dir), REPO) if any("{pretrained}" in o for o in overrides)
                else None)
  args = [o.format(qaid=qaid, dataset=dataset, shots=shots, pretrained=pretrained) for o in overrides]
  return [args[0], f"--config.seed={seed}", *args[1:]]


def run_one(name: str, seed: int, runs_dir: pathlib.Path) -> None:
  variant, dataset, shots = name.split("-")
  row = run_main(name, seed, config_args(variant, dataset, shots, seed, runs_dir), runs_dir / f"{name}-seed{seed}",
                 ROWS)
  if row:
    r = row["results"]
    extra = "".join(f" {m} {100 * a:.2f}" for m, a in r.get("accuracy_by_match", {}).items())
    print(f"  {name} seed {seed}: {100 * r['accuracy']:.2f}{extra}  wall {row['wall_seconds']:.0f}s", flush=True)


def _fit_seconds(r: dict) -> float:
  """Training time without the development curve's evaluations (rows from before ``dev_curve_seconds`` was
  recorded include them; the table marks those with *)."""
  res = r["results"]
  return (res.get("train_seconds") or res.get("stage2_seconds") or 0.0) - res.get("dev_curve_seconds", 0.0)


def write_table() -> None:
  rows = load_rows(ROWS)
  baselines = {(b["dataset"], b["shots"]): b for b in load_rows(BASELINES)}
  by_name: dict[str, list[dict]] = {}
  for r in rows:
    by_name.setdefault(r["name"], []).append(r)
  lines = ["# QAID on MiniLM-L6 (CPU), the paper's fine-tuning protocol", "",
           "Generated by `python bench/qaid.py` from `bench/results/qaid.jsonl` (one JSON row per run with its exact "
           "command) and `bench/results/encoder_baselines.jsonl`. Accuracy (%) on the full test sets, mean ± std "
           "over the seeds run (n); every QAID run trains the paper's 10 epochs x batch 32 (no step cap). The "
           "paper's column is QAID with RoBERTa-base (Table 2, mean of 5 seeds).", "",
           "| dataset | shots | encoder 1-NN | encoder LR | " + " | ".join(v[0] for v in VARIANTS.values())
           + " | QAID (ours), names only (Match-QA) | QAID (ours), Match-QQ+QA | paper QAID |",
           "|" + "---|" * (len(VARIANTS) + 7)]
  times = ["", "## Time: training seconds (median; compiles included, the development curve's evaluations not: * "
           "marks runs that did not record them apart, whose time includes them) / steps", "",
           "| dataset | shots | " + " | ".join(v[0] for v in VARIANTS.values()) + " |",
           "|" + "---|" * (len(VARIANTS) + 2)]
  for shots in SHOTS:
    for dataset in DATASETS:
      runs = {v: by_name.get(f"{v}-{dataset}-{shots}", []) for v in VARIANTS}
      if not any(runs.values()):
        continue
      base = baselines.get((dataset, shots))
      cells = [f"{100 * base['knn_test']:.2f}", f"{100 * base['logreg_test']:.2f}"] if base else ["–", "–"]
      cells += [f"{mean_std([r['results']['accuracy'] for r in rs])} ({len(rs)})" if rs else "–"
                for rs in runs.values()]
      for match in ("qa", "qq+qa"):
        values = [r["results"]["accuracy_by_match"][match] for r in runs["qaid"]
                  if "accuracy_by_match" in r["results"]]
        cells.append(mean_std(values))
      cells.append(f"{PAPER[(dataset, shots)]:.2f}")
      lines.append(f"| {dataset} | {shots} | " + " | ".join(cells) + " |")
      spent = []
      for rs in runs.values():
        star = "*" if any("dev_curve" in r["results"] and "dev_curve_seconds" not in r["results"] for r in rs) else ""
        spent.append("–" if not rs else f"{sorted(_fit_seconds(r) for r in rs)[len(rs) // 2]:.0f}{star} / "
                                        f"{rs[0]['results'].get('steps', '–')}")
      times.append(f"| {dataset} | {shots} | " + " | ".join(spent) + " |")
  curves = ablation_table(by_name) + ["", "## Development curves (valid accuracy vs step, seed 0)", ""]
  for name, rs in by_name.items():
    curve = rs[0]["results"].get("dev_curve")
    if curve:
      points = ", ".join(f"{p['step']}: {100 * p['accuracy']:.1f}"
                         + (" (" + " / ".join(f"{100 * p['by_match'][m]:.1f}" for m in ("qa", "qq+qa")) + ")"
                            if {"qa", "qq+qa"} <= set(p.get("by_match", ())) else "")
                         for p in curve)
      curves.append(f"- `{name}`: {points}")
  curves.append("")
  curves.append("In brackets (runs whose curve recorded every mode): the same model answering from the intent "
                "names only (Match-QA) / from names and examples as separate rows (Match-QQ+QA).")
  finish_table(lines + times + curves, rows, "qaid")


def ablation_table(by_name: dict[str, list[dict]]) -> list[str]:
  """Table 3's rows on the cells where an ablation ran: ours (mean ± std (n), and the change against the shipped
  QAID of the same seeds) beside the paper's row of the same name (and its change against the paper's QAID)."""
  cells = [c for c in TABLE3_COLUMNS if any(f"{a}-{c[0]}-{c[1]}" in by_name for a in ABLATIONS)]
  if not cells:
    return []
  lines = ["", "## Ablations (the paper's Table 3; each row is the shipped QAID with one change)", "",
           "Ours: accuracy (%), mean ± std (n), and in brackets the change against the shipped QAID on the same "
           "seeds. Paper: RoBERTa-base, its change against its QAID row. Our shipped QAID never pre-trains, so it "
           "is the paper's \"QAID w/o PT\".", "",
           "| row | " + " | ".join(f"{d} {s} (ours) | {d} {s} (paper)" for d, s in cells) + " |",
           "|---|" + "---:|---:|" * len(cells)]
  shipped = {c: {r["seed"]: r["results"]["accuracy"] for r in by_name.get(f"qaid-{c[0]}-{c[1]}", [])} for c in cells}
  paper_qaid = {c: PAPER[c] for c in cells}
  row = ["QAID (ours: shipped, no pre-training) / paper: QAID w/o PT"]
  for c in cells:
    values = list(shipped[c].values())
    row += [f"{mean_std(values)} ({len(values)})" if values else "–",
            f"{PAPER_TABLE3['QAID w/o PT'][TABLE3_COLUMNS.index(c)]:.2f}"]
  lines.append("| " + " | ".join(row) + " |")
  for name, (label, _, paper_row) in ABLATIONS.items():
    row = [label]
    for c in cells:
      rs = by_name.get(f"{name}-{c[0]}-{c[1]}", [])
      deltas = [r["results"]["accuracy"] - shipped[c][r["seed"]] for r in rs if r["seed"] in shipped[c]]
      delta = f" ({100 * sum(deltas) / len(deltas):+.2f})" if deltas else ""
      row.append(f"{mean_std([r['results']['accuracy'] for r in rs])} ({len(rs)}){delta}" if rs else "–")
      paper = PAPER_TABLE3[paper_row][TABLE3_COLUMNS.index(c)]
      base = PAPER_TABLE3[PAPER_BASE[paper_row]][TABLE3_COLUMNS.index(c)] if paper_row in PAPER_BASE else paper_qaid[c]
      row.append(f"{paper:.2f} ({paper - base:+.2f})")
    lines.append("| " + " | ".join(row) + " |")
  return lines


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--only", help="comma-separated runs VARIANT-DATASET-SHOTS (default: the plan)")
  parser.add_argument("--seeds", default="0", help="e.g. 0,1,2")
  parser.add_argument("--runs", default=str(REPO / "runs" / "bench_qaid"), help="work directories")
  parser.add_argument("--table", action="store_true", help="only rewrite bench/results/qaid.md")
  args = parser.parse_args()
  if not args.table:
    for name in (args.only.split(",") if args.only else PLAN):
      for seed in (int(s) for s in args.seeds.split(",")):
        run_one(name, seed, pathlib.Path(args.runs))
        write_table()
  write_table()


if __name__ == "__main__":
  main()
