"""The joint NLU model (``fit(data, method="nlu")``, ``models.nlu_model``): one fit from a Rasa nlu.yml, parse in
Rasa's shape with exact character offsets, live additions of intents and slot types, save / load, the predict
command, the server's /model/parse and /examples, and the slots-only and intents-only paths. The tiny random
model checks the wiring; one integration test with the real MiniLM checks what a user sees."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import fewshot_nlu as fn
from fewshot_nlu import predict
from fewshot_nlu.encoders import quantize
from fewshot_nlu.evaluation import span_f1
from fewshot_nlu.methods.nlu import train as nlu_train
from fewshot_nlu.models.nlu_model import NLUModel

NLU_YML = """version: "3.1"
nlu:
- intent: order_pizza
  examples: |
    - I'd like a [large](size) [pepperoni](topping) pizza, please!
    - two [margherita](topping) pizzas to [10 Downing St.](address)
    - can I get a [medium](size) [veggie](topping:vegetarian)?
    - a [small](size) [hawaiian](topping) for delivery
    - one [large](size) [margherita](topping) please
- intent: greet
  examples: |
    - hi
    - hello there!
    - good evening
- intent: track
  examples: |
    - where is my order?
    - how long until my pizza arrives
    - track my delivery
- synonym: vegetarian
  examples: |
    - veggie
