"""``fewshot_nlu.reports``: per-intent numbers and confusions by hand (single- and multi-label), the silhouette
against a brute-force reference, the PCA, the confusion plot's choice of intents, and ``write_report``'s files
checked against the predictions they came from (``tests.report_checks``, also used on every method's run)."""

from __future__ import annotations

import numpy as np
import pytest

from fewshot_nlu import reports
from fewshot_nlu.methods.multi_convfit import labels as multilabel
from fewshot_nlu.reports import metrics, plots
from tests import report_checks


def test_single_label_numbers_by_hand():
  gold = ["a", "a", "a", "b", "b", "c"]
  predicted = ["a", "a", "b", "b", "c", "c"]
  r = metrics.single_label(gold, predicted, texts=[f"t{i}" for i in range(6)])
  a, b, c = (r.label_scores(l) for l in "abc")
  assert (a.precision, a.recall, a.f1, a.support, a.predicted) == (1.0, pytest.approx(2 / 3), pytest.approx(0.8), 3, 2)
  assert (b.precision, b.recall, b.f1) == (0.5, 0.5, 0.5)
  assert (c.precision, c.recall, c.f1) == (0.5, 1.0, pytest.approx(2 / 3))
  assert r.accuracy == pytest.approx(4 / 6) and r.averages["micro"]["f1"] == pytest.approx(4 / 6)
  assert r.averages["macro"]["recall"] == pytest.approx((2 / 3 + 0.5 + 1.0) / 3)
  assert r.averages["weighted"]["recall"] == pytest.approx((3 * 2 / 3 + 2 * 0.5 + 1.0) / 6)
  assert [(x.gold, x.predicted, x.count, x.example) for x in r.confusions] == [("a", "b", 1, "t2"), ("b", "c", 1, "t4")]
  assert r.matrix.tolist() == [[2, 1, 0], [0, 1, 1], [0, 0, 1]]


def test_multi_label_pairs_misses_with_spurious_intents_and_agrees_with_multilabel_scores():
  gold = [("a", "b"), ("a",), ("c",), (), ("b",)]
  predicted = [("a", "c"), (), ("c", "b"), ("a",), ("b",)]
  r = metrics.multi_label(gold, predicted)
  expected = multilabel.scores(gold, predicted)
  assert r.averages["micro"]["f1"] == pytest.approx(expected["f1"]) and r.accuracy == expected["exact_match"]
  pairs = {(x.gold, x.predicted): x.count for x in r.confusions}
  assert pairs == {("b", "c"): 1, ("a", metrics.NONE): 1, (metrics.NONE, "b"): 1, (metrics.NONE, "a"): 1}
  assert r.label_scores("b").support == 2 and r.label_scores("b").predicted == 2 and r.label_scores("b").recall == 0.5
  with pytest.raises(ValueError, match="mix strings and label sets"):
    metrics.build(["a", ("b",)], ["a", ("b",)])


def test_silhouette_matches_a_brute_force_reference():
  rng = np.random.default_rng(0)
  vectors = rng.normal(size=(13, 4))
  labels = list("aaaabbbbcccd") + ["b"]  # "d" stands alone: its silhouette is 0
  unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
  distance = 1 - unit @ unit.T
  values = []
  for i, l in enumerate(labels):
    same = [j for j, m in enumerate(labels) if m == l and j != i]
    if not same:
      values.append(0.0)
      continue
    a = distance[i, same].mean()
    b = min(distance[i, [j for j, m in enumerate(labels) if m == other]].mean() for other in set(labels) - {l})
    values.append((b - a) / max(a, b))
  assert plots.silhouette_cosine(vectors, labels, chunk=5) == pytest.approx(np.mean(values), abs=1e-5)
  assert np.isnan(plots.silhouette_cosine(vectors, ["a"] * 13))


def test_pca_finds_the_two_widest_directions():
  rng = np.random.default_rng(1)
  x = np.zeros((200, 5))
  x[:, 0] = 5.0  # an offset, so the unit vectors spread around (1, 0, 0, 0, 0)
  x[:, 3] = rng.normal(scale=2.0, size=200)
  x[:, 1] = rng.normal(scale=0.5, size=200)
  coords, explained = plots.pca_2d(x)
  unit = x / np.linalg.norm(x, axis=1, keepdims=True)
  assert abs(np.corrcoef(coords[:, 0], unit[:, 3])[0, 1]) > 0.99
  assert abs(np.corrcoef(coords[:, 1], unit[:, 1])[0, 1]) > 0.9 and explained[0] > explained[1] > 0


def test_confusion_plot_shows_the_intents_most_involved_in_errors():
  gold = [f"i{n}" for n in range(40) for _ in range(3)]
  predicted = list(gold)
  predicted[0], predicted[3], predicted[4] = "i5", "i5", "i7"  # i0 -> i5, i1 -> i5 and i1 -> i7
  r = metrics.single_label(gold, predicted)
  shown = [r.axis[i] for i in plots.shown_labels(r, top=30)]
  assert shown == ["i1", "i5", "i0", "i7"]  # involvement 2, 2, 1, 1; ties kept in label order
  assert len(plots.shown_labels(metrics.single_label(gold, gold), top=30)) == 30  # no errors: the largest


def test_write_report_files_match_the_predictions(tmp_path):
  rng = np.random.default_rng(2)
  names = [f"intent_{n}" for n in range(90)]
  gold = [names[n % 90] for n in range(270)]
  predicted = [g if rng.random() < 0.7 else names[rng.integers(90)] for g in gold]
  texts = [f"utterance {n}" for n in range(270)]
  (tmp_path / "predictions.tsv").write_text("text\tgold\tpredicted\n" + "".join(
      f"{t}\t{g}\t{p}\n" for t, g, p in zip(texts, gold, predicted)))
  centres = rng.normal(size=(90, 16))
  after = np.stack([centres[n % 90] for n in range(270)]) + rng.normal(scale=0.3, size=(270, 16))
  summary = reports.write_report(tmp_path, gold, predicted, texts=texts, title="toy",
                                 embeddings={"before": rng.normal(size=(270, 16)), "after": lambda: after})
  report = report_checks.assert_report_matches_predictions(tmp_path)
  assert summary["silhouette"]["after"] > 0.5 > summary["silhouette"]["before"]
  assert "the 30 intents most involved in errors" in report and "| utterance" in report  # confusions' examples
  assert report_checks.png_size(tmp_path / "embeddings.png")[0] == 1200  # two 600-pixel panels
  with pytest.raises(ValueError, match="3 vectors for 270 utterances"):
    reports.write_report(tmp_path, gold, predicted, embeddings={"x": np.zeros((3, 2))})


def test_multi_label_report_files(tmp_path):
  gold = [("a", "b"), ("a",), ("c",), (), ("b",), ("c",)]
  predicted = [("a", "c"), (), ("c", "b"), ("a",), ("b",), ("c",)]
  (tmp_path / "predictions.tsv").write_text("text\tgold\tpredicted\n" + "".join(
      f"u{n}\t{'+'.join(g)}\t{'+'.join(p)}\n" for n, (g, p) in enumerate(zip(gold, predicted))))
  rng = np.random.default_rng(3)
  reports.write_report(tmp_path, gold, predicted, embeddings={"e": rng.normal(size=(6, 8))})
  report = report_checks.assert_report_matches_predictions(tmp_path, multilabel=True)
  assert "exact-match accuracy" in report and "| b | c | 1 |" in report
