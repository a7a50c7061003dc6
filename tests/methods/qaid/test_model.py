"""QAID's retrieval model (``methods.qaid.model``): exact and approximate candidates, Match-QQ+QA, intent
documents, new intents, save / load, and intent names and description files."""

import jax
import numpy as np
import pytest

from fewshot_nlu.encoders import pretrained
from fewshot_nlu.encoders import projection as projection_head
from fewshot_nlu.methods.qaid.model import QAIDModel, intent_name, read_intent_descriptions
from tests import tiny


def _qaid_model(tiny_bert_dir, **kwargs):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  projection = jax.device_get(projection_head.init(jax.random.key(0), model.config.hidden_size, 16))
  return QAIDModel(model.config, model.params, model.tokenizer, projection, batch_size=4, **kwargs)


def _assert_same_predictions(got, want):
  """Same labels and evidence; scores equal up to float32 rounding (batches of other shapes round differently)."""
  assert [(p.label, [(n.text, n.label) for n in p.neighbours]) for p in got] == [
      (p.label, [(n.text, n.label) for n in p.neighbours]) for p in want]
  np.testing.assert_allclose([n.score for p in got for n in p.neighbours],
                             [n.score for p in want for n in p.neighbours], rtol=1e-5, atol=1e-6)


def test_qaid_model_retrieves_names_exactly_and_approximately_and_grows(tiny_bert_dir, tmp_path):
  c = tiny.CORPUS
  exact = _qaid_model(tiny_bert_dir)
  exact.add_answers(["transfer_money", "weather", "book_table", "play_music"])
  assert [r["text"] for r in exact.rows] == ["transfer money", "weather", "book table", "play music"]
  scores, rows = exact.row_scores(c)
  z, m = exact.represent(c, 32)
  want = [[np.sum(np.max(z[i][m[i] > 0] @ exact.row_vectors[j][exact.row_mask[j] > 0].T, axis=1)) / m[i].sum()
           for j in rows] for i in range(len(c))]
  np.testing.assert_allclose(scores, want, rtol=1e-5, atol=1e-6)
  predictions = exact.predict(c, neighbours=2)
  assert [p.label for p in predictions] == [exact.rows[rows[j]]["label"] for j in np.argmax(scores, 1)]
  first, second = predictions[0].neighbours
  assert first.score >= second.score
  approximate = _qaid_model(tiny_bert_dir, candidate_threshold=0, candidate_tokens=1000)  # all candidates
  approximate.add_answers(["transfer_money", "weather", "book_table", "play_music"])
  _assert_same_predictions(approximate.predict(c), exact.predict(c))
  few = _qaid_model(tiny_bert_dir, candidate_threshold=0, candidate_tokens=1)
  few.add_answers(["transfer_money", "weather", "book_table", "play_music"])
  few_scores, _ = few.row_scores(c)
  finite = np.isfinite(few_scores)
  assert not finite.all() and finite.any()
  np.testing.assert_allclose(few_scores[finite], scores[finite], rtol=1e-5, atol=1e-6)
  # A new intent, from examples, without retraining; Match-QQ+QA scores the examples too.
  exact.add_examples([c[9]], ["thank_you"])
  assert exact.labels[-1] == "thank_you" and len(exact) == 6
  both = _qaid_model(tiny_bert_dir, match="qq+qa")
  both.add_answers(["transfer_money", "weather"])
  both.add_examples([c[5]], ["reset_pin"])
  top = both.predict([c[5]])[0]
  assert top.label == "reset_pin" and top.neighbours[0].text == c[5] and top.score == pytest.approx(1.0, abs=1e-5)
  exact.save(tmp_path / "m")
  loaded = QAIDModel.load(tmp_path / "m")
  assert loaded.rows == exact.rows
  _assert_same_predictions(loaded.predict(c), exact.predict(c))
  with pytest.raises(ValueError, match="already answered"):
    exact.add_answers(["weather"])


def test_intent_documents_score_each_query_token_against_all_of_an_intents_tokens(tiny_bert_dir, tmp_path):
  c = tiny.CORPUS
  model = _qaid_model(tiny_bert_dir, match="intent_doc", score_chunk=2)  # documents scored a few at a time
  model.add_answers(["transfer_money", "weather", "book_table"])
  model.add_examples([c[0], c[1], c[2], c[3], c[4]], ["transfer_money", "weather", "transfer_money", "weather",
                                                       "reset_pin"])
  z, m = model.represent(c, 32)
  tokens = {}  # the union of each intent's rows' token vectors, by hand
  for row, vectors, mask in zip(model.rows, model.row_vectors, model.row_mask):
    tokens.setdefault(row["label"], []).append(vectors[mask > 0])
  want = np.array([[np.sum(np.max(z[i][m[i] > 0] @ np.concatenate(tokens[l]).T, axis=1)) / m[i].sum()
                    for l in model.labels] for i in range(len(c))])
  np.testing.assert_allclose(model.scores(c), want, rtol=1e-5, atol=1e-6)
  assert model.labels == ["transfer_money", "weather", "book_table", "reset_pin"]  # reset_pin: name + example
  # One query encoding, every mode: the same as asking for each mode on its own.
  every = model.match_row_scores(c)
  for match in ("qa", "qq+qa", "intent_doc"):
    np.testing.assert_allclose(model.label_scores(*every[match]), model.scores(c, match=match), rtol=1e-6, atol=1e-6)
  assert every["qa"][1].tolist() == [0, 1, 2, 3]  # the answer rows (reset_pin's name comes before the examples)
  predictions = model.predict(c, neighbours=2)
  assert [p.label for p in predictions] == [model.labels[i] for i in want.argmax(1)]
  assert predictions[0].neighbours[0].text in {"transfer money", "weather", "book table", "reset pin"}
  model.add_examples([c[9]], ["weather"])  # the document grows with the examples
  grown = model.scores([c[9]])
  assert grown[0, 1] == pytest.approx(1.0, abs=1e-5)  # c[9]'s every token is in weather's document now
  model.save(tmp_path / "m")
  loaded = QAIDModel.load(tmp_path / "m")
  assert loaded.match == "intent_doc"
  np.testing.assert_allclose(loaded.scores(c), model.scores(c), rtol=1e-5, atol=1e-6)


def test_intent_names_and_description_files(tmp_path):
  assert intent_name("card_arrival") == "card arrival" and intent_name("alarm_query") == "alarm query"
  path = tmp_path / "names.tsv"
  path.write_text("card_arrival\twhen will my card arrive\n\nlost\n")
  with pytest.raises(ValueError, match="names.tsv, line 3: expected 'label<TAB>description'"):
    read_intent_descriptions(path)
  path.write_text("card_arrival\twhen will my card arrive\n")
  assert read_intent_descriptions(path) == {"card_arrival": "when will my card arrive"}
