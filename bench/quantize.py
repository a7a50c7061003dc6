"""Accuracy of int8 inference (``encoders.quantize``) against float32: the same models, the same test sets.

  python bench/quantize.py --intent-export runs/default/export:banking77 \\
      --nlu-export runs/bench_joint_nlu/learned-snips-k10-seed0/export --write

Each model is evaluated twice, as trained (float32) and loaded with ``quantize="int8"`` (what
``fn.load(path, quantize="int8")``, ``predict --quantize int8`` and ``serve --quantize int8`` run):
  * the untouched encoder (MiniLM-L6): 1-NN, class prototypes and logistic regression on BANKING77 / CLINC150 /
    HWU64 10-shot, scored on the full test sets (``bench/encoder_baselines.py``'s protocol: the same pools, the
    logistic regression's weight decay chosen on ``valid``), and the cosine between each test utterance's float32
    and int8 vectors;
  * ``--intent-export DIR:DATASET``: an intent export's test accuracy on DATASET's test split (the index rows
    stay the float32 vectors the export stored; only the queries are encoded int8);
  * ``--nlu-export DIR``: a joint NLU export trained on SNIPS: intent accuracy, slot F1 and sentence accuracy
    on the SNIPS test set (``methods.nlu.train.evaluate``, as bench/joint_nlu.py scores it).
Nothing is trained here: the quantisation is of a trained model, so one row per model; the spread across models
(three datasets, three seeds of the joint export) is the evidence. Rows go to ``bench/results/quantize.jsonl``;
``--write`` rewrites ``quantize.md`` (with ``quantize_notes.md`` appended).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

import numpy as np

from runner import REPO, RESULTS, machine

sys.path.insert(0, str(REPO))

ROWS = RESULTS / "quantize.jsonl"
QUANTIZATIONS = (None, "int8")


def untouched_rows(data_dir: str) -> list[dict]:
  from encoder_baselines import DATASETS, cell, split
  from fewshot_nlu.encoders import quantize as quantization
  from fewshot_nlu.encoders.sentence import SentenceEncoder
  encoders = {}
  for quantize in QUANTIZATIONS:
    encoders[quantize] = SentenceEncoder.from_pretrained("minilm-l6", max_length=48, batch_size=64)
    quantization.quantize_encoders(encoders[quantize], quantize)
  rows = []
  for dataset in DATASETS:
    by_quantization, vectors = {}, {}
    for quantize, encoder in encoders.items():
      by_quantization[quantize or "float32"] = cell(encoder, dataset, "10", data_dir)
      vectors[quantize] = encoder.encode(split(dataset, "test", data_dir).texts)
    cosine = np.sum(vectors[None] * vectors["int8"], axis=1)
    rows.append({"part": "untouched", "model": "minilm-l6", "dataset": dataset, "shots": "10",
                 **{f"{q}_{k}": r[k] for q, r in by_quantization.items() for k in ("knn_test", "proto_test",
                                                                                   "logreg_test")},
                 "cosine_mean": float(cosine.mean()), "cosine_min": float(cosine.min())})
    print(json.dumps(rows[-1]), flush=True)
  return rows


def intent_export_row(spec: str, data_dir: str) -> dict:
  from encoder_baselines import split
  from fewshot_nlu import models
  directory, dataset = spec.rsplit(":", 1)
  test = split(dataset, "test", data_dir)
  row = {"part": "intent_export", "model": directory, "dataset": dataset}
  for quantize in QUANTIZATIONS:
    model = models.load(directory, quantize=quantize)
    predicted = [p.label for p in model.predict(test.texts)]
    row[f"{quantize or 'float32'}_accuracy"] = float(np.mean([p == g for p, g in zip(predicted, test.labels)]))
  print(json.dumps(row), flush=True)
  return row


def nlu_export_row(directory: str, data_dir: str) -> dict:
  from fewshot_nlu import models
  from fewshot_nlu.data import annotated
  from fewshot_nlu.methods.nlu import train
  examples = annotated.read(pathlib.Path(data_dir) / "SNIPS_BIO" / "test").examples
  row = {"part": "nlu_export", "model": directory, "dataset": "snips"}
  for quantize in QUANTIZATIONS:
    with tempfile.TemporaryDirectory() as scratch:  # evaluate writes its predictions.tsv there
      results = train.evaluate(models.load(directory, quantize=quantize), examples, pathlib.Path(scratch))
    for key in ("intent_accuracy", "slot_f1", "sentence_accuracy"):
      row[f"{quantize or 'float32'}_{key}"] = results[key]
  print(json.dumps(row), flush=True)
  return row


def write_table(rows: list[dict], command: str) -> None:
  pct = lambda v: f"{100 * v:.2f}"  # noqa: E731
  lines = ["# int8 inference against float32 (bench/quantize.py)", "", __doc__.split("\n\n")[2].replace("``", "`"),
           "", machine(rows), "", f"Command: `{command}`", "",
           "| model | test set | metric | float32 | int8 | int8 − float32 |",
           "| --- | --- | --- | ---: | ---: | ---: |"]
  cosines = []
  for r in rows:
    if r["part"] == "untouched":
      metrics = (("1-NN", "knn_test"), ("prototypes", "proto_test"), ("logistic regression", "logreg_test"))
      name = "MiniLM-L6 untouched"
      cosines.append(f"{r['dataset']} mean {r['cosine_mean']:.4f}, min {r['cosine_min']:.4f}")
    elif r["part"] == "intent_export":
      metrics, name = (("accuracy", "accuracy"),), r["model"]
    else:
      metrics = (("intent accuracy", "intent_accuracy"), ("slot F1", "slot_f1"),
                 ("sentence accuracy", "sentence_accuracy"))
      name = r["model"]
    for label, key in metrics:
      a, b = r[f"float32_{key}"], r[f"int8_{key}"]
      lines.append(f"| {name} | {r['dataset']} {r.get('shots', '')}".rstrip() +
                   f" | {label} | {pct(a)} | {pct(b)} | {100 * (b - a):+.2f} |")
  if cosines:
    lines += ["", "Cosine between a test utterance's float32 and int8 vectors (the untouched encoder): " +
              "; ".join(cosines) + "."]
  notes = RESULTS / "quantize_notes.md"
  if notes.exists():
    lines += ["", notes.read_text().strip()]
  (RESULTS / "quantize.md").write_text("\n".join(lines) + "\n")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
  parser.add_argument("--intent-export", action="append", default=[], metavar="DIR:DATASET")
  parser.add_argument("--nlu-export", action="append", default=[], metavar="DIR")
  parser.add_argument("--skip-untouched", action="store_true", help="only the exports")
  parser.add_argument("--write", action="store_true")
  args = parser.parse_args()
  rows = [] if args.skip_untouched else untouched_rows(args.data_dir)
  rows += [intent_export_row(spec, args.data_dir) for spec in args.intent_export]
  rows += [nlu_export_row(directory, args.data_dir) for directory in args.nlu_export]
  command = ("python bench/quantize.py" + "".join(f" --intent-export {s}" for s in args.intent_export) +
             "".join(f" --nlu-export {d}" for d in args.nlu_export) +
             (" --skip-untouched" if args.skip_untouched else "") + " --write")
  with open(ROWS, "a", encoding="utf-8") as f:
    for r in rows:
      f.write(json.dumps({**r, "command": command, "machine": machine()}) + "\n")
  if args.write:
    write_table(rows, command)


if __name__ == "__main__":
  sys.path.insert(0, str(REPO / "bench"))
  main()
