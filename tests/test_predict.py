"""One model protocol for every exported model: ``models.load`` dispatches on the recorded kind (and reads
exports written before kinds were), and ``python -m fewshot_nlu.predict`` answers for every kind a method
writes: k-NN / MLP intents (baseline, ConvFiT), QAID, Multi-ConvFiT label sets and the Retriever slot filler.
Exports are built from the tiny random model directly, and the SNIPS slot-filling protocol is run for real
(frozen encoder, cheap) for its export. The other methods' real exports are answered by the CLI in their own
end-to-end tests (test_main: baseline; methods/convfit/test_stage2: ConvFiT k-NN; methods/qaid/test_train;
methods/multi_convfit/test_train). Its outputs stay aligned with its inputs."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from fewshot_nlu import main, models, predict
from fewshot_nlu.encoders import pretrained
from fewshot_nlu.encoders import projection as projection_head
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.methods.multi_convfit.model import MultiLabelModel
from fewshot_nlu.methods.qaid.model import QAIDModel
from fewshot_nlu.models.slot_filler import SlotFillerModel
from fewshot_nlu.models.span_retrieval import SlotRetriever, SpanEncoder
from fewshot_nlu.models import protocol
from fewshot_nlu.models.intent_model import IntentModel
from tests import tiny
from tests.reliability_helpers import toy  # noqa: F401  (toy: fixture)

TEXTS = tiny.CORPUS[:6]
LABELS = ["bank", "weather", "food", "music", "bank", "bank"]
SUPPORT = [{"tokens": "book a table at an italian restaurant".split(), "tags": "O O O O O B-cuisine O".split()},
           {"tokens": "set an alarm for seven am".split(), "tags": "O O O O B-time I-time".split()},
           {"tokens": "play some jazz music please".split(), "tags": "O O B-genre O O".split()}]


@pytest.fixture(scope="module")
def encoder(tiny_bert_dir):
  return SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)


def _run(argv, capsys) -> tuple[int, str, str]:
  capsys.readouterr()
  code = predict.main(argv)
  captured = capsys.readouterr()
  return code, captured.out, captured.err


def _jsonl(path) -> list[dict]:
  return [json.loads(line) for line in path.read_text().splitlines()]


def _check_protocol(model, texts):
  assert isinstance(model, protocol.Model)
  scores = model.scores(texts)
  assert scores.shape == (len(texts), len(model.labels)) and scores.dtype == np.float32
  predictions = model.predict(texts)
  assert len(predictions) == len(texts)
  for p in predictions:
    assert set(p.labels) <= set(model.labels) and isinstance(p.score, float)
    json.dumps(p.to_dict())
  return scores, predictions


# ------------------------------------------------------------------------------------ intent models

@pytest.mark.parametrize("classifier", ["knn", "mlp", "prototype"])
def test_intent_model_export_answers_and_grows(encoder, tmp_path, capsys, classifier):
  head = mlp_head.MLPConfig(hidden=(16,), dropout=0.0, epochs=5) if classifier == "mlp" else None
  model = IntentModel.from_examples(encoder, TEXTS, LABELS, classifier=classifier, head=head)  # MLP: fitted here
  scores, predictions = _check_protocol(model, TEXTS)
  assert [model.labels[i] for i in scores.argmax(1)] == [p.label for p in predictions]
  if classifier != "mlp":  # k = 1: the cosine; prototypes: the nearest prototype's cosine
    np.testing.assert_allclose(scores.max(1), [p.score for p in predictions], rtol=1e-5, atol=1e-6)
  else:
    np.testing.assert_allclose(scores.sum(1), 1.0, rtol=1e-5, atol=1e-6)
  export = model.save(tmp_path / "export")
  assert json.loads((export / "intent_model.json").read_text())["kind"] == "intent_model"
  assert models.kind_of(export) == "intent_model" and isinstance(models.load(export), IntentModel)

  code, out, _ = _run(["--model", str(export), "--neighbours", "2", TEXTS[3]], capsys)
  lines = out.splitlines()
  assert code == 0 and lines[0] == TEXTS[3] and lines[1].startswith("  -> ") and len(lines) == 4
  if classifier != "mlp":  # music's one example: its own nearest example and prototype
    assert lines[1] == "  -> music  (1.000)" and lines[2].endswith(TEXTS[3])
  if classifier == "knn":  # the encoder run by ONNX Runtime answers the same
    assert _run(["--model", str(export), "--neighbours", "2", "--runtime", "onnxruntime", TEXTS[3]], capsys)[:2] == (
        0, out)

  extra = tmp_path / "extra.tsv"
  extra.write_text(f"{tiny.CORPUS[6]}\talarm\n")
  code, _, err = _run(["--model", str(export), "--add", str(extra), "--save", "--output",
                       str(tmp_path / "p.jsonl"), tiny.CORPUS[6]], capsys)
  assert code == 0 and "added 1 examples (7 in all)" in err
  [row] = _jsonl(tmp_path / "p.jsonl")
  assert row["text"] == tiny.CORPUS[6] and row["neighbours"][0] == {"text": tiny.CORPUS[6], "label": "alarm",
                                                                    "score": pytest.approx(1.0, abs=1e-5)}
  grown = models.load(export)
  assert len(grown) == 7
  assert grown.labels[-1] == "alarm" and grown.scores([tiny.CORPUS[6]]).shape == (1, 5)  # a new intent
  if classifier != "mlp":  # its own copy is the nearest example and the prototype (the MLP, retrained for 5
    # epochs, may disagree)
    assert row["label"] == "alarm"
  else:
    assert [len(layer["bias"]) for layer in grown.mlp] == [16, 5]  # retrained with the new label, saved


def test_exports_without_a_recorded_kind_are_read_by_their_metadata_file(encoder, tmp_path):
  export = IntentModel.from_examples(encoder, TEXTS, LABELS).save(tmp_path / "old")
  meta = json.loads((export / "intent_model.json").read_text())
  del meta["kind"]
  (export / "intent_model.json").write_text(json.dumps(meta))
  assert models.kind_of(export) == "intent_model"
  assert models.load(export).predict([TEXTS[1]])[0].label == "weather"
  meta["kind"] = "qaid"
  (export / "intent_model.json").write_text(json.dumps(meta))
  with pytest.raises(ValueError, match="kind 'qaid', but that file belongs to kind 'intent_model'"):
    models.load(export)
  with pytest.raises(ValueError, match="unknown model kind 'magic'"):
    models.model_class("magic")


def test_encoder_only_and_missing_exports_fail_clearly(tiny_bert_dir, tmp_path, capsys):
  code, _, err = _run(["--model", str(tiny_bert_dir), "hi"], capsys)
  assert code == 2 and "an encoder export (config.json, no model metadata)" in err
  code, _, err = _run(["--model", str(tmp_path / "nowhere"), "hi"], capsys)
  assert code == 2 and "no such directory" in err


# --------------------------------------------------------------------------------------------- QAID

def test_qaid_export_answers_and_grows(tiny_bert_dir, tmp_path, capsys):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  projection = jax.device_get(projection_head.init(jax.random.key(0), model.config.hidden_size, 16))
  qaid = QAIDModel(model.config, model.params, model.tokenizer, projection, batch_size=4, match="qq+qa")
  qaid.add_answers(["transfer_money", "weather", "book_table"])
  scores, predictions = _check_protocol(qaid, TEXTS)
  assert [qaid.labels[i] for i in scores.argmax(1)] == [p.label for p in predictions]
  np.testing.assert_allclose(scores.max(1), [p.score for p in predictions], rtol=1e-5, atol=1e-6)
  export = qaid.save(tmp_path / "export")
  assert models.kind_of(export) == "qaid"
  code, out, _ = _run(["--model", str(export), TEXTS[0]], capsys)
  lines = out.splitlines()
  assert code == 0 and lines[0] == TEXTS[0] and lines[1].startswith("  -> ") and len(lines) == 5
  extra = tmp_path / "extra.tsv"
  extra.write_text(f"{TEXTS[5]}\treset_pin\n")
  code, _, _ = _run(["--model", str(export), "--add", str(extra), "--save", "--output",
                       str(tmp_path / "p.jsonl"), TEXTS[5]], capsys)
  [row] = _jsonl(tmp_path / "p.jsonl")
  assert code == 0 and row["label"] == "reset_pin" and row["neighbours"][0]["text"] == TEXTS[5]
  assert models.load(export).labels == ["transfer_money", "weather", "book_table", "reset_pin"]


def test_one_pass_prediction_and_scores_equal_the_two_calls(encoder, tiny_bert_dir):
  """``predict_with_scores`` (the joint NLU model's intent + ranking from one encoding / scoring pass) answers
  what ``predict`` and ``scores`` answer apart, for ConvFiT's intent model and for QAID, rejection included."""
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  projection = jax.device_get(projection_head.init(jax.random.key(0), model.config.hidden_size, 16))
  qaid = QAIDModel(model.config, model.params, model.tokenizer, projection, batch_size=4, match="qq+qa")
  qaid.add_answers(["transfer_money", "weather", "book_table"])
  qaid.add_examples(TEXTS[:3], ["transfer_money", "weather", "book_table"])
  intents = IntentModel.from_examples(encoder, TEXTS[:4], ["a", "b", "a", "b"])
  for intent_model in (intents, qaid):
    for options in ({}, {"threshold": 0.5}):
      predictions, scores = intent_model.predict_with_scores(TEXTS, neighbours=2, **options)
      assert predictions == intent_model.predict(TEXTS, neighbours=2, **options)
      np.testing.assert_allclose(scores, intent_model.scores(TEXTS), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------------ Multi-ConvFiT

def test_multi_label_export_prints_label_sets_and_refuses_examples(encoder, tmp_path, capsys):
  labels = ["bank", "food", "music"]
  targets = np.array([[1, 0, 0], [0, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [1, 0, 1]], np.float32)
  mlp = mlp_head.train(encoder.encode(TEXTS), targets,
                       mlp_head.MLPConfig(hidden=(16,), dropout=0.0, epochs=5, multilabel=True))
  model = MultiLabelModel(encoder, mlp, labels, [0.0, 0.5, 1.1])  # always bank, never music
  scores, predictions = _check_protocol(model, TEXTS)
  assert ((scores >= 0) & (scores <= 1)).all()
  assert all(p.labels[0] == "bank" and "music" not in p.labels for p in predictions)
  export = model.save(tmp_path / "export")
  assert models.kind_of(export) == "multi_label"
  code, out, _ = _run(["--model", str(export), "--neighbours", "2", "--output", str(tmp_path / "p.jsonl"),
                       TEXTS[0]], capsys)
  [row] = _jsonl(tmp_path / "p.jsonl")
  assert code == 0 and row["labels"][0] == "bank" and len(row["probabilities"]) == 2
  code, out, _ = _run(["--model", str(export), TEXTS[0]], capsys)
  lines = out.splitlines()
  assert code == 0 and lines[1].startswith("  -> bank") and len(lines) == 2 + 3
  assert any(line.endswith("bank  *") for line in lines[2:])
  extra = tmp_path / "extra.tsv"
  extra.write_text("hello\tbank\n")
  code, _, err = _run(["--model", str(export), "--add", str(extra), "hello"], capsys)
  assert code == 2 and "cannot take new examples without retraining" in err


# -------------------------------------------------------------------------------------- slot filler

def test_slot_filler_export_prints_slots_with_evidence_and_grows(tiny_bert_dir, tmp_path, capsys):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  span_encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  # dot-product retrieval (the paper's): with the random tiny model's cosines, "for seven am" would pass 0.9 too
  filler = SlotFillerModel(SlotRetriever(span_encoder, max_words=3, similarity="dot"), SUPPORT, threshold=0.9,
                           notes={"support": "hand-written"})
  assert filler.labels == ["cuisine", "genre", "time"] and len(filler) == 3
  query = "set an alarm for seven am"
  scores, [p] = _check_protocol(filler, [query])
  assert scores[0, 2] == pytest.approx(1.0, abs=1e-5) and ((scores >= 0) & (scores <= 1)).all()
  time_slots = [s for s in p.slots if s.label == "time"]
  assert [(s.start, s.end, s.text) for s in time_slots] == [(4, 6, "seven am")]  # retrieves its own support span
  assert time_slots[0].evidence.text == "seven am" and time_slots[0].support_utterance == query
  assert p.tags[4:] == ("B-time", "I-time")
  with pytest.raises(ValueError, match="2 words but 1 tags"):
    filler.add_examples(["cancel order"], ["O"])
  with pytest.raises(ValueError, match="'I-x' follows 'O'"):
    filler.add_examples(["cancel order"], ["O I-x"])

  export = filler.save(tmp_path / "export")
  meta = json.loads((export / "slot_filler.json").read_text())
  assert meta["kind"] == "slot_filler" and meta["threshold"] == 0.9 and meta["notes"] == {"support": "hand-written"}
  assert models.kind_of(export) == "slot_filler"
  code, out, _ = _run(["--model", str(export), query], capsys)
  lines = out.splitlines()
  assert code == 0 and lines[0] == query and lines[1].startswith("  -> ") and lines[1].endswith("B-time I-time")
  assert any("time" in line and "<- 'seven am'" in line for line in lines[2:])

  extra = tmp_path / "extra.tsv"
  extra.write_text("cancel my order\tO O B-object\n")
  code, _, err = _run(["--model", str(export), "--add", str(extra), "--save", "--output",
                       str(tmp_path / "p.jsonl"), "cancel my order"], capsys)
  assert code == 0 and "added 1 examples (4 in all)" in err
  [row] = _jsonl(tmp_path / "p.jsonl")
  assert row["tags"].endswith("B-object") and row["slots"][-1]["evidence"]["utterance"] == "cancel my order"
  assert models.load(export).labels == ["cuisine", "genre", "object", "time"]
  extra.write_text("cancel my order\tO O\n")
  code, _, err = _run(["--model", str(export), "--add", str(extra), "x"], capsys)
  assert code == 2 and "3 words but 2 tags" in err


def test_slot_filler_answers_from_a_support_folder_given_on_the_command_line(tiny_bert_dir, tmp_path, capsys):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  span_encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  export = SlotFillerModel(SlotRetriever(span_encoder, max_words=3), SUPPORT[:1], threshold=0.9).save(
      tmp_path / "export")
  folder = tmp_path / "support"
  folder.mkdir()
  (folder / "seq.in").write_text("wake me at seven am\n")
  (folder / "seq.out").write_text("O O O B-time I-time\n")
  code, out, err = _run(["--model", str(export), "--support", str(folder), "wake me at seven am"], capsys)
  assert code == 0 and "support set: 1 utterances" in err and out.splitlines()[1].endswith("B-time I-time")
  assert models.load(export).labels == ["cuisine"]  # without --save the export keeps its own support set
  (folder / "seq.out").write_text("O O O I-time I-time\n")
  code, _, err = _run(["--model", str(export), "--support", str(folder), "x"], capsys)
  assert code == 2 and "seq.out:1: field 'tags': tag 4 'I-time' follows 'O'" in err
  (folder / "seq.out").write_text("O O O B-time I-time\n")
  code, _, err = _run(["--model", str(export), "--support", str(folder), "--save"], capsys)
  assert code == 0 and models.load(export).labels == ["time"]


# ----------------------------------------------------------------------------------- real runs' exports

def test_snips_protocol_exports_a_slot_filler(tiny_bert_dir, tmp_path, capsys):
  from fewshot_nlu.data import splits
  from fewshot_nlu.data.builders.slots import load_episodes
  from tests.methods.retriever.helpers import _config, write_toy_snips
  raw = write_toy_snips(tmp_path / "raw")
  config = _config()
  config.model.name, config.model.max_length = str(tiny_bert_dir), 32
  config.data.raw_dir, config.data.tfds_dir = str(raw), str(tmp_path / "tfds")
  config.data.folds = (2,)
  config.retriever.train = False  # Retriever^frz: no training, the export is what matters here
  config.retriever.encoder_layers = 0  # the tiny model has 2 layers (the default cuts MiniLM at 3)
  config.compilation_cache_dir = ""
  main.run(config, tmp_path / "run")
  export = tmp_path / "run" / "fold2" / "export"
  fold = json.loads((tmp_path / "run" / "fold2" / "results.json").read_text())
  meta = json.loads((export / "slot_filler.json").read_text())
  assert meta["kind"] == "slot_filler" and meta["threshold"] == fold["threshold"]
  assert "fold2_test" in meta["notes"]["support"] and fold["dev_domain"] in meta["notes"]["threshold"]
  first = load_episodes(splits.prepared_builder(config), "fold2_test")[0]
  model = models.load(export)
  assert isinstance(model, SlotFillerModel)
  assert model.support == [{"tokens": u["tokens"], "tags": u["tags"],  # an episode's intent is kept where it has one
                            **({"intent": u["intent"]} if u.get("intent") is not None else {})}
                           for u in first["support"]]
  query = " ".join(first["query"][0]["tokens"])
  code, out, _ = _run(["--model", str(export), query], capsys)
  lines = out.splitlines()
  assert code == 0 and lines[0] == query and len(lines[1].split()) == 1 + len(first["query"][0]["tokens"])


def test_predict_keeps_inputs_and_outputs_aligned_and_checks_paths_first(toy, tmp_path, capsys):
  main.run(toy, tmp_path / "run")  # the baseline's export
  export = str(tmp_path / "run" / "export")
  queries = tmp_path / "queries.txt"
  queries.write_text("my card is lost\n\n   \nplay some music\n")
  out = tmp_path / "out.jsonl"
  assert predict.main(["--model", export, "--input", str(queries), "--output", str(out)]) == 0
  rows = [json.loads(line) for line in out.read_text().splitlines()]
  assert [r["text"] for r in rows] == ["my card is lost", "", "", "play some music"]
  assert [r.get("empty", False) for r in rows] == [False, True, True, False]
  assert "label" in rows[0] and "label" in rows[3]
  assert predict.main(["--model", "/no/such/model", "--output", str(tmp_path / "no" / "out.jsonl"), "x"]) == 2
  assert capsys.readouterr().err.strip().splitlines()[-1] == (
      f"error: --output {tmp_path / 'no' / 'out.jsonl'}: folder {tmp_path / 'no'} does not exist")
  assert predict.main(["--model", export, "fine", ""]) == 2
  assert capsys.readouterr().err.strip() == "error: utterance 2 on the command line is empty; give words to classify"
