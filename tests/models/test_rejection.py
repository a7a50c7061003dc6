"""Out-of-scope rejection (``models.rejection``): out-of-fold scores equal scoring each training row by a model
built without it (k-NN, QAID in every match mode), the MLP's are 5-fold, the calibrated threshold travels with
the export and is used by ``predict(reject=True)`` and the CLI; older exports need an explicit threshold.
``bench/oos.py``: bench/test_oos."""

from __future__ import annotations

import dataclasses

import json

import jax
import numpy as np
import pytest

from fewshot_nlu import models, predict
from fewshot_nlu.encoders import pretrained
from fewshot_nlu.encoders import projection as projection_head
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.methods.qaid.model import QAIDModel
from fewshot_nlu.models import rejection
from fewshot_nlu.models.intent_model import IntentModel, vote
from fewshot_nlu.models.protocol import OUT_OF_SCOPE, Neighbour
from tests import tiny
from tests.rejection_helpers import LABELS, TEXTS, encoder  # noqa: F401  (encoder: fixture)


@pytest.mark.parametrize("k", [1, 3])
def test_knn_leave_one_out_is_the_vote_among_the_other_rows(k):
  rng = np.random.default_rng(0)
  vectors = rng.normal(size=(9, 5)).astype(np.float32)
  labels = list("aabbbcccd")
  unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
  expected = []
  for i in range(len(vectors)):
    others = [j for j in range(len(vectors)) if j != i]
    nearest = sorted(others, key=lambda j: -float(unit[i] @ unit[j]))[:k]
    expected.append(vote([Neighbour("", labels[j], float(unit[i] @ unit[j])) for j in nearest])[1])
  np.testing.assert_allclose(rejection.knn_leave_one_out(vectors, labels, k, chunk=4), expected, rtol=1e-5,
                             atol=1e-6)


def test_calibrate_reads_the_quantile_and_counts_inf_as_lowest():
  cal = rejection.calibrate(np.array([0.1, 0.2, 0.3, 0.4, 0.5]), 0.25, rule="r")
  assert cal.threshold == pytest.approx(0.2) and cal.rows == 5 and cal.quantile == 0.25
  assert rejection.calibrate(np.array([-np.inf, 0.5, 0.7]), 0.0, rule="r").threshold == pytest.approx(-0.5)
  assert rejection.Rejection.from_dict(cal.to_dict()) == cal and rejection.Rejection.from_dict(None) is None
  with pytest.raises(ValueError, match="quantile=1.5"):
    rejection.calibrate(np.array([0.1]), 1.5, rule="r")


def test_intent_model_rejects_saves_its_threshold_and_the_cli_uses_it(encoder, tmp_path, capsys):
  model = IntentModel.from_examples(encoder, TEXTS, LABELS)
  cal = model.calibrate_rejection(0.5)
  loo = rejection.knn_leave_one_out(encoder.encode(TEXTS), LABELS, 1)
  assert cal.threshold == pytest.approx(float(np.quantile(loo, 0.5)), abs=1e-6) and cal.rows == 8
  queries = tiny.CORPUS[8:]
  plain = model.predict(queries)
  rejected = model.predict(queries, reject=True)
  for p, r in zip(plain, rejected):
    if p.score < cal.threshold:
      assert r.label == OUT_OF_SCOPE and r.best_label == p.label and r.to_dict()["best_label"] == p.label
    else:
      assert dataclasses.replace(r, rejection_score=None, threshold=None) == p and "best_label" not in r.to_dict()
    assert r.rejection_score == pytest.approx(p.score) and r.threshold == pytest.approx(cal.threshold)  # k-NN: its vote
    assert r.to_dict()["rejection"] == {"score": r.rejection_score, "threshold": r.threshold,
                                        "rejected": r.label == OUT_OF_SCOPE}
  assert all(p.label == OUT_OF_SCOPE for p in model.predict(TEXTS, threshold=1.01))  # cosines are at most 1
  assert [dataclasses.replace(p, rejection_score=None, threshold=None)
          for p in model.predict(TEXTS, reject=True, threshold=-1.01)] == model.predict(TEXTS)

  export = model.save(tmp_path / "export")
  assert models.load(export).rejection == cal
  capsys.readouterr()
  assert predict.main(["--model", str(export), "--reject", "--threshold", "1.01", TEXTS[3]]) == 0
  captured = capsys.readouterr()
  assert "out_of_scope below score 1.0100 (given)" in captured.err
  assert captured.out.splitlines()[1] == \
      "  -> out_of_scope  (1.000; best intent: music; rejection score 1.000 vs threshold 1.010)"
  assert predict.main(["--model", str(export), "--reject", "--output", str(tmp_path / "p.jsonl"), TEXTS[3]]) == 0
  assert "the 50th percentile of 8 scores (leave-one-out 1-NN" in capsys.readouterr().err
  assert json.loads((tmp_path / "p.jsonl").read_text())["label"] == "music"  # its own copy: cosine 1

  meta = json.loads((export / "intent_model.json").read_text())  # an export from before calibration
  del meta["rejection"]
  (export / "intent_model.json").write_text(json.dumps(meta))
  old = models.load(export)
  assert old.rejection is None and old.predict([TEXTS[3]], threshold=1.01)[0].label == OUT_OF_SCOPE
  with pytest.raises(ValueError, match="no calibrated out-of-scope threshold"):
    old.predict([TEXTS[3]], reject=True)
  assert predict.main(["--model", str(export), "--reject", TEXTS[3]]) == 2
  assert "no calibrated out-of-scope threshold" in capsys.readouterr().err


