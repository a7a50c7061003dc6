"""The shipped intent method on two encoders: ConvFiT as shipped (configs/convfit_<dataset>.py:<shots>) on
MiniLM-L6 (22M, the default) and on MPNet-base (all-mpnet-base-v2, 110M: ``--config.model.name=mpnet-base``, the
papers' model size), BANKING77 / CLINC150 / HWU64 at 5 and 10 shots, full test sets, beside each cell's best
published row (QAID, RoBERTa-base: Yehudai et al. 2023, Table 2; ConvFiT's own rows are below it).

  python bench/models.py --cells banking77:10 --seeds 0,1,2                 # MPNet runs (resumable)
  python bench/models.py --cells banking77:10 --seeds 0 --frozen-prefix 4    # a frozen, cached prefix
  python bench/models.py --cells banking77:5 --seeds 0 --method qaid        # QAID as shipped, on MPNet-base
  python bench/models.py --table                                             # rewrite bench/results/models.md

MiniLM's rows are bench/peers.py's ``convfit-<dataset>-<shots>`` runs (the same configs, same splits, same
machine); this script runs the MPNet ones, each ``python -m fewshot_nlu.main`` in its own process with the
overrides its row lists, one at a time (two jobs on two cores ruin both timings). ``--frozen-prefix N`` freezes the
embeddings + N layers and caches their output (``encoders.frozen_prefix``; for MPNet the relative position table
all layers share is frozen with them); which N ships is chosen on the development split (``valid``), never on test.
``--method qaid`` runs QAID as shipped (``configs/qaid_<dataset>.py:<shots>``: the step chosen on ``valid``) on
MPNet-base instead: the method of the best published rows, on their model size.
Fit: ConvFiT's Stage 2 train loop incl. compiles (``stage2_seconds``) + the classifier (``classifier_seconds``);
QAID's training incl. compiles and its development curve (``train_seconds``: the curve chooses the step); wall:
the whole process. Rows go to ``bench/results/models.jsonl``, the table to ``bench/results/models.md``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import statistics

from runner import REPO, RESULTS, finish_table, load_rows, machine, mean_std, run_main

DATASETS = ("banking77", "clinc150", "hwu64")
SHOTS = ("10", "5")
ROWS = RESULTS / "models.jsonl"
PEERS = RESULTS / "peers.jsonl"
# The best published row per cell: QAID (RoBERTa-base), Yehudai et al. 2023, Table 2 (the targets).
PAPER_BEST = {("banking77", "10"): 88.83, ("clinc150", "10"): 94.64, ("hwu64", "10"): 87.98,
              ("banking77", "5"): 85.25, ("clinc150", "5"): 93.41, ("hwu64", "5"): 85.52}
MODEL = "mpnet-base"


METHODS = ("convfit", "qaid")


def run_name(dataset: str, shots: str, frozen_prefix: int, method: str = "convfit",
             learning_rate: float | None = None) -> str:
  suffix = ("" if frozen_prefix < 0 else f"-fp{frozen_prefix}") + (f"-lr{learning_rate:g}" if learning_rate else "")
  return f"{method}-{MODEL}-{dataset}-{shots}{suffix}"


def variant_label(name: str) -> str:
  """What a run name's suffixes say: the frozen prefix, the method where not ConvFiT, the learning rate where not
  the config's."""
  parts = []
  if name.startswith("qaid-"):
    parts.append("QAID")
  prefix = re.search(r"-fp(\d+)", name)
  parts.append(f"emb + {prefix.group(1)} layers" if prefix else "no prefix")
  rate = re.search(r"-lr([0-9.e-]+)$", name)
  if rate:
    parts.append(f"lr {rate.group(1)}")
  return ", ".join(parts)


def run_one(dataset: str, shots: str, seed: int, frozen_prefix: int, runs_dir: pathlib.Path,
            method: str = "convfit", learning_rate: float | None = None) -> None:
  name = run_name(dataset, shots, frozen_prefix, method, learning_rate)
  args = [f"--config=configs/{method}_{dataset}.py:{shots}", f"--config.seed={seed}", f"--config.model.name={MODEL}"]
  if method == "convfit":
    args.append("--config.eval.before_training=False")
  if frozen_prefix >= 0:
    args.append(f"--config.train.frozen_prefix_layers={frozen_prefix}")
  if learning_rate:
    args.append(f"--config.train.learning_rate={learning_rate:g}")
  row = run_main(name, seed, args, runs_dir / f"{name}-seed{seed}", ROWS)
  if row:
    r = row["results"]
    print(f"{name} seed {seed}: {100 * r['accuracy']:.2f} (fit {fit_seconds(row) / 60:.1f} min)", flush=True)


