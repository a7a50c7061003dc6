"""Retriever on the shipped MiniLM-L6 (and MPNet-base, ``--model``), CPU: SNIPS 5-shot slot filling over the 7 test
domains (Retriever^frz, Retriever, Proto; Table 2) and the CLINC (n_c, n_i) = (10, 10) 5-shot intent table
(Table 1), next to the paper's BERT-base numbers.

  python bench/retriever.py                   # the default plan (resumable: finished runs are not repeated)
  python bench/retriever.py --part snips      # only SNIPS (or --part clinc)
  python bench/retriever.py --table           # rewrite the Markdown table only

Every run is ``python -m fewshot_nlu.main`` in its own process, one at a time; rows go to
``bench/results/retriever.jsonl`` (ablations: ``retriever_ablations.jsonl``) and the tables to
``bench/results/retriever.md``. The SNIPS runs use ``configs/retriever_snips.py`` as shipped: the paper's
evaluation protocol, a CPU training budget (its docstring says how training differs from App. A.1).

  python bench/retriever.py --part snips --seeds 0,1,2     # the default row, 3 seeds
  python bench/retriever.py --part snips --only snips-frz  # one row of the SNIPS table
  python bench/retriever.py --part snips --only snips-tuned --seeds 0   # the support learnt, one seed
  python bench/retriever.py --part snips --only snips-tuned-encoder --seeds 0   # by the encoder (~5.6 h)
  python bench/retriever.py --part snips --only snips-tuned-encoder --seeds 0 --folds 5,6,7   # a fold per run
  python bench/retriever.py --part none --ablate no-negatives,dot   # development-data ablations on fold 1
  python bench/retriever.py --part snips --only snips-frz --model mpnet-base   # the papers' model size
  python bench/retriever.py --part snips --only snips-frz-support-threshold --model mpnet-base   # thresholds
      # from each episode's own support set (leave-one-out) instead of the development domain's

With ``--folds`` every fold is its own run and row (``<row>-<seed>-fold<k>``), so a long row lands fold by fold
and a later session (another machine) goes on from the folds already in ``retriever.jsonl``; the table merges a
seed's folds across rows and averages a seed only once all seven are in.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics

from runner import DEFAULT_ENCODER, ENCODERS, REPO, RESULTS, encoder_row_name, finish_table, load_rows, run_main

ROWS = RESULTS / "retriever.jsonl"
# Each encoder's overrides (``--model``; runner.ENCODERS names them and its encoder_row_name the rows: ``<row>`` for
# the default, ``<row>-<model>`` for another). MPNet-base:
# span vectors from its layer MPNET_LAYER, chosen on fold 1's development domain (PlayMusic) with the untouched
# encoder over layers 3, 4, 6, 8, 12 (retriever_notes.md), as MiniLM's layer 3 was on fold 1's development domain;
# embeddings + half the cut frozen in training (the MPNet general span encoder's 3 of 6), the items' utterances
# packed several to a row (``train.packing``: the padded rows' loss, ~2x faster a step on MPNet; MiniLM's rows ran
# padded), and in the per-episode encoder learner only the cut's top layer learns (as on MiniLM: layer 2 of 3).
MPNET_LAYER = 6
MODEL_OVERRIDES = {"minilm-l6": (),
                   "mpnet-base": ("--config.model.name=mpnet-base",
                                  f"--config.retriever.encoder_layers={MPNET_LAYER}",
                                  f"--config.train.frozen_prefix_layers={MPNET_LAYER // 2}",
                                  "--config.train.packing=True",
                                  f"--config.retriever.support_frozen_layers={MPNET_LAYER - 1}")}
DOMAINS = ("GetWeather", "PlayMusic", "AddToPlaylist", "RateBook", "SearchScreeningEvent", "BookRestaurant",
           "SearchCreativeWork")
# name -> (variant of configs/retriever_snips.py, label, seeds run by default)
SNIPS = {"snips": ("retriever", "Retriever", (0, 1, 2)),
         "snips-tuned": ("tuned", "Retriever, support learnt per episode", (0, 1, 2)),
         # not in the default plan (no seeds): ~12 s per episode on this CPU, ~5.6 h per seed (retriever_notes.md)
         "snips-tuned-encoder": ("tuned_encoder", "Retriever, encoder layer 2 learnt per episode", ()),
         # each episode at the threshold its own support prefers (leave-one-out), not the development domain's
         "snips-support-threshold": ("support_threshold", "Retriever, thresholds from each episode's support", ()),
         "snips-frz-support-threshold": ("support_threshold_frz",
                                         "Retriever^frz, thresholds from each episode's support", (0,)),
         "snips-frz": ("frz", "Retriever^frz", (0,)),
         "snips-paper-frz": ("paper_frz", "Retriever^frz, top layer, grid 0.85-0.95 (App. A.1)", (0,)),
         "snips-proto": ("proto", "Proto", (0,))}
# Table 2 (BERT-base, 5-shot, 100 episodes per domain): GW PM ATP RB FSE BR SCW, average.
PAPER_SNIPS = {"SimilarToken^frz": (53.46, 54.13, 42.81, 75.54, 57.10, 55.30, 32.38, 52.96),
               "Retriever^frz": (63.39, 46.01, 51.11, 79.65, 62.42, 62.13, 33.85, 56.94),
               "Proto": (64.47, 53.97, 54.64, 73.37, 42.89, 62.48, 27.76, 54.23),
               "Retriever": (82.95, 61.74, 71.75, 81.65, 73.10, 79.54, 51.35, 71.72)}
# Ablations on fold 1 (trained on five domains, early-stopped on PlayMusic = fold1_valid): development F1 only.
# name -> (what changes from the default, overrides)
ABLATIONS = {
    "default": ("the default config", []),
    "no-negatives": ("no non-slot spans in the loss", ["--config.retriever.negative_spans=0"]),
    "dot": ("the paper's dot-product training (no cosine scale)", ["--config.retriever.cosine_scale=0"]),
    "lr-5e-5": ("lr 5e-5", ["--config.train.learning_rate=5e-5"]),
    "layers-4": ("span vectors from layer 4", ["--config.retriever.encoder_layers=4"]),
    "layers-6": ("span vectors from layer 6 (the whole encoder), embeddings + 3 layers frozen",
                 ["--config.retriever.encoder_layers=0", "--config.train.frozen_prefix_layers=3"]),
    "frozen-2": ("embeddings + 2 layers frozen (only layer 2 trains)", ["--config.train.frozen_prefix_layers=2"]),
    "steps-300": ("300 steps", ["--config.train.max_steps=300"]),
}
ABLATION_ROWS = RESULTS / "retriever_ablations.jsonl"


def run_snips(args, runs_dir: pathlib.Path) -> None:
  done = {(r["name"], r["seed"], f["test_domain"]) for r in load_rows(ROWS) for f in r["results"].get("folds", [])}
  for bare, (variant, _, seeds) in SNIPS.items():
    if args.only and bare not in args.only:
      continue
    name = encoder_row_name(bare, args.model)
    chosen = bare == "snips" or bare in args.only  # --seeds applies to the default row or the rows named
    for seed in (args.seeds if chosen and args.seeds is not None else seeds):
      command = [f"--config=configs/retriever_snips.py:{variant}", f"--config.seed={seed}",
                 *MODEL_OVERRIDES[args.model], *args.extra]
      for fold in args.folds or [None]:
        if all((name, seed, domain) in done for domain in (DOMAINS if fold is None else DOMAINS[fold - 1:fold])):
          continue  # already rows (from a whole run or fold runs), on this machine or another
        row = run_main(name, seed, command + ([f"--config.data.folds={fold},"] if fold else []),
                       runs_dir / (f"{name}-{seed}" + (f"-fold{fold}" if fold else "")), ROWS)
        if row:
          print(f"  {name} seed {seed}{f' fold {fold}' if fold else ''}: average F1 "
                f"{row['results']['average_f1']:.2f}  wall {row['wall_seconds']:.0f}s", flush=True)


def run_ablations(args, runs_dir: pathlib.Path) -> None:
  for name in args.ablations:
    _, overrides = ABLATIONS[name]
    row = run_main(name, 0, ["--config=configs/retriever_snips.py", "--config.seed=0", "--config.data.folds=1,",
                             *overrides, *args.extra], runs_dir / f"ablation-{name}", ABLATION_ROWS)
    if row:
      print(f"  ablation {name}: development F1 {dev_f1(row['results']['folds'][0]):.2f}", flush=True)


def dev_f1(fold: dict) -> float:
  """The development F1 a fold was selected by: the kept step's best threshold (or the untouched encoder's)."""
  return fold.get("training", {}).get("best_dev_score") or max(fold["dev_f1_by_threshold"].values())


def snips_table(rows: list[dict]) -> list[str]:
  abbreviations = ("GW", "PM", "ATP", "RB", "FSE", "BR", "SCW")
  lines = ["## SNIPS 5-shot slot filling, F1 per test domain (Table 2)", "",
           "All 100 test episodes of every domain; threshold and training step chosen on the development domain's "
           "100 episodes. Ours: mean over seeds (± std of the average over seeds where several ran).", "",
           "| model | " + " | ".join(abbreviations) + " | Average F1 | seeds | wall (s) per seed |",
           "|---|" + "---:|" * 10]
  for model, encoder in ENCODERS.items():
    for bare, (_, label, _) in SNIPS.items():
      seeds = seed_folds([r for r in rows if r["name"] == encoder_row_name(bare, model)])
      if not seeds:
        continue
      whole = {seed: f1 for seed, (f1, _) in seeds.items() if len(f1) == len(DOMAINS)}
      partial = {seed: f1 for seed, (f1, _) in seeds.items() if seed not in whole}
      if whole:
        cells = [f"{statistics.mean(f1[d] for f1 in whole.values()):.2f}" for d in DOMAINS]
        averages = [statistics.mean(f1.values()) for f1 in whole.values()]
        spread = f" ± {statistics.stdev(averages):.2f}" if len(averages) > 1 else ""
        walls = " / ".join(f"{seeds[s][1]:.0f}" for s in whole)
        lines.append(f"| {label} ({encoder}, ours) | " + " | ".join(cells)
                     + f" | {statistics.mean(averages):.2f}{spread} | {len(whole)} | {walls} |")
      for seed, f1 in partial.items():
        cells = [f"{f1[d]:.2f}" if d in f1 else "–" for d in DOMAINS]
        lines.append(f"| {label} ({encoder}, ours), seed {seed}: {len(f1)} of {len(DOMAINS)} folds so far | "
                     + " | ".join(cells) + f" | – | – | {seeds[seed][1]:.0f} so far |")
  for label, values in PAPER_SNIPS.items():
    lines.append(f"| {label} (BERT-base, paper) | " + " | ".join(f"{v:.2f}" for v in values) + " | | |")
  return lines


def seed_folds(runs: list[dict]) -> dict[int, tuple[dict[str, float], float]]:
  """seed -> ({test domain: F1}, wall seconds) over a row's runs, whole (seven folds) or one fold each."""
  seeds: dict[int, tuple[dict[str, float], float]] = {}
  for run in runs:
    f1, wall = seeds.get(run["seed"], ({}, 0.0))
    f1.update({fold["test_domain"]: fold["f1"] for fold in run["results"]["folds"]})
    seeds[run["seed"]] = (f1, wall + run["wall_seconds"])
  return seeds


