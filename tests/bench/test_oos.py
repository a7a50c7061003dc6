"""``bench/oos.py`` evaluates a tiny export on a CLINC-shaped folder, and rejects a logistic-regression export by
its nearest example's cosine."""

import json

import numpy as np
import pytest

from bench import oos as oos_bench
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.models import rejection
from fewshot_nlu.models.intent_model import IntentModel
from fewshot_nlu.models.protocol import OUT_OF_SCOPE
from tests import tiny
from tests.rejection_helpers import LABELS, TEXTS, encoder  # noqa: F401  (encoder: fixture)


def test_oos_bench_on_a_clinc_shaped_folder(encoder, tmp_path):
  data = tmp_path / "CLINC150"
  for folder, texts, labels in (("test", TEXTS, LABELS), ("oos/test", tiny.CORPUS[8:], ["oos"] * 4)):
    (data / folder).mkdir(parents=True)
    (data / folder / "seq.in").write_text("\n".join(texts) + "\n")
    (data / folder / "label").write_text("\n".join(labels) + "\n")
  model = IntentModel.from_examples(encoder, TEXTS[:6], LABELS[:6])
  cal = model.calibrate_rejection()
  export = model.save(tmp_path / "run" / "export")
  rows, table = tmp_path / "oos.jsonl", tmp_path / "oos.md"
  argv = ["--model", str(export), "--data", str(data), "--threshold", "0.99", "--rows", str(rows),
          "--markdown", str(table)]
  assert oos_bench.main(argv) == 0
  [row] = [json.loads(line) for line in rows.read_text().splitlines()]
  assert row["name"] == "run" and row["kind"] == "intent_model (knn, k=1)" and row["command"].endswith("0.99 --rows "
                                                                                                     f"{rows} --markdown {table}")
  results = row["results"]
  assert results["num_in_scope"] == 8 and results["num_oos"] == 4 and results["rejection"] == cal.to_dict()
  # recomputed here from the model's own answers
  answers = model.predict(TEXTS + tiny.CORPUS[8:])
  for rule, threshold in (("calibrated", cal.threshold), ("given", 0.99)):
    m = results["by_threshold"][rule]
    rejected = np.array([a.score < threshold for a in answers])
    kept_right = [not r and a.label == g for a, r, g in zip(answers[:8], rejected[:8], LABELS)]
    assert m["threshold"] == pytest.approx(threshold) and m["in_accuracy"] == pytest.approx(np.mean(kept_right))
    assert m["oos_recall"] == pytest.approx(rejected[8:].mean())
    assert m["oos_precision"] == pytest.approx(rejected[8:].sum() / max(rejected.sum(), 1))
  assert results["in_scope_accuracy_without_rejection"] == pytest.approx(
      np.mean([a.label == g for a, g in zip(answers[:8], LABELS)]))
  text = table.read_text()
  assert "| run | intent_model (knn, k=1) | calibrated (" in text and "DSE mean-std (test scores)" in text
  assert f"`run`: `python bench/oos.py --model {export}" in text
  assert not any(rule.startswith("nearest cosine") for rule in results["by_threshold"])  # 1-NN: the same score


def test_oos_bench_rejects_a_linear_model_by_its_nearest_cosine_too(encoder, tmp_path):
  """A logistic-regression export's decisions, rejected by the nearest example's cosine at the threshold a
  1-NN model would calibrate (the leave-one-out nearest cosines of the indexed examples)."""
  model = IntentModel.from_examples(encoder, TEXTS, LABELS, classifier="mlp",
                                    head=mlp_head.MLPConfig(hidden=(), dropout=0.0, epochs=5))
  queries, gold = TEXTS[:4] + tiny.CORPUS[8:10], LABELS[:4] + [OUT_OF_SCOPE] * 2
  predictions = model.predict(queries, neighbours=1)
  rules = oos_bench.nearest_cosine_rules(model, predictions, [p.label for p in predictions], gold)
  loo = rejection.knn_leave_one_out(encoder.encode(TEXTS), LABELS, 1)
  m = rules["nearest cosine: calibrated leave-one-out"]
  assert m["threshold"] == pytest.approx(float(np.quantile(loo, 0.1)), abs=1e-6)
  rejected = np.array([p.neighbours[0].score < m["threshold"] for p in predictions])
  assert m["oos_recall"] == pytest.approx(rejected[4:].mean())
  assert m["in_accuracy"] == pytest.approx(np.mean([not r and p.label == g for p, r, g in
                                                    zip(predictions[:4], rejected[:4], gold)]))
  # the bench's own rows read the score the model rejects by: here the nearest cosine, not the probability
  cal = model.calibrate_rejection(0.5, texts=tiny.CORPUS[10:12])
  results = oos_bench.evaluate(model, TEXTS[:4], LABELS[:4], tiny.CORPUS[8:10], None)
  rejected = np.array([p.neighbours[0].score < cal.threshold for p in predictions])
  assert results["by_threshold"]["calibrated"]["oos_recall"] == pytest.approx(rejected[4:].mean())
  assert results["by_threshold"]["calibrated"]["rejected"] == rejected.sum()
  assert set(results["by_threshold"]) == {"calibrated", "DSE mean-std (test scores)",
                                          "nearest cosine: calibrated leave-one-out"}