def fit_seconds(row: dict) -> float:
  """ConvFiT: Stage 2 (compiles included) + the classifier; QAID: its training with the development curve that
  chooses its step; SetFit: its ``trainer.train()``."""
  r = row["results"]
  for key in ("fit_seconds", "train_seconds"):
    if key in r:
      return r[key]
  return r.get("stage2_seconds", 0.0) + r.get("classifier_seconds", 0.0)


def setfit_table(peers: list[dict], rows: list[dict]) -> list[str]:
  """SetFit (bench/peers.py, 20 iterations) with either body beside ConvFiT on MPNet-base, for the cells where
  SetFit ran on MPNet-base: the peer users would run, on the same encoder."""
  cells = [(d, s) for s in SHOTS for d in DATASETS
           if any(r["name"] == f"setfit-iterations-{MODEL}-{d}-{s}" for r in peers)]
  if not cells:
    return []
  lines = ["", "## SetFit on the same encoder", "",
           "SetFit 1.2 (20 iterations, logistic-regression head: bench/peers.py `--setfit-model mpnet-base`, torch "
           "2.13 CPU) on the same pools and test sets; fit = its `trainer.train()` in minutes (median). ConvFiT: "
           "the table above's MPNet-base row with the embeddings + 4 layers frozen.", "",
           "| cell | SetFit, MiniLM-L6 | fit min | SetFit, MPNet-base | fit min | ConvFiT, MPNet-base | fit min |",
           "|---|---|---|---|---|---|---|"]
  for dataset, shots in cells:
    out = []
    for group in ([r for r in peers if r["name"] == f"setfit-iterations-{dataset}-{shots}"],
                  [r for r in peers if r["name"] == f"setfit-iterations-{MODEL}-{dataset}-{shots}"],
                  [r for r in rows if r["name"] == run_name(dataset, shots, 4)]):
      acc, _, fit = _cell(group)
      out += [acc, fit]
    lines.append(f"| {dataset} {shots}-shot | " + " | ".join(out) + " |")
  return lines


def dev_accuracy(row: dict) -> float | None:
  """``valid`` accuracy of what was chosen on it: ConvFiT's decision rule, QAID's step."""
  selection = row["results"].get("classifier_selection")
  if selection:
    return selection["accuracy"][selection["chosen"]]
  return row["results"].get("selected_dev_accuracy")


def _cell(rows: list[dict]) -> tuple[str, str, str]:
  """(test accuracy, valid accuracy, fit minutes) over the seeds of one row."""
  if not rows:
    return "–", "–", "–"
  devs = [d for d in map(dev_accuracy, rows) if d is not None]
  fit = statistics.median(fit_seconds(r) for r in rows) / 60
  return (f"{mean_std([r['results']['accuracy'] for r in rows])} ({len(rows)})",
          mean_std(devs) if devs else "–", f"{fit:.1f}")


def write_table() -> None:
  rows, peers = load_rows(ROWS), load_rows(PEERS)
  by_name: dict[str, list[dict]] = {}
  for r in rows:
    by_name.setdefault(r["name"], []).append(r)
  lines = ["# The shipped intent method on MiniLM-L6 and MPNet-base", "",
           "ConvFiT as shipped (`configs/convfit_<dataset>.py:<shots>`), full test sets, accuracy % mean ± std "
           "(seeds), `valid` accuracy of the chosen decision rule, median fit minutes (Stage 2 incl. compiles + the "
           "classifier) on this 2-core CPU; QAID rows: QAID as shipped (`configs/qaid_<dataset>.py:<shots>`, `valid` "
           "accuracy of the step chosen on it; fit: training incl. its development curve). MiniLM rows: "
           "bench/peers.py. Best published row: QAID, RoBERTa-base "
           "(Yehudai et al. 2023, Table 2).", "", machine(rows), "",
           "| cell | best published | MiniLM-L6 | fit min | MPNet-base (prefix) | valid | fit min | vs best |",
           "|---|---|---|---|---|---|---|---|"]
  for shots in SHOTS:
    for dataset in DATASETS:
      mini = [r for r in peers if r["name"] == f"convfit-{dataset}-{shots}"]
      mini_acc, _, mini_fit = _cell(mini)
      variants = cell_variants(by_name, dataset, shots)
      best = PAPER_BEST[(dataset, shots)]
      for name in variants or [None]:
        got = by_name.get(name, [])
        acc, dev, fit = _cell(got)
        if not got:
          lines.append(f"| {dataset} {shots}-shot | {best:.2f} | {mini_acc} | {mini_fit} | not run yet | – | – | – |")
          continue
        prefix = variant_label(name)
        delta = f"{100 * statistics.mean(r['results']['accuracy'] for r in got) - best:+.2f}"
        lines.append(f"| {dataset} {shots}-shot | {best:.2f} | {mini_acc} | {mini_fit} | {acc} ({prefix}) | {dev} | "
                     f"{fit} | {delta} |")
  lines += setfit_table(peers, rows)
  if write_figure(by_name, peers):
    lines += ["", f"![{FIGURE_ALT}](figures/{FIGURE.name})"]
  finish_table(lines, rows, "models")