def _mlp_model(encoder):
  labels = sorted(set(LABELS))
  rng = np.random.default_rng(0)
  mlp = [{"kernel": rng.normal(size=(encoder.dim, len(labels))).astype(np.float32),
          "bias": np.zeros(len(labels), np.float32)}]
  return IntentModel.from_examples(encoder, TEXTS, LABELS, classifier="mlp", mlp=mlp)


def test_an_mlp_model_decides_by_its_head_and_rejects_by_the_nearest_cosine(encoder, tmp_path):
  model = _mlp_model(encoder)
  cal = model.calibrate_rejection(0.5)  # leave-one-out: each example's nearest OTHER example's cosine
  loo = rejection.knn_leave_one_out(encoder.encode(TEXTS), LABELS, 1)
  assert cal.score == "nearest" and cal.threshold == pytest.approx(float(np.quantile(loo, 0.5)), abs=1e-6)
  queries = tiny.CORPUS[8:] + TEXTS[:2]
  plain = model.predict(queries, neighbours=0)
  full = model.predict(queries)
  assert all(p.neighbours == () for p in plain) and [p.label for p in plain] == [p.label for p in full]
  rejected = model.predict(queries, reject=True, neighbours=0)  # the nearest example is read even when not shown
  for f, r in zip(full, rejected):
    if f.neighbours[0].score < cal.threshold:
      assert r.label == OUT_OF_SCOPE and r.best_label == f.label and r.score == f.score  # the head's probability
    else:
      assert r.label == f.label
  assert {p.label for p in model.predict(queries, reject=True)} >= {OUT_OF_SCOPE}
  assert all(p.label != OUT_OF_SCOPE for p in model.predict(TEXTS, reject=True))  # their own copies: cosine 1

  held_out = tiny.CORPUS[8:11]
  cal = model.calibrate_rejection(0.1, texts=held_out, source="toy/valid")
  nearest = [p.neighbours[0].score for p in model.predict(held_out)]
  assert cal.threshold == pytest.approx(float(np.quantile(nearest, 0.1)), abs=1e-6) and cal.rows == 3
  assert cal.rule == "nearest example's cosine of 3 toy/valid in-scope utterances" and cal.score == "nearest"
  knn = IntentModel.from_examples(encoder, TEXTS, LABELS)
  votes = [p.score for p in knn.predict(held_out)]
  assert knn.calibrate_rejection(0.1, texts=held_out).threshold == pytest.approx(float(np.quantile(votes, 0.1)),
                                                                                abs=1e-6)
  with pytest.raises(ValueError, match="no held-out utterances"):
    model.calibrate_rejection(texts=[])

  export = model.save(tmp_path / "export")
  assert models.load(export).rejection == cal
  meta = json.loads((export / "intent_model.json").read_text())  # calibrated before 2026-11-25: on probabilities
  meta["rejection"] = {"threshold": 0.5, "quantile": 0.1, "rows": 8, "rule": "top probability of 5-fold MLPs"}
  (export / "intent_model.json").write_text(json.dumps(meta))
  old = models.load(export)
  assert old.rejection.score == "prediction" and old.rejection_score == "prediction"
  for p, r in zip(old.predict(queries), old.predict(queries, reject=True)):
    assert (r.label == OUT_OF_SCOPE) == (p.score < 0.5)


def _qaid(tiny_bert_dir, match: str, rows: list[dict] | None = None) -> QAIDModel:
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  projection = jax.device_get(projection_head.init(jax.random.key(0), model.config.hidden_size, 16))
  qaid = QAIDModel(model.config, model.params, model.tokenizer, projection, batch_size=4, match=match)
  if rows is None:
    qaid.add_answers(sorted(set(LABELS)))
    qaid.add_examples(TEXTS, LABELS)
  else:
    qaid._add_rows(rows)
  return qaid


@pytest.mark.parametrize("match", ["qa", "qq+qa", "intent_doc"])
def test_qaid_leave_one_out_scores_equal_a_model_without_the_row(tiny_bert_dir, tmp_path, match):
  qaid = _qaid(tiny_bert_dir, match)
  loo = qaid.leave_one_out_scores()
  examples = [i for i, r in enumerate(qaid.rows) if r["kind"] == "query"]
  assert len(loo) == len(examples) == len(TEXTS)
  for score, i in zip(loo, examples):
    without = _qaid(tiny_bert_dir, match, [r for j, r in enumerate(qaid.rows) if j != i])
    assert score == pytest.approx(without.predict([qaid.rows[i]["text"]])[0].score, abs=1e-5), (match, i)
  cal = qaid.calibrate_rejection()
  assert cal.threshold == pytest.approx(float(np.quantile(loo, 0.1)), abs=1e-6) and f"match={match}" in cal.rule
  loaded = QAIDModel.load(qaid.save(tmp_path / "export"))
  assert loaded.rejection == cal
  assert [p.label for p in loaded.predict(TEXTS, threshold=1.01)] == [OUT_OF_SCOPE] * len(TEXTS)


def test_cli_refuses_to_reject_with_a_multi_label_model(encoder, tmp_path, capsys):
  from fewshot_nlu.methods.multi_convfit.model import MultiLabelModel
  mlp = mlp_head.train(encoder.encode(TEXTS[:2]), np.eye(2, dtype=np.float32),
                       mlp_head.MLPConfig(hidden=(4,), dropout=0.0, epochs=1, multilabel=True))
  export = MultiLabelModel(encoder, mlp, ["a", "b"]).save(tmp_path / "export")
  capsys.readouterr()
  assert predict.main(["--model", str(export), "--reject", "hi"]) == 2
  assert "out-of-scope rejection is for single-label intent models" in capsys.readouterr().err
