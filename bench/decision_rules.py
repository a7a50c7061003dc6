"""The decision rule on a specialised encoder: which classifier over ConvFiT's vectors should a user get?

For each ConvFiT export given (a workdir of ``python -m fewshot_nlu.main --config=configs/convfit_<dataset>.py:<shots>``),
its encoder encodes the run's few-shot pool, the dataset's ``valid`` split and its ``test`` split, and these rules
are scored on both:

  * ``1-NN``: the paper's rule (ConvFiT §2.2), the nearest pool example by cosine;
  * ``k-NN (k)``: each label scores its summed cosine among the k nearest (``models.intent_model.vote``);
  * ``prototype``: the nearest class mean (``evaluation.prototypes``: unit-length means of unit-length vectors);
  * ``logistic regression``: a linear softmax layer (``heads.mlp`` with no hidden layer, AdamW lr 1e-2,
    200 epochs, batch 32, as bench/encoder_baselines.py fits on the untouched encoder) for each weight decay in
    ``WEIGHT_DECAYS``: one row per decay, so a rule for every dataset can be chosen on ``valid`` alone.

Which rule to ship is decided on the ``valid`` columns (never the test set); the test columns say what it gives.

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


def knn_scores(queries: np.ndarray, pool: np.ndarray, y: np.ndarray, classes: int, k: int) -> np.ndarray:
  """Each label's summed cosine among the k nearest pool vectors (k = 1: the nearest one's cosine)."""
  sims = queries @ pool.T
  nearest = np.argsort(-sims, axis=1)[:, :k]
  scores = np.zeros((len(queries), classes))
  for j in range(k):
    np.add.at(scores, (np.arange(len(queries)), y[nearest[:, j]]), sims[np.arange(len(queries)), nearest[:, j]])
  return np.where(scores == 0, -np.inf, scores)


def score_export(workdir: pathlib.Path, data_dir: str) -> dict:
  from fewshot_nlu.evaluation import prototypes
  from fewshot_nlu.heads import mlp
  from fewshot_nlu.index import normalize
  from fewshot_nlu.models.intent_model import IntentModel
  config = json.loads((workdir / "config.json").read_text())
  dataset, shots = config["data"]["builder"], config["data"]["train_split"].rpartition("_")[2]
  model = IntentModel.load(workdir / "export")
  pool, dev, test = (split(dataset, s, data_dir) for s in (f"train_{shots}", "valid", "test"))
  labels = sorted(set(pool.labels))
  index = {l: i for i, l in enumerate(labels)}
  start = time.perf_counter()
  x, xd, xt = (model.encoder.encode(list(s.texts)) for s in (pool, dev, test))
  x, xd, xt = (normalize(v) for v in (x, xd, xt))
  y = np.array([index[l] for l in pool.labels])
  yd, yt = (np.array([index.get(l, -1) for l in s.labels]) for s in (dev, test))
  accuracy = lambda scores, gold: float((scores.argmax(1) == gold).mean())  # noqa: E731
  rules = {}
  for k in (1, *KS):
    name = "1-NN" if k == 1 else f"k-NN ({k})"
    rules[name] = [accuracy(knn_scores(q, x, y, len(labels), k), g) for q, g in ((xd, yd), (xt, yt))]
  names, means = prototypes.prototypes(x, pool.labels)
  assert names == labels  # the same sorted order as y's indices
  rules["prototype"] = [accuracy(q @ means.T, g) for q, g in ((xd, yd), (xt, yt))]
  for decay in WEIGHT_DECAYS:
    layers = logistic_regression(x, y, len(labels), decay)
    rules[f"logistic regression (wd {decay:g})"] = [accuracy(mlp.predict_proba(layers, q), g)
                                                    for q, g in ((xd, yd), (xt, yt))]
  return {"workdir": str(workdir.relative_to(REPO) if workdir.is_relative_to(REPO) else workdir),
          "dataset": dataset, "shots": shots, "seed": config["seed"], "num_valid": len(yd), "num_test": len(yt),
          "rules": {name: {"valid": v, "test": t} for name, (v, t) in rules.items()},
          "seconds": round(time.perf_counter() - start, 1)}


def write_table(rows: list[dict]) -> None:
  cells = sorted({(r["dataset"], r["shots"]) for r in rows}, key=lambda c: (int(c[1]), c[0]))
  names = list(rows[0]["rules"])
  header = "| rule | " + " | ".join(f"{d} {s}-shot valid | test" for d, s in cells) + " |"
  lines = ["# ConvFiT's encoder under other decision rules (bench/decision_rules.py)", "",
           "Accuracy in %, mean ± std over the exports (seeds) of each cell; `valid` decides, `test` reports. "
           + machine(), "", header, "| --- |" + " ---: | ---: |" * len(cells)]
  for name in names:
    row = [name]
    for cell in cells:
      group = [r for r in rows if (r["dataset"], r["shots"]) == cell]
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
