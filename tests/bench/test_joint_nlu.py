"""bench/joint_nlu.py's Commands section: one line per variant and options, cells and seeds joined, NLU++ folds as
ranges that ``--cells`` reads back."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "bench"))  # bench scripts import their siblings

from bench import joint_nlu  # noqa: E402


def _command(cell: str, seed: int, variant: str = "learned", extra: str = "") -> str:
  return f"python bench/joint_nlu.py --cells {cell} --seeds {seed} --variant {variant}{extra}"


def test_commands_join_cells_and_seeds_and_fold_runs_read_back():
  rows = [_command(c, s) for c in ("snips:k10", "snips:k5") for s in (0, 1, 2)]
  rows += [_command("snips:n64", 0), _command("snips:k10", 0, "retrieval")]
  rows += [_command(f"nlupp-hotels:f{k}", 0, "learned", " --span-encoder runs/x") for k in range(20)]
  rows += [_command(f"nlupp-banking:f{k}", 0, "learned", " --span-encoder runs/x") for k in (0, 1, 3)]
  assert joint_nlu.grouped_commands(rows) == [
      _command("snips:k10,snips:k5", "0,1,2"), _command("snips:n64", 0), _command("snips:k10", 0, "retrieval"),
      _command("nlupp-hotels:f0-19,nlupp-banking:f0,nlupp-banking:f1,nlupp-banking:f3", 0, "learned",
               " --span-encoder runs/x")]
  cells = [f"nlupp-hotels:f{k}" for k in range(20)] + ["snips:k5"]
  assert joint_nlu.expand_cells(joint_nlu.compress_cells(cells)) == cells


def test_only_variants_that_start_from_the_general_span_encoder_need_one():
  """The MPNet slot rows and the untouched ones start from an untouched model: they need no --span-encoder and
  record no span encoder steps; every other variant does."""
  untouched = {"untouched", "untouched-threshold", "learned-mpnet-slots", "untouched-mpnet-slots", "learned-mpnet",
               "learned-mpnet-slots-expected", "learned-mpnet-expected"}
  assert {v for v in joint_nlu.VARIANTS if not joint_nlu.uses_span_encoder(v)} == untouched
  assert joint_nlu.VARIANTS["learned-mpnet-slots"]["slots.model"] == "mpnet-base"


def test_only_the_expected_variants_opt_in_to_expected_slots():
  """Expected slots are opt-in: the ``-expected`` variants are their MPNet namesakes with
  ``slots.expected_shares=(1.0,)``; no other variant sets it (the default, off, as every earlier row ran)."""
  expected = {"learned-mpnet-slots-expected", "learned-mpnet-expected", "learned-mpnet-general-slots-expected"}
  assert not [v for v in set(joint_nlu.VARIANTS) - expected if "slots.expected_shares" in joint_nlu.VARIANTS[v]]
  for name in expected:
    assert joint_nlu.VARIANTS[name] == {**joint_nlu.VARIANTS[name.removesuffix("-expected")],
                                        "slots.expected_shares": (1.0,)}


def test_restaurants8k_files_read_with_omitted_zero_starts_and_overlaps_kept_only_for_scoring(tmp_path):
  import json
  records = [{"userInput": {"text": "tomorrow night for 2"}, "context": {"requestedSlots": ["date"]},
              "labels": [{"slot": "date", "valueSpan": {"endIndex": 14}},  # startIndex 0 omitted
                         {"slot": "time", "valueSpan": {"startIndex": 9, "endIndex": 14}},
                         {"slot": "people", "valueSpan": {"startIndex": 19, "endIndex": 20}}]},
             {"userInput": {"text": "hi there"}}]
  path = tmp_path / "train_7.json"
  path.write_text(json.dumps(records))
  scored = joint_nlu.restaurants8k_rows(path, keep_overlaps=True)
  assert scored[0]["entities"] == [{"start": 0, "end": 14, "entity": "date"}, {"start": 9, "end": 14, "entity": "time"},
                                   {"start": 19, "end": 20, "entity": "people"}]
  assert scored[1] == {"text": "hi there", "entities": []}
  trained = joint_nlu.restaurants8k_rows(path, keep_overlaps=False)
  assert [e["entity"] for e in trained[0]["entities"]] == ["date", "people"]  # one entity per character
  assert joint_nlu.restaurants8k_file(tmp_path, 64) == path
  assert joint_nlu.restaurants8k_file(tmp_path, 8198).name == "train_0.json"


def test_scored_spans_count_every_gold_span_against_the_parse():
  class Model:
    def parse(self, texts):
      return [{"entities": [{"entity": "date", "start": 0, "end": 14}, {"entity": "people", "start": 18, "end": 20}]}
              for _ in texts]

  rows = [{"text": "tomorrow night for 2", "entities": [{"start": 0, "end": 14, "entity": "date"},
                                                      {"start": 9, "end": 14, "entity": "time"},
                                                      {"start": 19, "end": 20, "entity": "people"}]}]
  result = joint_nlu.scored_spans(Model(), rows)
  assert result["num_eval"] == 1
  assert abs(result["slot_precision"] - 0.5) < 1e-9 and abs(result["slot_recall"] - 1 / 3) < 1e-9
  assert abs(result["slot_f1"] - 0.4) < 1e-9


def test_restaurants8k_context_gives_the_requested_slots_to_the_examples_and_to_parse(tmp_path):
  path = tmp_path / "test.json"
  path.write_text(json.dumps([
      {"userInput": {"text": "13"}, "context": {"requestedSlots": ["time"]},
       "labels": [{"slot": "time", "valueSpan": {"endIndex": 2}}]},
      {"userInput": {"text": "for 2"}, "labels": [{"slot": "people", "valueSpan": {"startIndex": 4, "endIndex": 5}}]},
      {"userInput": {"text": "Ann Lee"}, "context": {"requestedSlots": ["first_name", "last_name", "first_name"]}}]))
  plain = joint_nlu.restaurants8k_rows(path, keep_overlaps=True)
  assert all("requested_slot" not in r for r in plain)
  rows = joint_nlu.restaurants8k_rows(path, keep_overlaps=True, context=True)
  assert [r.get("requested_slot") for r in rows] == [["time"], None, ["first_name", "last_name"]]
  seen = []

  class Model:
    def parse(self, texts, requested_slots):
      seen.append(requested_slots)
      return [{"entities": []} for _ in texts]

  joint_nlu.scored_spans(Model(), rows)
  assert seen == [[["time"], None, ["first_name", "last_name"]]]


def test_a_variant_on_mpnet_refuses_a_span_encoder_built_on_another_model(tmp_path):
  import json
  export = tmp_path / "export"
  export.mkdir()
  (export / "span_encoder.json").write_text(json.dumps({"base_model": "minilm-l6"}))
  assert joint_nlu.span_encoder_mismatch("learned", export) is None  # no model named: any encoder
  assert "built on minilm-l6" in joint_nlu.span_encoder_mismatch("learned-mpnet-general-slots", export)
  (export / "span_encoder.json").write_text(json.dumps({"base_model": "mpnet-base"}))
  assert joint_nlu.span_encoder_mismatch("learned-mpnet-general-slots", export) is None


def test_a_cell_without_its_dataset_is_refused_with_the_cell_forms(monkeypatch):
  """``--cells k10`` (no ``snips:``) ends with the list of cell forms, not a traceback."""
  monkeypatch.setattr(sys, "argv", ["joint_nlu.py", "--cells", "k10", "--variant", "untouched"])
  with pytest.raises(SystemExit, match=r"^k10: cells are snips:k<K>, snips:n<N>"):
    joint_nlu.main()