FIGURE = RESULTS / "figures" / "models.png"
FIGURE_ALT = ("test accuracy per cell: ConvFiT on MiniLM-L6, the MPNet-base row valid prefers, and the best "
              "published row")


def cell_variants(by_name: dict[str, list[dict]], dataset: str, shots: str) -> list[str]:
  """The cell's MPNet-base row names (every method and variant), sorted."""
  return sorted({n for n in by_name for m in METHODS if n.startswith(f"{m}-{MODEL}-{dataset}-{shots}")})


def preferred_on_valid(by_name: dict[str, list[dict]], dataset: str, shots: str) -> str | None:
  """The cell's MPNet-base row (any method or variant) with the highest mean ``valid`` accuracy, among rows of 3
  seeds or more where there are any: what a user picking on development data would run."""
  names = cell_variants(by_name, dataset, shots)
  names = [n for n in names if len(by_name[n]) >= 3] or names
  scored = [(statistics.mean(devs), n) for n in names
            if (devs := [d for d in map(dev_accuracy, by_name[n]) if d is not None])]
  return max(scored)[1] if scored else None


def write_figure(by_name: dict[str, list[dict]], peers: list[dict]) -> bool:
  """``figures/models.png``: per cell, ConvFiT on MiniLM-L6 and the MPNet-base row ``valid`` prefers (mean and
  std over seeds), the best published row as a line. False (nothing written) before any MPNet-base row."""
  cells = [(d, s) for s in SHOTS for d in DATASETS]
  chosen = {cell: preferred_on_valid(by_name, *cell) for cell in cells}
  if not any(chosen.values()):
    return False
  from matplotlib.figure import Figure
  fig = Figure(figsize=(10, 4.2), layout="constrained")
  ax = fig.add_subplot()
  for i, cell in enumerate(cells):
    groups = [("MiniLM-L6, ConvFiT", [r for r in peers if r["name"] == f"convfit-{cell[0]}-{cell[1]}"], "#8fb3d9"),
              ("MPNet-base, the row valid prefers", by_name.get(chosen[cell], []), "#1f5f99")]
    for offset, (label, group, color) in zip((-0.2, 0.2), groups):
      if group:
        accs = [100 * r["results"]["accuracy"] for r in group]
        ax.bar(i + offset, statistics.mean(accs), 0.38, yerr=statistics.stdev(accs) if len(accs) > 1 else 0,
               color=color, label=label if i == 0 else None, capsize=3)
    ax.hlines(PAPER_BEST[cell], i - 0.42, i + 0.42, color="black", linewidth=2,
              label="best published (QAID, RoBERTa-base)" if i == 0 else None)
    if chosen[cell]:
      ax.text(i + 0.2, 76.4, variant_label(chosen[cell]), ha="center", va="bottom", rotation=90, fontsize=7,
              color="white")
  ax.set_xticks(range(len(cells)), [f"{d}\n{s}-shot" for d, s in cells])
  ax.set_ylim(76, 96)
  ax.set_ylabel("test accuracy, %")
  fig.legend(loc="outside upper center", ncols=3, fontsize=8, frameon=False)
  FIGURE.parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(FIGURE, dpi=110, metadata={"Software": None})
  return True


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--cells", default=",".join(f"{d}:{s}" for s in SHOTS for d in DATASETS))
  parser.add_argument("--seeds", default="0")
  parser.add_argument("--frozen-prefix", type=int, default=-1, help="embeddings + this many layers frozen (-1: off)")
  parser.add_argument("--method", choices=METHODS, default="convfit")
  parser.add_argument("--learning-rate", type=float, default=None,
                      help="train.learning_rate instead of the config's (chosen on valid: the notes)")
  parser.add_argument("--runs-dir", default=str(REPO / "runs" / "bench_models"))
  parser.add_argument("--table", action="store_true", help="only rewrite bench/results/models.md")
  args = parser.parse_args()
  if not args.table:
    os.environ.setdefault("FEWSHOT_NLU_DATA", str(REPO.parent / "shared" / "data"))
    for cell in args.cells.split(","):
      dataset, shots = cell.split(":")
      for seed in map(int, args.seeds.split(",")):
        run_one(dataset, shots, seed, args.frozen_prefix, pathlib.Path(args.runs_dir), args.method,
                args.learning_rate)
        write_table()
  write_table()


if __name__ == "__main__":
  main()