"""


def tiny(model_dir) -> dict:
  """The tiny random model for both parts, a step or two of training."""
  return {"intents": {"model": {"name": str(model_dir), "max_length": 16}, "compilation_cache_dir": "",
                      "mesh": {"data": 1}, "train": {"max_steps": 2},
                      "eval": {"calibration_rule": "leave_one_out"}},  # no second Stage 2 (test_stage2 runs it)
          "slots": {"model": str(model_dir), "encoder": "", "encoder_layers": 2, "support_steps": (0, 2),
                    "folds": 2},
          "compilation_cache_dir": ""}


def rounded(value):
  """``value`` with every float rounded to 4 decimals (nested dicts and lists)."""
  if isinstance(value, float):
    return round(value, 4)
  if isinstance(value, dict):
    return {k: rounded(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [rounded(v) for v in value]
  return value


@pytest.fixture
def nlu_yml(tmp_path) -> pathlib.Path:
  path = tmp_path / "nlu.yml"
  path.write_text(NLU_YML)
  return path


def test_fit_parse_add_save_load_on_the_tiny_model(nlu_yml, tiny_bert_dir, tmp_path, capsys, monkeypatch):
  model = fn.fit(nlu_yml, method="nlu", workdir=tmp_path / "run", **tiny(tiny_bert_dir))
  assert isinstance(model, NLUModel) and model.labels == ["greet", "order_pizza", "track"]
  assert model.slot_labels == ["address", "size", "topping"]
  text = "Can I get a medium veggie?"
  [answer] = model.parse([text])
  assert set(answer) >= {"text", "intent", "intent_ranking", "entities", "text_tokens"} and answer["text"] == text
  assert answer["intent"]["name"] in {"greet", "order_pizza", "track", "out_of_scope"}
  assert [r["name"] for r in answer["intent_ranking"]] != [] and len(answer["intent_ranking"]) == 3
  for e in answer["entities"]:  # offsets index the text exactly; value is the text or its synonym
    assert text[e["start"]:e["end"]] in (e["value"], "veggie") and e["extractor"] == "fewshot_nlu"
  assert [text[a:b] for a, b in answer["text_tokens"]] == ["Can", "I", "get", "a", "medium", "veggie", "?"]
  assert model.results["slots"]["how"].startswith("2-fold cross-validation on the 11 training utterances")
  assert set(model.results["slots"]["cv_f1_by_steps"]) == {"0", "metric:2", "encoder:2"}  # learner and steps chosen
  assert model.results["slots"]["support_mode"] in ("metric", "encoder", None)
  # expected slots are opt-in: by default nothing is expected of a text (a user may leave a slot out)
  assert list(model.results["slots"]["cv_f1_by_expected_share"]) == ["None"] and model.slots.expected_share is None
  # each entity type's cross-validation counts at the chosen setting pool to that setting's F1
  slots = model.results["slots"]
  by_entity = slots["cv_by_entity"]
  assert set(by_entity) == {"address", "size", "topping"}
  pooled = np.sum([[r["correct"], r["gold"], r["predicted"]] for r in by_entity.values()], axis=0)
  chosen = f"{slots['support_mode']}:{slots['support_steps']}" if slots["support_steps"] else "0"
  assert float(span_f1.f1_of(pooled)) == pytest.approx(slots["cv_f1_by_steps"][chosen], abs=0.01)
  assert pooled[1] == sum(r["examples"] for r in by_entity.values())  # one span of a type per utterance here
  report = (tmp_path / "run" / "report.md").read_text()  # a person's view of it, worst entity type first
  assert report.startswith("# Joint NLU from 11 examples") and "`intents/report.md`" in report
  assert "Expected entities" not in report  # not weighed: nothing to report
  rows = [line.split(" | ")[0].lstrip("| ") for line in report.splitlines()
          if line.startswith("| ") and line.split(" | ")[0].lstrip("| ") in by_entity]
  assert rows == sorted(by_entity, key=lambda name: (by_entity[name]["f1"], name))
  # the same fit again in its folder (an interrupted one, rerun): every cross-validation fold is read back
  assert sorted(p.name for p in (tmp_path / "run" / nlu_train.SLOTS_CV_DIR).iterdir()) == ["fold0.npz", "fold1.npz"]
  monkeypatch.setattr(nlu_train, "_fold_counts", lambda *a, **k: pytest.fail("a saved fold was run again"))
  again = fn.fit(nlu_yml, method="nlu", workdir=tmp_path / "run", **tiny(tiny_bert_dir))
  assert again.results["slots"] == model.results["slots"]
  monkeypatch.undo()
  summary = repr(model).splitlines()  # what print(model) shows a person: the parts and what was learnt
  assert summary[0] == "NLUModel" and summary[1].startswith("  intents: 3 (greet, order_pizza, track) from ")
  assert summary[2].startswith("  slots: 3 slot type(s) (address, size, topping) from 11 example utterance(s); ")
  learnt = model.slots.notes["learnt"]
  assert f"learnt: {learnt}" in summary[2] and summary[2].endswith(f"threshold {model.slots.threshold:g}; by intent")
  # joint: each text's entities are of the labels its predicted intent's examples hold (greet: none)
  assert model.slots_by_intent and model.slots.labels_for("greet") == frozenset()
  assert model.slots.labels_for("order_pizza") == {"address", "size", "topping"}
  for answer in model.parse(["hi, a large pepperoni to 10 Downing St.", text, "track my large pizza"]):
    intent = answer["intent"]["name"]
    allowed = model.slots.labels_for(None if intent == "out_of_scope" else intent)
    assert allowed is None or {e["entity"] for e in answer["entities"]} <= allowed
  assert not (tmp_path / "run" / "checkpoints").exists() and not (tmp_path / "run" / "intents" / "checkpoints").exists()

  model.add_examples([{"text": "what's on the menu for friday?", "intent": "menu",
                       "entities": [{"start": 23, "end": 29, "entity": "day"}]}])
  assert "menu" in model.labels and "day" in model.slot_labels  # at once, no retraining
  model.add_examples(["bye now"], ["goodbye"])
  assert "goodbye" in model.labels
  saved = model.save(tmp_path / "saved")
  again = fn.load(saved)
  assert again.labels == model.labels and again.slot_labels == model.slot_labels
  assert rounded(again.parse([text])) == rounded(model.parse([text]))  # re-encoded in other batches: float noise
  assert again.synonyms == {"veggie": "vegetarian"}
  assert again.slots_by_intent and again.slots.labels_for("menu") == {"day"}
  assert again.slots.labels_for("goodbye") == frozenset()  # an added intent without entities
  for loaded in (model, again):  # evidence quotes the examples as written, punctuation and spacing kept
    payloads = loaded.slots.retriever.index.payloads
    assert {"label": "address", "text": "10 Downing St.",
            "utterance": "two margherita pizzas to 10 Downing St."} in payloads
    assert {"label": "day", "text": "friday", "utterance": "what's on the menu for friday?"} in payloads

  assert predict.main(["--model", str(saved), text]) == 0
  shown = capsys.readouterr().out
  assert text in shown and "->" in shown
  quantised = fn.load(saved, quantize="int8")  # both parts' encoders run int8 products
  assert quantize.is_int8(quantised.intents.encoder.params)
  assert quantize.is_int8(quantised.slots.retriever.encoder.params)
  assert quantised.parse([text])[0]["text"] == text
  assert predict.main(["--model", str(saved), "--quantize", "int8", text]) == 0
  assert text in capsys.readouterr().out
  with pytest.raises(ValueError, match=r"entities\[0\]': characters \[3, 99\)"):
    model.add_examples([{"text": "hi there", "intent": "greet", "entities": [{"start": 3, "end": 99, "entity": "x"}]}])


def test_slots_only_and_intents_only_data(tiny_bert_dir, tmp_path):
  slots_only = [{"text": "from boston to denver", "entities": [{"start": 5, "end": 11, "entity": "from"},
                                                                   {"start": 15, "end": 21, "entity": "to"}]},
                {"text": "fly to paris", "entities": [{"start": 7, "end": 12, "entity": "to"}]}]
  model = fn.fit(slots_only, method="nlu", workdir=tmp_path / "slots", **tiny(tiny_bert_dir))
  assert model.intents is None and model.labels == [] and model.slot_labels == ["from", "to"]
  [answer] = model.parse(["to paris"])
  assert answer["intent"] is None and answer["intent_ranking"] == []
  intents_only = [{"text": t, "intent": i} for t, i in (("hi", "greet"), ("hello", "greet"), ("bye", "bye"),
                                                          ("see you", "bye"))]
  model = fn.fit(intents_only, method="nlu", workdir=tmp_path / "intents", **tiny(tiny_bert_dir))
  assert model.slots is None and model.parse(["hey"])[0]["entities"] == []
  with pytest.raises(ValueError, match="no slot filler"):
    model.add_examples([{"text": "to rome", "entities": [{"start": 3, "end": 7, "entity": "to"}]}])


def test_examples_with_the_slot_asked_for_let_the_cross_validation_weigh_it_and_parse_take_it(tiny_bert_dir,
                                                                                                tmp_path):
  """Examples that name the slot the bot had asked for (``requested_slot``) add the requested-slot bonuses to the
  cross-validation's grid (too few such examples: the prior bonus alone; without any: bonus 0 alone); ``parse(requested_slots=...)`` maps a slot name to its
  role labels, and a bare answer then takes the requested slot."""
  rows = [{"text": "from boston to denver", "entities": [{"start": 5, "end": 11, "entity": "city", "role": "from"},
                                                         {"start": 15, "end": 21, "entity": "city", "role": "to"}]},
          {"text": "fly to paris", "entities": [{"start": 7, "end": 12, "entity": "city", "role": "to"}]},
          {"text": "at 7 pm", "entities": [{"start": 3, "end": 7, "entity": "time"}], "requested_slot": "time"},
          {"text": "rome", "entities": [{"start": 0, "end": 4, "entity": "city", "role": "from"}],
           "requested_slot": ["city"]}]
  settings = tiny(tiny_bert_dir)
  few = fn.fit(rows, method="nlu", workdir=tmp_path / "few", **settings)  # 2 such examples: the prior alone
  assert list(few.results["slots"]["cv_f1_by_requested_bonus"]) == ["0.2"] and few.slots.requested_bonus == 0.2
  settings["slots"] = {**settings["slots"], "requested_min_examples": 2}
  model = fn.fit(rows, method="nlu", workdir=tmp_path / "asked", **settings)
  chosen = model.results["slots"]
  assert list(chosen["cv_f1_by_requested_bonus"]) == ["0.0", "0.1", "0.2", "0.3", "0.4"]
  assert chosen["requested_bonus"] in (0.0, 0.1, 0.2, 0.3, 0.4)
  assert [u.get("requested") for u in model.slots.support] == [None, None, ["time"], ["city"]]
  model.slots.requested_bonus = 1.0  # every requested span scores 1 (unless its nearest span overall does too)
  text = "madrid please"
  [plain] = model.parse([text])
  [answer] = model.parse([text], requested_slots=[["time"]])
  assert "time" not in [e["entity"] for e in plain["entities"]]
  assert "time" in [e["entity"] for e in answer["entities"]]
  [answer] = model.parse([text], requested_slots=["city"])
  assert {(e["entity"], e.get("role")) for e in answer["entities"]} <= {("city", "from"), ("city", "to")}
  assert answer["entities"]
  assert model.parse([text], requested_slots=["weather"]) == [plain]  # a slot it never fills
  with pytest.raises(ValueError, match="1 texts but 2 requested slot lists"):
    model.parse([text], requested_slots=["time", "city"])
  plain = fn.fit(rows[:2], method="nlu", workdir=tmp_path / "plain", **tiny(tiny_bert_dir))
  assert list(plain.results["slots"]["cv_f1_by_requested_bonus"]) == ["0.0"]
  assert plain.results["slots"]["requested_bonus"] == 0.0


def test_expected_slots_are_weighed_by_the_cross_validation_when_asked_for_and_there_are_intents(nlu_yml,
                                                                                                   tiny_bert_dir,
                                                                                                   tmp_path):
  """``slots.expected_shares=(1.0,)``: with intents the cross-validation weighs expected slots against none, exports
  its choice and reports it with the evidence; examples without intents have nothing to expect."""
  settings = tiny(tiny_bert_dir)
  settings["slots"] = {**settings["slots"], "expected_shares": (1.0,)}
  model = fn.fit(nlu_yml, method="nlu", workdir=tmp_path / "run", **settings)
  slots = model.results["slots"]
  assert list(slots["cv_f1_by_expected_share"]) == ["1.0", "None"]  # asked for: first, so it wins a tie
  assert slots["expected_share"] == model.slots.expected_share in (None, 1.0)
  assert fn.load(tmp_path / "run" / "export").slots.expected_share == slots["expected_share"]
  report = (tmp_path / "run" / "report.md").read_text()
  assert "Expected entities: " in report and "cross-validation F1 share 1.0 " in report and ", none " in report
  rows = [{"text": "fly to paris", "entities": [{"start": 7, "end": 12, "entity": "city"}]},
          {"text": "from rome", "entities": [{"start": 5, "end": 9, "entity": "city"}]}]
  plain = fn.fit(rows, method="nlu", workdir=tmp_path / "plain", **settings)
  assert list(plain.results["slots"]["cv_f1_by_expected_share"]) == ["None"] and plain.slots.expected_share is None
  with pytest.raises(ValueError, match=r"expected_shares.*\(1\.5,\) must be shares in \(0, 1\]"):
    fn.fit(rows, method="nlu", workdir=tmp_path / "bad", **{**settings, "slots": {**settings["slots"],
                                                                                  "expected_shares": (1.5,)}})


def test_the_cross_validation_keeps_the_preferred_learner_on_a_tie(tiny_bert_dir, tmp_path, monkeypatch):
  """``select`` through ``fit``: learners that return the encoder unchanged tie retrieval alone everywhere, so
  the first learner of ``slots.modes`` (its fewest steps) is chosen and no rival's lead is weighed, at any
  confidence; the records say which learner and what was compared (``preferred_setting`` has the rule)."""
  from fewshot_nlu.methods import span_training
  monkeypatch.setattr(span_training, "learn_support",
                      lambda base, support, tuning, seed=0, snapshots=(): [base] * max(1, len(snapshots)))
  rows = [{"text": "from boston to denver", "entities": [{"start": 5, "end": 11, "entity": "from"},
                                                         {"start": 15, "end": 21, "entity": "to"}]},
          {"text": "fly to paris", "entities": [{"start": 7, "end": 12, "entity": "to"}]},
          {"text": "leaving rome", "entities": [{"start": 8, "end": 12, "entity": "from"}]},
          {"text": "to oslo from bergen", "entities": [{"start": 3, "end": 7, "entity": "to"},
                                                       {"start": 13, "end": 19, "entity": "from"}]}]
  settings = tiny(tiny_bert_dir)
  for name, modes, confidence in (("tied", ("encoder", "metric"), 0.9), ("argmax", ("metric", "encoder"), 0.0)):
    settings["slots"] = {**settings["slots"], "modes": modes, "fallback_confidence": confidence}
    chosen = fn.fit(rows, method="nlu", workdir=tmp_path / name, **settings).results["slots"]
    assert len(set(chosen["cv_f1_by_steps"].values())) == 1  # every learner is the encoder itself
    assert (chosen["support_mode"], chosen["support_steps"]) == (modes[0], 2)
    assert not [key for key in chosen if key.endswith("_lead_share")]


def _per_utterance(right: int, utterances: int = 40) -> np.ndarray:
  """[utterances, 3] span counts (correct, gold, predicted): one gold span each, found in the first ``right``."""
  counts = np.ones((utterances, 3), np.int64)
  counts[right:, 0] = 0
  return counts


@pytest.mark.parametrize("metric_right, retrieval_right, confidence, expected", [
    (21, 10, 0.9, ("encoder", 2, {"metric_lead_share"})),  # a span ahead: a coin flip, the encoder stays
    (34, 10, 0.9, ("metric", 3, {"metric_lead_share"})),  # far ahead: the metric takes over
    (21, 10, 0.0, ("metric", 3, {"metric_lead_share"})),  # confidence 0: wherever the F1 is higher
    (20, 20, 0.9, ("encoder", 2, set())),  # ties keep the preferred learner
    (21, 22, 0.9, ("encoder", 2, {"metric_lead_share", "retrieval_lead_share"})),  # weighed against the pick
    (21, 36, 0.9, ("retrieval", 0, {"metric_lead_share", "retrieval_lead_share"})),
])
def test_a_less_preferred_setting_wins_only_on_clear_evidence(metric_right, retrieval_right, confidence, expected):
  """``preferred_setting``: candidates 0 (retrieval alone), 1-2 (encoder, 2 the better), 3-4 (metric), each
  with per-utterance counts of 40 held-out utterances; the encoder's best is picked unless a later group's best has
  a higher pooled F1 and leads the pick in ``confidence`` of the bootstrap resamples — the shares as
  ``span_f1.paired_bootstrap_lead`` gives them for the same draws."""
  from fewshot_nlu.evaluation import span_f1
  from fewshot_nlu.methods.nlu import train
  per = np.stack([_per_utterance(r) for r in (retrieval_right, 19, 20, metric_right, 5)])[:, None, None, None]
  f1 = span_f1.f1_of(per.sum(-2))
  groups = {"encoder": [1, 2], "metric": [3, 4], "retrieval": [0]}
  names = {0: "retrieval", 1: "encoder", 2: "encoder", 3: "metric", 4: "metric"}
  pick, record = train.preferred_setting(f1, per, groups, confidence, np.random.default_rng(0))
  assert (names[pick[0]], pick[0], set(record)) == expected
  assert pick[1:] == (0, 0, 0)
  rng = np.random.default_rng(0)
  if "metric_lead_share" in record:
    lead = span_f1.paired_bootstrap_lead(per[3, 0, 0, 0], per[2, 0, 0, 0], train.FALLBACK_RESAMPLES, rng)
    assert record["metric_lead_share"] == round(lead, 3)
    if names[pick[0]] != "retrieval":
      assert (lead >= confidence) == (names[pick[0]] == "metric")


def test_the_server_answers_model_parse_and_takes_annotated_examples(nlu_yml, tiny_bert_dir, tmp_path):
  from tests.serve.test_main import Server
  model = fn.fit(nlu_yml, method="nlu", workdir=tmp_path / "run", **tiny(tiny_bert_dir))
  server = Server(["fewshot_nlu.serve"], model.workdir / "export", tmp_path / "serve.log", "--no-warmup")
  try:
    answer = server.client.post("/model/parse", json={"text": "hello there!", "message_id": "m1"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["text"] == "hello there!" and body["message_id"] == "m1" and set(body["intent"]) == {"name",
                                                                                                    "confidence"}
    added = server.client.post("/examples", json={
        "texts": ["a [big] one", "what's on the menu?"], "labels": [None, "menu"],
        "entities": [[{"start": 3, "end": 6, "entity": "size_word"}], []]})
    assert added.status_code == 200, added.text
    assert set(added.json()["new_labels"]) == {"menu", "size_word"}
    added = server.client.post("/examples", json={"examples": [  # the form Python's add_examples takes
        {"text": "one tiny pie", "intent": "order_pie", "entities": [{"start": 4, "end": 8, "entity": "size_word"}]},
        {"text": "bye now", "intent": "goodbye"}]})
    assert added.status_code == 200, added.text
    assert set(added.json()["new_labels"]) == {"order_pie", "goodbye"}
    for body, message in (({"examples": [{"text": "hey"}]}, "examples[0]: give an 'intent', 'entities' or both"),
                          ({"examples": [{"text": "hey", "label": "a"}]}, "examples[0]: unknown field 'label'"),
                          ({"examples": [], "texts": []}, "unknown field 'texts'"),
                          ({"examples": "hey"}, "examples: expected a non-empty list")):
      bad = server.client.post("/examples", json=body)
      assert bad.status_code == 400 and message in bad.json()["error"], (body, bad.text)
    bad = server.client.post("/model/parse", json={"text": ""})
    assert bad.status_code == 400 and "text: empty text" in bad.json()["error"]
    asked = server.client.post("/model/parse", json={"text": "a large one", "requested_slot": "size"})
    assert asked.status_code == 200, asked.text
    assert asked.json()["text"] == "a large one" and "entities" in asked.json()
    bad = server.client.post("/model/parse", json={"text": "large", "requested_slot": 3})
    assert bad.status_code == 400 and "requested_slot: expected a slot name" in bad.json()["error"]
    bad = server.client.post("/examples", json={"texts": ["x y"], "labels": ["a"],
                                                "entities": [[{"start": 0, "end": 9, "entity": "e"}]]})
    assert bad.status_code == 400 and "are not a span" in bad.json()["error"]
  finally:
    server.stop()


@pytest.mark.integration
def test_with_minilm_parse_finds_the_exact_offsets_and_values(nlu_yml, tmp_path):
  model = fn.fit(nlu_yml, method="nlu", workdir=tmp_path / "run",  # 30 steps: the intents are easy, CI is short
                 intents={"compilation_cache_dir": "", "train": {"max_steps": 30},
                          # out-of-scope is not under test here (tests/methods/convfit/test_stage2.py has the
                          # shipped held_out_half rule): no second Stage 2 on real weights
                          "eval": {"calibration_rule": "leave_one_out"}},
                 slots={"support_steps": (0, 25)})  # both learners, one step count: the CV's cost on real weights
  text = "can I get a medium veggie?"
  [answer] = model.parse([text])
  assert answer["intent"]["name"] == "order_pizza"
  assert [(e["entity"], e["start"], e["end"], e["value"]) for e in answer["entities"]] == [
      ("size", 12, 18, "medium"), ("topping", 19, 25, "vegetarian")]
  greeting = model.parse(["hello there!"])[0]
  assert greeting["intent"]["name"] == "greet" and greeting["entities"] == []
  assert np.isfinite(greeting["intent"]["confidence"])
  assert json.loads(json.dumps(answer)) == answer  # plain JSON


def test_readme_joint_nlu_example_runs(tiny_bert_dir, tmp_path, monkeypatch, capsys):
  """README's joint NLU block as written (the tiny random model and a step or two of training added to its
  ``fit`` call): every call works, and the new intent and slot type survive ``save``."""
  from fewshot_nlu import api
  readme = (pathlib.Path(__file__).resolve().parents[3] / "README.md").read_text()
  section = readme[readme.index("### Joint NLU"):]
  start = section.index("```python\n") + len("```python\n")
  block = section[start:section.index("```\n", start)]
  (tmp_path / "data").mkdir()
  (tmp_path / "data" / "nlu.yml").write_text(NLU_YML)
  real_fit = api.fit
  monkeypatch.setattr(api, "fit", lambda *args, **kwargs: real_fit(*args, **kwargs, **tiny(tiny_bert_dir)))
  monkeypatch.chdir(tmp_path)
  namespace: dict = {}
  exec(compile(block, "README.md", "exec"), namespace)
  loaded = fn.load(tmp_path / "my_bot")
  assert "cancel" in loaded.labels and "order_id" in loaded.slot_labels
