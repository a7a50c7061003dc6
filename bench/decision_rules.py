"""The decision rule on a specialised encoder: which classifier over ConvFiT's vectors should a user get?

For each ConvFiT export given (a workdir of
``python -m fewshot_nlu.main --config=configs/convfit_<dataset>.py:<shots>``), its encoder encodes the run's
few-shot pool, the dataset's ``valid`` split and its ``test`` split, and these rules are scored on both:

  * ``1-NN``: the paper's rule (ConvFiT §2.2), the nearest pool example by cosine;
  * ``k-NN (k)``: each label scores its summed cosine among the k nearest (``models.intent_model.vote``);
  * ``prototype``: the nearest class mean (``evaluation.prototypes``: unit-length means of unit-length vectors);
  * ``logistic regression``: a linear softmax layer (``heads.mlp`` with no hidden layer, AdamW lr 1e-2,
    200 epochs, batch 32, as bench/encoder_baselines.py fits on the untouched encoder) for each weight decay in
    ``WEIGHT_DECAYS``: one row per decay, so a rule for every dataset can be chosen on ``valid`` alone.

Each rule is scored in two spaces (``SPACES``), from one encoder pass: ``projected``, Stage 2's d_o tanh
down-projection (the space ConvFiT trains and, in the paper, classifies in), and ``pooled``, the mean-pooled vectors
before it (``classifier.space``; SimCLR's observation, Chen et al. 2020 §4.2, that the layer before a contrastive
projection head represents better). Exports without a projection (``classifier.space=pooled``) have only the second.

Which rule to ship is decided on the ``valid`` columns (never the test set); the test columns say what it gives.
Long-tail exports (``bench/peers.py --cells DATASET:skewed``) are scored on their own pool and the dataset's splits.

  python bench/decision_rules.py runs/bench_qaid/convfit-banking77-10-seed1 ... --write

Rows go to ``bench/results/decision_rules.jsonl`` (one per export), the table to ``decision_rules.md``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

from encoder_baselines import logistic_regression, split
from runner import REPO, RESULTS, load_rows, machine, mean_std

sys.path.insert(0, str(REPO))

ROWS = RESULTS / "decision_rules.jsonl"
KS = (3, 5)
WEIGHT_DECAYS = (0.0, 0.01, 0.1, 1.0)
SPACES = ("projected", "pooled")


def knn_scores(queries: np.ndarray, pool: np.ndarray, y: np.ndarray, classes: int, k: int) -> np.ndarray:
  """Each label's summed cosine among the k nearest pool vectors (k = 1: the nearest one's cosine)."""
  sims = queries @ pool.T
  nearest = np.argsort(-sims, axis=1)[:, :k]
  scores = np.zeros((len(queries), classes))
  for j in range(k):
    np.add.at(scores, (np.arange(len(queries)), y[nearest[:, j]]), sims[np.arange(len(queries)), nearest[:, j]])
  return np.where(scores == 0, -np.inf, scores)


def space_vectors(encoder, texts: list[str]) -> dict[str, np.ndarray]:
  """``texts``' unit-length vectors in each space the export has (``SPACES``), from one encoder pass."""
  from fewshot_nlu.encoders import projection
  from fewshot_nlu.encoders.sentence import SentenceEncoder
  from fewshot_nlu.index import normalize
  raw = SentenceEncoder(encoder.cfg, encoder.params, encoder.tokenizer, pooling_mode=encoder.pooling_mode,
                        normalize=False, max_length=encoder.max_length, batch_size=encoder.batch_size,
                        dtype=encoder.dtype).encode(texts)
  vectors = {"pooled": normalize(raw)}
  if encoder.projection is not None:
    vectors["projected"] = normalize(np.asarray(projection.apply(encoder.projection, raw)))
  return {space: vectors[space] for space in SPACES if space in vectors}


def score_rules(x, y, queries: list[tuple[np.ndarray, np.ndarray]], labels: list[str]) -> dict[str, list[float]]:
  """Each rule's accuracy on each (query vectors, gold indices) of ``queries``, fitted on pool vectors ``x``."""
  from fewshot_nlu.models import prototypes
  from fewshot_nlu.heads import mlp
  accuracy = lambda scores, gold: float((scores.argmax(1) == gold).mean())  # noqa: E731
  rules = {}
  for k in (1, *KS):
    name = "1-NN" if k == 1 else f"k-NN ({k})"
    rules[name] = [accuracy(knn_scores(q, x, y, len(labels), k), g) for q, g in queries]
  names, means = prototypes.prototypes(x, [labels[i] for i in y])
  assert names == labels  # the same sorted order as y's indices
  rules["prototype"] = [accuracy(q @ means.T, g) for q, g in queries]
  for decay in WEIGHT_DECAYS:
    layers = logistic_regression(x, y, len(labels), decay)
    rules[f"logistic regression (wd {decay:g})"] = [accuracy(mlp.predict_proba(layers, q), g) for q, g in queries]
  return rules


