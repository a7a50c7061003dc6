"""Out-of-scope detection on CLINC150 for any exported single-label intent model (ConvFiT / baseline k-NN or MLP,
QAID): the in-scope test split (4,500 utterances, 150 intents) plus the 1,000 out-of-scope test utterances
(Larson et al. 2019), answered by ``predict(..., reject=True)`` with the threshold calibrated when the model was
exported (``fewshot_nlu.models.rejection``: the 10th percentile of the training examples' out-of-fold scores).

  python -m fewshot_nlu.main --config=configs/convfit_clinc150.py:10 --workdir=runs/convfit-clinc150-10
  python bench/oos.py --model runs/convfit-clinc150-10/export --name convfit-clinc150-10
  python bench/oos.py --table                              # rewrite bench/results/oos.md only

Per row: in-scope accuracy (right intent and not rejected), OOS recall / precision / F1 of rejection, the overall
accuracy with "out of scope" as a 151st answer, and the in-scope accuracy without rejection. Beside the calibrated
threshold: ``--threshold T`` if given, and the DSE suite's rule (mean - std of the evaluation queries' own
scores: transductive, it looks at the test set, so it is a reference, not a deployable threshold). Every rule
reads the score the model rejects by (``IntentModel.rejection_score``: the k-NN vote, or the nearest example's
cosine for a logistic-regression / MLP head). For an intent model whose decision is not 1-NN, rows named
``nearest cosine`` also reject its decisions by the cosine of the nearest training example with the threshold a
leave-one-out calibration gives (and, for exports that reject by the head's probability, the DSE rule on it).
One JSON row per model (with its command) is appended to ``bench/results/oos.jsonl``; the table is
``bench/results/oos.md``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import sys
import time

import numpy as np

try:
  from runner import RESULTS, load_rows, machine
except ImportError:  # imported as bench.oos (the tests)
  from bench.runner import RESULTS, load_rows, machine

ROWS = RESULTS / "oos.jsonl"
TABLE = RESULTS / "oos.md"
CLINC_OOS_LABEL = "oos"  # the label of CLINC150's out-of-scope files


def read_clinc(folder: pathlib.Path, split: str) -> tuple[list[str], list[str], list[str]]:
  """(in-scope texts, their intents, out-of-scope texts) of ``split`` (``<split>/`` and ``oos/<split>/``)."""
  from fewshot_nlu.data.intent_folder import read_intent_split
  inside = read_intent_split(folder / split)
  outside = read_intent_split(folder / "oos" / split)
  if CLINC_OOS_LABEL in inside.labels:
    raise SystemExit(f"{folder / split}: in-scope split labelled {CLINC_OOS_LABEL!r}; is this CLINC150?")
  return inside.texts, inside.labels, outside.texts


def evaluate(model, texts: list[str], labels: list[str], oos_texts: list[str], threshold: float | None) -> dict:
  """The model's answers (no rejection) once, then the metrics under each threshold."""
  from fewshot_nlu.models import prototypes
  from fewshot_nlu.evaluation.out_of_scope import detection_metrics
  from fewshot_nlu.models.protocol import OUT_OF_SCOPE
  from fewshot_nlu.models import rejection
  predictions = model.predict(texts + oos_texts, neighbours=1)
  predicted = [p.label for p in predictions]
  scores = np.array([rejection.score_of(p, rejection_score(model)) for p in predictions])
  gold = labels + [OUT_OF_SCOPE] * len(oos_texts)
  thresholds = {}
  if model.rejection is not None:
    thresholds["calibrated"] = model.rejection.threshold
  if threshold is not None:
    thresholds["given"] = threshold
  thresholds["DSE mean-std (test scores)"] = prototypes.oos_thresholds(scores)["mean-std"]
  by_threshold = {rule: detection_metrics(predicted, scores, gold, t) for rule, t in thresholds.items()}
  if getattr(model, "classifier", "knn") != "knn" or getattr(model, "k", 1) != 1:
    extra = nearest_cosine_rules(model, predictions, predicted, gold)
    if rejection_score(model) == "nearest":  # the rows above are on that cosine already
      extra = {rule: m for rule, m in extra.items() if "calibrated" in rule}
    by_threshold.update(extra)
  return {"num_in_scope": len(texts), "num_oos": len(oos_texts),
          "in_scope_accuracy_without_rejection": float(np.mean(np.array(predicted[: len(texts)]) == np.array(labels))),
          "rejection": model.rejection.to_dict() if model.rejection else None,
          "by_threshold": by_threshold}


def rejection_score(model) -> str:
  """What the model's rejection thresholds (``models.rejection.SCORES``): an intent model's own choice, else the
  prediction's score (QAID)."""
  return getattr(model, "rejection_score", "prediction")


