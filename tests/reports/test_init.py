"""``reports.write_report``'s files checked against the predictions they came from (``tests.report_checks``, also
used on every method's run), single- and multi-label."""

import numpy as np
import pytest

from fewshot_nlu import reports
from tests import report_checks


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