def score_export(workdir: pathlib.Path, data_dir: str) -> dict:
  from fewshot_nlu.models.intent_model import IntentModel
  config = json.loads((workdir / "config.json").read_text())
  data = config["data"]
  raw_dir = data.get("raw_dir", "") if data["builder"] == "intent_folder" else ""
  # a long-tail pool's folder is bench/peers.py's "<dataset>-skewed-seed<s>"
  dataset = pathlib.Path(raw_dir).name.partition("-")[0] if raw_dir else data["builder"]
  raw_dir = str(REPO / raw_dir) if raw_dir and not pathlib.Path(raw_dir).is_absolute() else raw_dir
  shots = data["train_split"].rpartition("_")[2]
  model = IntentModel.load(workdir / "export")
  pool, dev, test = (split(dataset, s, data_dir, raw_dir) for s in (data["train_split"], "valid", "test"))
  labels = sorted(set(pool.labels))
  index = {l: i for i, l in enumerate(labels)}
  start = time.perf_counter()
  x, xd, xt = (space_vectors(model.encoder, list(s.texts)) for s in (pool, dev, test))
  y = np.array([index[l] for l in pool.labels])
  yd, yt = (np.array([index.get(l, -1) for l in s.labels]) for s in (dev, test))
  rules = {}
  for space in x:
    for name, scores in score_rules(x[space], y, [(xd[space], yd), (xt[space], yt)], labels).items():
      rules[f"{name}, {space}"] = scores
  return {"workdir": str(workdir.relative_to(REPO) if workdir.is_relative_to(REPO) else workdir),
          "dataset": dataset, "shots": shots, "seed": config["seed"], "num_valid": len(yd), "num_test": len(yt),
          "rules": {name: {"valid": v, "test": t} for name, (v, t) in rules.items()},
          "seconds": round(time.perf_counter() - start, 1)}


def write_table(rows: list[dict]) -> None:
  lines = ["# ConvFiT's encoder under other decision rules (bench/decision_rules.py)", "",
           "Accuracy in %, mean ± std over the exports (seeds) of each cell; `valid` decides, `test` reports. Each "
           "rule in Stage 2's projected space (the paper's) and on the pooled vectors before the projection. "
           + machine()]
  order = lambda s: (not s.isdigit(), int(s) if s.isdigit() else s)  # noqa: E731  (5, 10, then the long tail)
  for shots in sorted({r["shots"] for r in rows}, key=order):
    cells = sorted({r["dataset"] for r in rows if r["shots"] == shots})
    title = f"{shots}-shot" if shots.isdigit() else "Long tail (bench/peers.py's skewed pools)"
    lines += ["", f"## {title}", "", "| rule | " + " | ".join(f"{d} valid | test" for d in cells) + " |",
              "| --- |" + " ---: | ---: |" * len(cells)]
    groups = {d: [r for r in rows if (r["dataset"], r["shots"]) == (d, shots)] for d in cells}
    scored = [r for g in groups.values() for r in g]
    names = [n for n in dict.fromkeys(n for r in scored for n in r["rules"]) if all(n in r["rules"] for r in scored)]
    for name in names:
      row = [name]
      for group in groups.values():
        for part in ("valid", "test"):
          row.append(mean_std([r["rules"][name][part] for r in group]) + f" ({len(group)})")
      lines.append("| " + " | ".join(row) + " |")
  lines += ["", "## Exports scored", "", "Command: `python bench/decision_rules.py --write WORKDIR ...` with:", ""]
  lines += [f"- `{r['workdir']}` (seed {r['seed']})" for r in rows]
  notes = RESULTS / "decision_rules_notes.md"
  if notes.exists():
    lines += ["", notes.read_text().strip()]
  (RESULTS / "decision_rules.md").write_text("\n".join(lines) + "\n")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("workdirs", nargs="*", type=pathlib.Path)
  parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
  parser.add_argument("--write", action="store_true", help="append rows to bench/results/decision_rules.jsonl")
  parser.add_argument("--table", action="store_true", help="only rewrite bench/results/decision_rules.md")
  args = parser.parse_args()
  if args.table:
    write_table(load_rows(ROWS))
    return
  rows = load_rows(ROWS) if args.write else []
  for workdir in args.workdirs:
    row = score_export(workdir.resolve(), args.data_dir)
    print(row["dataset"], row["shots"], row["seed"],
          "  ".join(f"{n}: {100 * v['valid']:.2f}/{100 * v['test']:.2f}" for n, v in row["rules"].items()),
          flush=True)
    rows = [r for r in rows if r["workdir"] != row["workdir"]] + [row]
    if args.write:
      ROWS.write_text("".join(json.dumps(r) + "\n" for r in rows))
      write_table(rows)


if __name__ == "__main__":
  main()
