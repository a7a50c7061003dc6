"""The intent model (``models.intent_model``): the k-NN vote, predictions with evidence, added intents, the
prototype and linear classifiers, save / load, and ``save_rows`` writing grown examples atomically (a failure or a
kill part-way leaves the old export loadable and unchanged; a kill -9 during a live server's persist:
serve/test_main)."""

import json

import numpy as np
import pytest

from fewshot_nlu import models
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.index import Index
from fewshot_nlu.models.intent_model import IntentModel, Neighbour, vote
from tests import tiny

TEXTS = tiny.CORPUS[:4]
LABELS = ["bank", "weather", "food", "music"]


def test_vote_sums_cosines_per_label_and_keeps_the_nearer_on_ties():
  n = [Neighbour("a", "x", 0.9), Neighbour("b", "y", 0.6), Neighbour("c", "y", 0.5)]
  assert vote(n[:1]) == ("x", 0.9)
  assert vote(n) == ("y", pytest.approx(1.1))
  assert vote([Neighbour("a", "x", 0.5), Neighbour("b", "y", 0.5)])[0] == "x"


def test_intent_model_predicts_explains_grows_and_round_trips(tiny_bert_dir, tmp_path):
  encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
  texts, labels = tiny.CORPUS[:6], ["bank", "weather", "food", "music", "bank", "bank"]
  model = IntentModel.from_examples(encoder, texts, labels)
  [p] = model.predict([texts[3]])
  assert p.label == "music" and p.score == pytest.approx(1.0, abs=1e-5)
  assert p.neighbours[0] == Neighbour(texts[3], "music", pytest.approx(1.0, abs=1e-5)) and len(p.neighbours) == 3
  model.add_examples([tiny.CORPUS[6]], ["alarm"])  # a new intent, no retraining
  assert model.predict([tiny.CORPUS[6]])[0].label == "alarm" and "alarm" in model.labels
  model.save(tmp_path / "export")
  loaded = IntentModel.load(tmp_path / "export")
  assert loaded.predict(tiny.CORPUS) == model.predict(tiny.CORPUS)
  assert len(loaded.index) == 7


def test_prototype_classifier_is_the_nearest_class_mean_and_follows_the_index(tiny_bert_dir, tmp_path):
  encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
  texts, labels = tiny.CORPUS[:6], ["bank", "weather", "food", "music", "bank", "bank"]
  model = IntentModel.from_examples(encoder, texts, labels, classifier="prototype")
  x = encoder.encode(texts)
  x = x / np.linalg.norm(x, axis=1, keepdims=True)
  means = {l: x[[i for i, m in enumerate(labels) if m == l]].mean(0) for l in model.labels}  # numpy reference
  queries = encoder.encode(tiny.CORPUS)
  queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
  expected = np.stack([queries @ (means[l] / np.linalg.norm(means[l])) for l in model.labels], axis=1)
  np.testing.assert_allclose(model.scores(tiny.CORPUS), expected, rtol=1e-5, atol=1e-5)
  predictions = model.predict(tiny.CORPUS)
  assert [p.label for p in predictions] == [model.labels[i] for i in expected.argmax(1)]
  np.testing.assert_allclose([p.score for p in predictions], expected.max(1), rtol=1e-5, atol=1e-5)
  assert predictions[0].neighbours[0].text == texts[0]  # the nearest examples are still the evidence
  model.add_examples([tiny.CORPUS[6]], ["alarm"])  # a new intent's prototype at once, nothing retrained
  assert model.predict([tiny.CORPUS[6]])[0].label == "alarm"
  assert model.rejection_score == "nearest"
  model.save(tmp_path / "export")
  loaded = IntentModel.load(tmp_path / "export")
  assert loaded.classifier == "prototype" and loaded.predict(tiny.CORPUS) == model.predict(tiny.CORPUS)


def test_a_linear_head_learns_added_intents_and_the_grown_export_keeps_it(tiny_bert_dir, tmp_path):
  encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
  texts, labels = tiny.CORPUS[:6], ["bank", "weather", "food", "music", "bank", "bank"]
  head = mlp_head.MLPConfig(hidden=(), dropout=0.0, optimizer="adamw", learning_rate=1e-1, epochs=100,
                            decay="constant")
  model = IntentModel.from_examples(encoder, texts, labels, classifier="mlp", head=head)
  assert [len(layer["bias"]) for layer in model.mlp] == [4]  # trained on the indexed examples
  assert [p.label for p in model.predict(texts)] == labels
  model.save(tmp_path / "export")
  grown = IntentModel.load(tmp_path / "export")
  assert grown.head == head
  grown.add_examples(tiny.CORPUS[6:8], ["alarm", "alarm"])  # a new intent: the head is retrained with it
  assert grown.labels[-1] == "alarm" and [len(layer["bias"]) for layer in grown.mlp] == [5]
  assert [p.label for p in grown.predict(tiny.CORPUS[6:8])] == ["alarm", "alarm"]
  grown.save_rows(tmp_path / "export")
  again = IntentModel.load(tmp_path / "export")
  assert again.labels == grown.labels
  np.testing.assert_array_equal(again.scores(tiny.CORPUS), grown.scores(tiny.CORPUS))
  older = IntentModel(encoder, model.index, model.labels, classifier="mlp", mlp=model.mlp)  # saved without head
  with pytest.raises(ValueError, match=r"new labels \['chat'\]"):
    older.add_examples([tiny.CORPUS[9]], ["chat"])


@pytest.fixture(scope="module")
def export(tiny_bert_dir, tmp_path_factory):
  encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
  return IntentModel.from_examples(encoder, TEXTS, LABELS).save(tmp_path_factory.mktemp("m") / "export")


def test_intent_model_save_rows_switches_index_folders_atomically(export, monkeypatch):
  model = models.load(export)
  model.add_examples([tiny.CORPUS[6]], ["alarm"])
  model.save_rows(export)
  meta = json.loads((export / "intent_model.json").read_text())
  assert meta["index"] == "index.1" and not (export / "index").exists() and meta["labels"][-1] == "alarm"
  grown = models.load(export)
  assert len(grown) == 5 and grown.predict([tiny.CORPUS[6]])[0].label == "alarm"

  grown.add_examples([tiny.CORPUS[7]], ["cancel"])
  real_save = Index.save

  def dies_half_way(self, directory):
    np.save(directory / "vectors.npy", self.vectors)  # the first file of the new index, then the "kill"
    raise KeyboardInterrupt

  monkeypatch.setattr(Index, "save", dies_half_way)
  with pytest.raises(KeyboardInterrupt):
    grown.save_rows(export)
  old = models.load(export)
  assert len(old) == 5 and old.labels == grown.labels[:-1]
  assert json.loads((export / "intent_model.json").read_text())["index"] == "index.1"

  (export / "index.2").mkdir()  # as if killed after the new folder was in place but before the switch
  monkeypatch.setattr(Index, "save", real_save)
  grown.save_rows(export)
  assert sorted(p.name for p in export.iterdir() if p.name.startswith(("index", ".index"))) == ["index.2"]
  assert len(models.load(export)) == 6


def test_a_bad_index_name_in_the_metadata_is_refused(export, tmp_path):
  meta_path = export / "intent_model.json"
  meta = json.loads(meta_path.read_text())
  meta_path.write_text(json.dumps({**meta, "index": "../elsewhere"}))
  try:
    with pytest.raises(ValueError, match="is no index folder of an export"):
      models.load(export)
  finally:
    meta_path.write_text(json.dumps(meta))