def ablation_table() -> list[str]:
  rows = {r["name"]: r for r in load_rows(ABLATION_ROWS)}
  if not rows:
    return []
  lines = ["", "## Ablations (development data only)", "",
           "Fold 1: trained on the five source domains, development F1 on all 100 PlayMusic episodes (fold1_valid) "
           "at the kept step and threshold; `python bench/retriever.py --ablate NAME ...`. Test F1 is not shown: "
           "choices are made on development data.", "",
           "| ablation | what changes | development F1 | best step | threshold | wall (s) |",
           "|---|---|---:|---:|---:|---:|"]
  for name, (what, _) in ABLATIONS.items():
    row = rows.get(name)
    if row:
      fold = row["results"]["folds"][0]
      lines.append(f"| {name} | {what} | {dev_f1(fold):.2f} | {fold.get('training', {}).get('best_step', '–')} "
                   f"| {fold['threshold']:.3f} | {row['wall_seconds']:.0f} |")
  return lines


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
  lines = ["# Retriever on MiniLM-L6 and MPNet-base (CPU)", "",
           "Generated by `python bench/retriever.py` from `bench/results/retriever.jsonl` (one JSON row per run "
           "with its exact command). Per-fold details (thresholds chosen, best step, timings) are in "
           "each run's `fold<k>/results.json`.", ""]
  lines += snips_table(load_rows(ROWS)) + ablation_table() + clinc_table(rows)
  finish_table(lines, list(rows.values()) + load_rows(ABLATION_ROWS), "retriever")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--part", choices=("all", "snips", "clinc", "none"), default="all")
  parser.add_argument("--seeds", type=lambda v: [int(x) for x in v.split(",")], default=None,
                      help="seeds of the default SNIPS row (default 0,1,2)")
  parser.add_argument("--ablate", dest="ablations", type=lambda v: v.split(","), default=[],
                      help=f"comma-separated ablations to run on fold 1: {', '.join(ABLATIONS)}")
  parser.add_argument("--only", type=lambda v: v.split(","), default=[],
                      help=f"only these SNIPS rows (of {', '.join(SNIPS)})")
  parser.add_argument("--folds", type=lambda v: [int(x) for x in v.split(",")], default=None,
                      help="SNIPS folds (1-7) to run, each as its own run and row; default: all seven in one run")
  parser.add_argument("--model", default=DEFAULT_ENCODER, choices=tuple(ENCODERS),
                      help="the encoder of the SNIPS rows (mpnet-base: the papers' model size; its rows are named "
                      "<row>-mpnet-base)")
  parser.add_argument("--clinc-steps", type=int, default=10, help="training steps of the CLINC runs")
  parser.add_argument("--clinc-runs", type=int, default=3, help="how many of the CLINC runs (frz, pretrain, "
                      "finetune) to make")
  parser.add_argument("--runs", default=str(REPO / "runs" / "bench_retriever"), help="work directories")
  parser.add_argument("--table", action="store_true", help="only rewrite bench/results/retriever.md")
  parser.add_argument("extra", nargs="*", help="more --config.* overrides for every run")
  args = parser.parse_args()
  if not args.table and args.part in ("all", "snips"):
    run_snips(args, pathlib.Path(args.runs))
  if not args.table and args.ablations:
    run_ablations(args, pathlib.Path(args.runs))
  if not args.table and args.part in ("all", "clinc"):
    run_clinc(args, pathlib.Path(args.runs))
  write_table()


if __name__ == "__main__":
  main()