def nearest_cosine_rules(model, predictions, predicted: list[str], gold: list[str]) -> dict:
  """The model's own decisions, rejected by the cosine of each query's nearest indexed example: threshold the
  10th percentile of the indexed examples' leave-one-out nearest cosines (what a 1-NN model calibrates without
  held-out data), and the DSE rule on the test queries' nearest cosines."""
  from fewshot_nlu.models import prototypes
  from fewshot_nlu.evaluation.out_of_scope import detection_metrics
  from fewshot_nlu.models import rejection
  nearest = np.array([rejection.score_of(p, "nearest") for p in predictions])
  loo = rejection.knn_leave_one_out(model.index.vectors, [row["label"] for row in model.index.payloads], 1)
  thresholds = {
      "nearest cosine: calibrated leave-one-out": rejection.calibrate(loo, rule="leave-one-out 1-NN").threshold,
      "nearest cosine: DSE mean-std (test scores)": prototypes.oos_thresholds(nearest)["mean-std"]}
  return {rule: detection_metrics(predicted, nearest, gold, t) for rule, t in thresholds.items()}


def write_table(rows_file: pathlib.Path = ROWS, table: pathlib.Path = TABLE) -> None:
  rows = load_rows(rows_file)
  lines = ["# Out-of-scope detection on CLINC150", "",
           f"Generated by `python bench/oos.py` from `{rows_file.name}` (one JSON row per exported model, with its "
           "command). In-scope test utterances + the out-of-scope test utterances; a query is rejected when its "
           "score is below the threshold. `calibrated`: the threshold saved with the model (10th percentile of its "
           "training examples' out-of-fold scores); `DSE mean-std`: the DSE suite's rule on the test queries' own "
           "scores (transductive, a reference). All numbers in %.", "",
           "| model | kind | threshold | in-scope acc. | OOS recall | OOS precision | OOS F1 | accuracy (all) | "
           "in-scope acc., no rejection |",
           "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
  for row in rows:
    r = row["results"]
    for rule, m in r["by_threshold"].items():
      lines.append(f"| {row['name']} | {row['kind']} | {rule} ({m['threshold']:.3f}) | {100 * m['in_accuracy']:.2f} | "
                   f"{100 * m['oos_recall']:.2f} | {100 * m['oos_precision']:.2f} | {100 * m['oos_f1']:.2f} | "
                   f"{100 * m['accuracy']:.2f} | {100 * r['in_scope_accuracy_without_rejection']:.2f} |")
  lines += ["", "## Commands", ""] + [f"- `{row['name']}`: `{row['command']}`" for row in rows]
  if rows:
    lines += ["", rows[-1]["machine"]]
  notes = table.with_name(f"{table.stem}_notes.md")
  if notes.exists():
    lines += ["", notes.read_text().strip()]
  table.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--model", help="an export/ folder of a single-label intent model")
  parser.add_argument("--name", help="the row's name (default: the run folder's name)")
  parser.add_argument("--threshold", type=float, help="also evaluate this threshold (the model's own scale)")
  parser.add_argument("--data", default=str(pathlib.Path(os.environ.get("FEWSHOT_NLU_DATA", "../shared/data"))
                                            / "CLINC150"), help="the CLINC150 folder (default $FEWSHOT_NLU_DATA/CLINC150)")
  parser.add_argument("--split", default="test", help="in-scope split; the OOS utterances come from oos/<split>")
  parser.add_argument("--rows", default=str(ROWS), help="the JSONL the row is appended to")
  parser.add_argument("--markdown", default=str(TABLE), help="the table rendered from --rows")
  parser.add_argument("--table", action="store_true", help="only rewrite the table")
  args = parser.parse_args(argv)
  rows_file, table = pathlib.Path(args.rows), pathlib.Path(args.markdown)
  if not args.table:
    if not args.model:
      parser.error("--model is required (or --table)")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from fewshot_nlu import models
    model = models.load(args.model)
    if not hasattr(model, "calibrate_rejection"):
      raise SystemExit(f"{args.model}: a {model.kind} model; out-of-scope rejection needs a single-label intent "
                       "model (intent_model, qaid)")
    start = time.perf_counter()
    texts, labels, oos_texts = read_clinc(pathlib.Path(args.data), args.split)
    results = evaluate(model, texts, labels, oos_texts, args.threshold)
    export = pathlib.Path(args.model).resolve()
    row = {"name": args.name or (export.parent.name if export.name == "export" else export.name),
           "kind": model.kind + (f" ({model.classifier}, k={model.k})" if model.kind == "intent_model" else
                                 f" ({model.match})"),
           "model": args.model, "command": " ".join(["python", "bench/oos.py", *(argv or sys.argv[1:])]),
           "results": results, "wall_seconds": round(time.perf_counter() - start, 1), "machine": machine(),
           "date": datetime.date.today().isoformat()}
    rows_file.parent.mkdir(parents=True, exist_ok=True)
    with open(rows_file, "a", encoding="utf-8") as f:
      f.write(json.dumps(row) + "\n")
    for rule, m in results["by_threshold"].items():
      print(f"{row['name']} {rule} ({m['threshold']:.3f}): in-scope {100 * m['in_accuracy']:.2f}, OOS recall "
            f"{100 * m['oos_recall']:.2f} precision {100 * m['oos_precision']:.2f} F1 {100 * m['oos_f1']:.2f}")
  write_table(rows_file, table)
  return 0


if __name__ == "__main__":
  sys.exit(main())
