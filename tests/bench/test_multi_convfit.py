"""bench/multi_convfit.py keeps rows run under older defaults apart from today's, each labelled."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "bench"))  # bench scripts import their siblings

from bench import multi_convfit  # noqa: E402


def test_rows_are_labelled_by_the_defaults_they_ran_under():
  today = {"mlp_dropout_site": "hidden_inputs", "specialisation_learning_rate": 1e-4}
  paper_rate = {"mlp_dropout_site": "hidden_inputs"}  # before 2026-12-07: no rate recorded
  old_site = {"specialisation_learning_rate": None}  # before 2026-12-06: no dropout site recorded
  labels = {name: multi_convfit.vintage(results, mode) for name, results, mode in (
      ("today", today, "fft"), ("paper rate", paper_rate, "adapter"), ("untouched", paper_rate, "none"),
      ("old site", old_site, "none"), ("old site, specialised", paper_rate | {"mlp_dropout_site": "hidden_outputs"},
                                      "fft"))}
  assert labels["today"] == labels["untouched"] == ""  # an untouched row has no specialisation rate to be old in
  assert "paper's learning rates" in labels["paper rate"]
  assert "hidden outputs" in labels["old site"] and labels["old site"] == labels["old site, specialised"]
  assert len(set(labels.values())) == len(multi_convfit.VINTAGES)
