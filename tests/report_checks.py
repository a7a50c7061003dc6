"""Checks every intent run's report against the predictions file it wrote: ``report.md``'s per-intent and averaged
numbers recomputed here, independently of ``fewshot_nlu.reports``, from the gold / predicted columns of the TSV;
the PNGs exist and have a sensible size."""

from __future__ import annotations

import pathlib
import re
import struct


def png_size(path: pathlib.Path) -> tuple[int, int]:
  """(width, height) from the PNG header; fails unless the file is a PNG."""
  data = path.read_bytes()
  assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path} is not a PNG"
  return struct.unpack(">II", data[16:24])


def check_png(path: pathlib.Path) -> None:
  width, height = png_size(path)
  assert 300 <= width <= 6000 and 300 <= height <= 6000, (path, width, height)
  assert 5_000 < path.stat().st_size < 5_000_000, (path, path.stat().st_size)


def table(text: str, heading: str) -> list[list[str]]:
  """The rows (cells) of the Markdown table under ``heading``."""
  section = text.split(heading, 1)[1].split("\n## ", 1)[0]
  rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
  return [[c.strip() for c in row.strip("|").split("|")] for row in rows[1:]]  # the header row dropped


def read_predictions(path: pathlib.Path, multilabel: bool, support_set: str | None = None
                     ) -> tuple[list, list]:
  lines = path.read_text(encoding="utf-8").splitlines()
  header = lines[0].split("\t")
  gold, predicted = [], []
  for line in lines[1:]:
    row = dict(zip(header, line.split("\t")))
    if support_set is not None and row["support_set"] != support_set:
      continue
    if multilabel:
      gold.append({l for l in row["gold"].split("+") if l})
      predicted.append({l for l in row["predicted"].split("+") if l})
    else:
      gold.append({row["gold"]})
      predicted.append({row["predicted"]})
  return gold, predicted


def assert_report_matches_predictions(workdir: pathlib.Path, *, multilabel: bool = False, suffix: str = "",
                                      support_set: str | None = None, embeddings: bool = True) -> str:
  """Recomputes precision / recall / F1 / support per intent, the averages and the accuracy from
  ``predictions.tsv`` and compares them with ``report{suffix}.md`` (to its two decimals); checks the PNGs.
  Returns the report's text."""
  report = (workdir / f"report{suffix}.md").read_text(encoding="utf-8")
  gold, predicted = read_predictions(workdir / "predictions.tsv", multilabel, support_set)
  labels = sorted(set().union(*gold, *predicted))
  rows = {r[0]: r for r in table(report, "## Per intent")}
  assert sorted(rows) == labels
  totals = {"tp": 0, "fp": 0, "fn": 0}
  macro = {"precision": 0.0, "recall": 0.0, "f1": 0.0}
  for label in labels:
    tp = sum(label in g and label in p for g, p in zip(gold, predicted))
    fp = sum(label not in g and label in p for g, p in zip(gold, predicted))
    fn = sum(label in g and label not in p for g, p in zip(gold, predicted))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    cells = rows[label]
    assert [float(c) for c in cells[1:4]] == [round(100 * v, 2) for v in (precision, recall, f1)], (label, cells)
    assert int(cells[4]) == tp + fn and int(cells[5]) == tp + fp, (label, cells)
    for key, value in zip(("tp", "fp", "fn"), (tp, fp, fn)):
      totals[key] += value
    for key, value in zip(("precision", "recall", "f1"), (precision, recall, f1)):
      macro[key] += value / len(labels)
  averages = {r[0]: [float(c) for c in r[1:4]] for r in table(report, "## Averages")}
  micro_p = totals["tp"] / max(totals["tp"] + totals["fp"], 1)
  micro_r = totals["tp"] / max(totals["tp"] + totals["fn"], 1)
  micro_f = 2 * micro_p * micro_r / (micro_p + micro_r) if micro_p + micro_r else 0.0
  assert averages["micro"] == [round(100 * v, 2) for v in (micro_p, micro_r, micro_f)]
  assert averages["macro"] == [round(100 * macro[k], 2) for k in ("precision", "recall", "f1")]
  exact = sum(g == p for g, p in zip(gold, predicted)) / len(gold)
  assert re.search(rf"accuracy[^*]* \*\*{100 * exact:.2f}%\*\*", report), report.splitlines()[2]
  check_png(workdir / f"confusion{suffix}.png")
  if embeddings:
    check_png(workdir / f"embeddings{suffix}.png")
    assert "Silhouette" in report
  return report
