"""A joint NLU run's ``report.md`` (``methods.nlu.report``) from a run's results, without training."""

from fewshot_nlu.data import annotated
from fewshot_nlu.methods.nlu import report

RESULTS = {
    "intents_seconds": 30.2, "slots_seconds": 12.0,
    "intent_training": {"method": "convfit", "variant": "LM+S2-OCL (linear)", "held_out_half_accuracy": 8 / 9,
                        "rejection": {"threshold": 0.7274, "rule": "nearest example's cosine of 9 held out"}},
    "slots": {"encoder": "minilm-l6 (untouched, layers 0-2)", "support_mode": "encoder", "support_steps": 25,
              "threshold": 0.55, "how": "4-fold cross-validation on the 3 training utterances (3 with entities)",
              "cv_f1_by_steps": {"0": 50.0, "encoder:25": 66.67},
              "cv_by_entity": {"size": {"examples": 2, "gold": 2, "predicted": 2, "correct": 2, "precision": 100.0,
                                        "recall": 100.0, "f1": 100.0},
                               "order_id": {"examples": 1, "gold": 1, "predicted": 1, "correct": 0,
                                            "precision": 0.0, "recall": 0.0, "f1": 0.0}}},
}


def _examples():
  rows = [{"text": "a large one", "intent": "order", "entities": [{"start": 2, "end": 7, "entity": "size"}]},
          {"text": "small please", "intent": "order", "entities": [{"start": 0, "end": 5, "entity": "size"}]},
          {"text": "where is 42", "intent": "track", "entities": [{"start": 9, "end": 11, "entity": "order_id"}]}]
  return annotated.read(rows).examples


def test_the_report_lists_entity_types_worst_first_and_names_the_thin_ones():
  lines = report.report_lines(RESULTS, _examples())
  assert lines[0] == "# Joint NLU from 3 examples"
  text = "\n".join(lines)
  assert "examples per intent: order 2, track 1" in text and "Out of scope below 0.727" in text
  assert "held out of a second Stage 2 trained on the other half of each intent's: 88.89%" in text
  assert "the encoder's layers learnt the examples for 25 steps; decoding threshold 0.55" in text
  rows = [line for line in lines if line.startswith("| order_id") or line.startswith("| size")]
  assert rows == ["| order_id | 1 | 1 | 1 | 0 | 0.00 | 0.00 | 0.00 |",
                  "| size | 2 | 2 | 2 | 2 | 100.00 | 100.00 | 100.00 |"]
  assert "add some for these first): order_id (1), size (2)." in text
  assert "Held-out" not in text  # no validation= given
  held_out = report.report_lines({**RESULTS, "num_eval": 4, "intent_accuracy": 0.75, "slot_f1": 0.5,
                                  "slot_precision": 0.5, "slot_recall": 0.5, "sentence_accuracy": 0.25}, _examples())
  assert "4 utterances: intent accuracy 75.00%, slot F1 50.00%" in "\n".join(held_out)


def test_the_terminal_names_the_weakest_entity_types():
  assert report.weakest(RESULTS) == (" (weakest entity types in the cross-validation on your examples: order_id F1 "
                                     "0% from 1 example)")
  assert report.weakest({"slots": None}) == "" and report.weakest({}) == ""
