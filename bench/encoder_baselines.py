"""What a user gets from the untouched encoder, the floor every intent method must clear: 1-NN (cosine), class
prototypes (the nearest class mean, ``evaluation.prototypes``) and logistic regression on the shipped MiniLM-L6's
sentence vectors, over the same few-shot pools the methods train on (BANKING77 / CLINC150 / HWU64, 5 and 10
shots), scored on the full test sets.

  python bench/encoder_baselines.py --write

Logistic regression: a linear softmax layer (``heads.mlp`` with no hidden layer, no dropout) trained with AdamW
(lr 1e-2, 200 epochs, batch 32, class-balanced: the plain loss on these balanced pools) on the unit-length
vectors; its weight decay is chosen from ``WEIGHT_DECAYS`` by accuracy on the dataset's ``valid`` split (never
the test set). Deterministic (seed 0): one row per cell. Rows go to ``bench/results/encoder_baselines.jsonl``,
the table to ``encoder_baselines.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from runner import REPO, RESULTS, machine, rerun_command

sys.path.insert(0, str(REPO))

DATASETS = ("banking77", "clinc150", "hwu64")
SHOTS = ("5", "10")
WEIGHT_DECAYS = (0.0, 0.01, 0.1, 1.0)
ROWS = RESULTS / "encoder_baselines.jsonl"


def split(dataset: str, name: str, data_dir: str, raw_dir: str = ""):
  """Split ``name`` of ``dataset`` under ``data_dir``, or of the ``intent_folder`` at ``raw_dir`` when given."""
  from configs import common
  from fewshot_nlu.data import splits
  config = common.base("evaluate")
  config.data.builder, config.data.dir = ("intent_folder" if raw_dir else dataset), data_dir
  config.data.raw_dir = str(raw_dir)
  config.data.train_split = config.data.eval_split = name  # the splits the builder is checked for
  return splits.read_split(config, name)


def logistic_regression(x, y, classes: int, weight_decay: float):
  from fewshot_nlu.heads import mlp
  config = mlp.MLPConfig(hidden=(), dropout=0.0, learning_rate=1e-2, epochs=200, batch_size=32, optimizer="adamw",
                         weight_decay=weight_decay, decay="constant", class_balanced=True)
  return mlp.train(x, np.eye(classes, dtype=np.float32)[y], config)


def cell(encoder, dataset: str, shots: str, data_dir: str, raw_dir: str = "", predictions: bool = False) -> dict:
  """The cell's row; ``raw_dir``: read the splits from that ``intent_folder`` instead; ``predictions``: add each
  decision's predicted test labels (``knn_predicted`` / ``proto_predicted`` / ``logreg_predicted``)."""
  from fewshot_nlu.models import prototypes
  from fewshot_nlu.heads import mlp
  pool, dev, test = (split(dataset, s, data_dir, raw_dir) for s in (f"train_{shots}", "valid", "test"))
  labels = sorted(set(pool.labels))
  index = {l: i for i, l in enumerate(labels)}
  start = time.perf_counter()
  x, xd, xt = (encoder.encode(s.texts) for s in (pool, dev, test))
  y = np.array([index[l] for l in pool.labels])
  yd, yt = (np.array([index.get(l, -1) for l in s.labels]) for s in (dev, test))
  nearest = lambda q: y[np.argmax(q @ x.T, axis=1)]  # noqa: E731  (vectors are unit length)
  names, means = prototypes.prototypes(x, pool.labels)
  assert names == labels  # both sorted: the prototypes' rows are y's indices
  prototype = lambda q: np.argmax(q @ means.T, axis=1)  # noqa: E731
  by_decay = {}
  for decay in WEIGHT_DECAYS:
    layers = logistic_regression(x, y, len(labels), decay)
    by_decay[decay] = (float((mlp.predict_proba(layers, xd).argmax(1) == yd).mean()), layers)
  chosen = max(WEIGHT_DECAYS, key=lambda d: by_decay[d][0])
  knn_test, logreg_test = nearest(xt), mlp.predict_proba(by_decay[chosen][1], xt).argmax(1)
  proto_test = prototype(xt)
  extra = {"knn_predicted": [labels[i] for i in knn_test], "proto_predicted": [labels[i] for i in proto_test],
           "logreg_predicted": [labels[i] for i in logreg_test]} if predictions else {}
  return {**extra, "dataset": dataset, "shots": shots, "pool": len(pool.texts), "num_test": len(test.texts),
          "knn_test": float((knn_test == yt).mean()), "knn_valid": float((nearest(xd) == yd).mean()),
          "proto_test": float((proto_test == yt).mean()), "proto_valid": float((prototype(xd) == yd).mean()),
          "logreg_test": float((logreg_test == yt).mean()),
          "logreg_valid": by_decay[chosen][0], "logreg_weight_decay": chosen,
          "seconds": round(time.perf_counter() - start, 1)}


def write_table(rows: list[dict], command: str) -> None:
  lines = ["# The untouched encoder: 1-NN, prototypes and logistic regression (bench/encoder_baselines.py)", "",
           __doc__.split("\n\n")[0].replace("\n", " "), "", machine(), "", f"Command: `{command}`", "",
           "| dataset | shots | pool | 1-NN test | prototypes test | logistic regression test "
           "| (valid: 1-NN / prototypes / LR, LR weight decay) |",
           "|---|---|---|---|---|---|---|"]
  for r in rows:
    lines.append(f"| {r['dataset']} | {r['shots']} | {r['pool']} | {100 * r['knn_test']:.2f} | "
                 f"{100 * r['proto_test']:.2f} | {100 * r['logreg_test']:.2f} | {100 * r['knn_valid']:.2f} / "
                 f"{100 * r['proto_valid']:.2f} / {100 * r['logreg_valid']:.2f}, {r['logreg_weight_decay']:g} |")
  (RESULTS / "encoder_baselines.md").write_text("\n".join(lines) + "\n")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
  parser.add_argument("--model", default="minilm-l6")
  parser.add_argument("--write", action="store_true", help="write bench/results/encoder_baselines.{jsonl,md}")
  args = parser.parse_args()
  from fewshot_nlu.encoders.sentence import SentenceEncoder
  encoder = SentenceEncoder.from_pretrained(args.model, max_length=48, batch_size=64)
  rows = []
  for dataset in DATASETS:
    for shots in SHOTS:
      rows.append({**cell(encoder, dataset, shots, args.data_dir), "model": args.model})
      r = rows[-1]
      print(f"{dataset} {shots}-shot: 1-NN {100 * r['knn_test']:.2f}  prototypes {100 * r['proto_test']:.2f}  "
            f"LR {100 * r['logreg_test']:.2f} (valid {100 * r['knn_valid']:.2f} / {100 * r['proto_valid']:.2f} / "
            f"{100 * r['logreg_valid']:.2f})", flush=True)
  if args.write:
    ROWS.write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_table(rows, rerun_command(__file__))


if __name__ == "__main__":
  main()
