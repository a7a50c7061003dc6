"""The slot filler export (``models.slot_filler``) answers from another support set."""

import json

import numpy as np
import pytest

from fewshot_nlu.encoders import pretrained
from fewshot_nlu.models import protocol
from fewshot_nlu.models.span_retrieval import SlotRetriever, SpanEncoder


def test_an_exported_slot_filler_answers_from_another_support_set(tiny_bert_dir, tmp_path):
  from fewshot_nlu.models.slot_filler import SlotFillerModel
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  support = [{"tokens": "set an alarm for seven am".split(), "tags": "O O O O B-time I-time".split()}]
  export = SlotFillerModel(SlotRetriever(encoder, max_words=3), support, threshold=0.9).save(tmp_path / "export")
  other = tmp_path / "other.jsonl"
  other.write_text(json.dumps({"tokens": "play some jazz".split(), "tags": "O O B-genre".split()}) + "\n")
  loaded = SlotFillerModel.load(export, support=other)
  assert loaded.labels == ["genre"] and loaded.retriever.similarity == "cosine"
  [prediction] = loaded.predict(["play some jazz"])
  assert [(s.text, s.label) for s in prediction.slots if s.label == "genre"] == [("jazz", "genre")]
  assert SlotFillerModel.load(export).labels == ["time"]  # the export itself is untouched
  with pytest.raises(ValueError, match="the support set is empty"):
    loaded.replace_support([])
  with pytest.raises(ValueError, match="support example 1: its offsets do not give its tokens in its text"):
    loaded.add_support([{"tokens": ["jazz", "!"], "tags": ["B-genre", "O"], "text": "jazz!",
                         "offsets": [[0, 4], [5, 6]]}])


def test_slot_labels_follow_the_intent_of_the_support_utterances(tiny_bert_dir, tmp_path):
  """``labels_for``: the labels of an intent's support utterances and of those without an intent; None (all) for
  no intent or an unknown one; ``predict(intents=...)`` retrieves only those, and the intents survive save/load."""
  from fewshot_nlu.models.slot_filler import SlotFillerModel
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  support = [{"tokens": "set an alarm for seven am".split(), "tags": "O O O O B-time I-time".split(),
              "intent": "alarm"},
             {"tokens": "play some jazz".split(), "tags": "O O B-genre".split(), "intent": "music"},
             {"tokens": "hello there".split(), "tags": "O O".split(), "intent": "greet"},
             {"tokens": "in paris".split(), "tags": "O B-city".split()}]
  filler = SlotFillerModel(SlotRetriever(encoder, max_words=3), support, threshold=0.0)
  assert filler.labels_for("alarm") == {"time", "city"} and filler.labels_for("greet") == {"city"}
  assert filler.labels_for(None) is None and filler.labels_for("unknown") is None
  texts = ["play some jazz at seven am", "", "play some jazz at seven am"]
  joint = filler.predict(texts, intents=["music", None, None])
  assert {s.label for s in joint[0].slots} <= {"genre", "city"} and joint[1] is protocol.EMPTY
  assert {s.label for s in joint[2].slots} == {s.label for s in filler.predict([texts[2]])[0].slots}
  with pytest.raises(ValueError, match="3 texts but 1 intents"):
    filler.predict(texts, intents=["music"])
  filler.add_support([{"tokens": "wake me at six".split(), "tags": "O O O B-time".split(), "intent": "greet"}])
  assert filler.labels_for("greet") == {"city", "time"}  # the support grew: labels recomputed
  loaded = SlotFillerModel.load(filler.save(tmp_path / "export"))
  assert [u.get("intent") for u in loaded.support] == ["alarm", "music", "greet", None, "greet"]
  assert loaded.labels_for("music") == {"genre", "city"}


def test_predicting_keeps_no_query_states_so_a_served_model_does_not_grow(tiny_bert_dir):
  """The span encoder caches its support utterances' states; a query's are computed and dropped (a server sees
  each text once), with the same slots as when they were kept."""
  from fewshot_nlu.models.slot_filler import SlotFillerModel
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  support = [{"tokens": "set an alarm for seven am".split(), "tags": "O O O O B-time I-time".split()}]
  filler = SlotFillerModel(SlotRetriever(encoder, max_words=3), support, threshold=0.0)
  kept = len(encoder._states)
  texts = [f"wake me at {n} am please" for n in range(12)]
  first = filler.predict(texts)
  filler.scores(texts)
  assert len(encoder._states) == kept == 1
  cached = filler.retriever.candidates([t.split() for t in texts])  # the retriever's own default keeps them
  assert len(encoder._states) == kept + len(texts)
  assert [[(s.start, s.end, s.label, s.score) for s in p.slots] for p in first] == [
      [(s.start, s.end, s.label, s.score) for s in p.slots] for p in filler.predict(texts)]
  assert len(cached) == len(texts)


def test_a_requested_slot_turns_a_bare_answer_into_its_value_and_the_bonus_survives_save_and_load(tiny_bert_dir,
                                                                                                   tmp_path):
  """``predict(requested_slots=...)``: with the largest bonus a bare answer takes the requested label; without
  a requested slot (or with bonus 0) the answer is as before. The bonus and each support row's ``requested``
  slots are exported and read back."""
  from fewshot_nlu.models.slot_filler import SlotFillerModel
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  support = [{"tokens": "a table for 13 please".split(), "tags": "O O O B-people O".split()},
             {"tokens": "at 7 pm".split(), "tags": "O B-time I-time".split(), "requested": ["time"]}]
  filler = SlotFillerModel(SlotRetriever(encoder, max_words=2), support, threshold=0.0, requested_bonus=1.0)
  plain, asked, none_asked = filler.predict(["13", "13", "13"], requested_slots=[None, "time", []])
  assert [(s.text, s.label) for s in asked.slots] == [("13", "time")]
  assert [(s.text, s.label) for s in plain.slots] == [("13", "people")]  # the same words in the support
  assert none_asked == plain == filler.predict(["13"])[0]
  loaded = SlotFillerModel.load(filler.save(tmp_path / "export"))
  assert loaded.requested_bonus == 1.0 and loaded.support[1]["requested"] == ["time"]
  assert loaded.predict(["13"], requested_slots=[["time"]])[0] == asked
  unmoved = SlotFillerModel(SlotRetriever(encoder, max_words=2), support, threshold=0.0)
  assert unmoved.predict(["13"], requested_slots=["time"])[0] == plain
  # a name the support never labels (or an empty one) asks for nothing; several names, one of them known, do
  assert filler.predict(["13", "13"], requested_slots=["colour", ""]) == [plain, plain]
  assert filler.predict(["13"], requested_slots=[("colour", "time")])[0] == asked
  with pytest.raises(ValueError, match="2 texts but 1 requested slot lists"):
    filler.predict(["13", "7"], requested_slots=["time"])
  with pytest.raises(ValueError, match="requested_bonus 1.5"):
    SlotFillerModel(SlotRetriever(encoder, max_words=2), support, threshold=0.0, requested_bonus=1.5)


def _rows(*items):
  """Support rows from (intent, "word/TAG ..." with O for untagged words)."""
  out = []
  for intent, text in items:
    pairs = [w.split("/") if "/" in w else (w, "O") for w in text.split()]
    out.append({"tokens": [w for w, _ in pairs], "tags": [t for _, t in pairs], "intent": intent})
  return out


def test_an_intent_expects_the_slots_that_its_share_of_examples_hold():
  """``expected_by_intent``: per intent with at least ``EXPECTED_MIN_UTTERANCES`` examples, the labels held by the
  share asked for; ``longest_spans``: each label's longest support span in words."""
  from fewshot_nlu.models.slot_filler import EXPECTED_MIN_UTTERANCES, expected_by_intent, longest_spans
  assert EXPECTED_MIN_UTTERANCES == 3
  support = _rows(("add", "add x/B-song to jazz/B-playlist"),
                  ("add", "add y/B-song to cool/B-playlist jams/I-playlist"), ("add", "put it in rock/B-playlist"), ("add", "add z/B-song to pop/B-playlist"),
                  ("greet", "hi bob/B-name"), ("greet", "hello ann/B-name"), (None, "in paris/B-city"))
  assert expected_by_intent(support, 1.0) == {"add": {"playlist"}}  # greet: two examples, too few
  assert expected_by_intent(support, 0.75) == {"add": {"playlist", "song"}}
  assert expected_by_intent(support, 0.8) == {"add": {"playlist"}}
  assert longest_spans(support) == {"song": 1, "playlist": 2, "name": 1, "city": 1}


class _Scored:
  def __init__(self, spans):
    self.spans = spans


class _LabelCosines:
  """A retriever whose per-label cosines are given: ``{label: [cosine per span]}``."""

  max_words = 7

  def __init__(self, cosines):
    self.cosines = cosines

  def label_cosines(self, scored, label):
    if label not in self.cosines:
      return None
    return np.array(self.cosines[label], float), [{"label": label, "span": i} for i in range(len(scored.spans))]


def test_an_expected_slot_decoding_left_out_is_its_best_free_span():
  """``fill_expected``: a missing expected label takes its best-scoring span that overlaps no decoded span and is no
  longer than its longest support span; a label decoded already, or without support spans, adds nothing; the
  label whose best span scores higher goes first, and the other then keeps clear of it."""
  from fewshot_nlu.models.slot_filler import fill_expected
  from fewshot_nlu.models.span_decoding import Candidate, enumerate_spans
  spans = enumerate_spans(5, 3)  # words 0-4: "add" "x" "to" "jazz" "jams"
  score = {s: 0.0 for s in spans}
  playlist = {**score, (3, 4): 0.6, (3, 5): 0.7, (1, 2): 0.9, (2, 5): 0.95}
  song = {**score, (1, 2): 0.8, (3, 4): 0.85}
  retriever = _LabelCosines({"playlist": [playlist[s] for s in spans], "song": [song[s] for s in spans]})
  scored = _Scored(spans)
  decoded = [Candidate(1, 2, "song", 0.9)]
  filled, added = fill_expected(decoded, scored, retriever, frozenset({"playlist", "song", "city"}),
                                {"playlist": 2, "song": 1})
  assert filled == [Candidate(1, 2, "song", 0.9), Candidate(3, 5, "playlist", 0.7)]  # (2, 5) is 3 words: too long
  assert list(added) == [(3, 5, "playlist")] and added[(3, 5, "playlist")][1]["span"] == spans.index((3, 5))
  assert fill_expected(filled, scored, retriever, frozenset({"playlist"}), {"playlist": 2}) == (filled, {})
  # nothing decoded: song's best (3, 4) at 0.85 loses to playlist's (1, 2) at 0.9, which goes first; song then
  # takes its best free span, (3, 4)
  both, _ = fill_expected([], scored, retriever, frozenset({"playlist", "song"}), {"playlist": 2, "song": 1})
  assert both == [Candidate(1, 2, "playlist", 0.9), Candidate(3, 4, "song", 0.85)]
  assert fill_expected([], None, retriever, frozenset({"song"}), {}) == ([], {})


def test_expected_slots_fill_a_joint_prediction_and_survive_save_and_load(tiny_bert_dir, tmp_path, monkeypatch):
  """With ``expected_share``, ``predict(intents=...)`` adds each expected label decoding left out (with the support
  span it retrieved as evidence); without an intent, or without the share, nothing is added; the share is exported
  and read back; a share outside (0, 1] is refused. Decoding keeps only song spans here (a tiny random encoder's
  cosines say little), so what playlist gets is the fill's."""
  from fewshot_nlu.models import slot_filler
  from fewshot_nlu.models.slot_filler import SlotFillerModel
  decode = slot_filler.decode
  monkeypatch.setattr(slot_filler, "decode", lambda candidates, **kw: decode(
      [c for c in candidates if c.label == "song"], **kw))
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  support = _rows(("add", "add x/B-song to jazz/B-playlist"), ("add", "add y/B-song to cool/B-playlist"),
                  ("add", "add z/B-song to rock/B-playlist"))
  filler = SlotFillerModel(SlotRetriever(encoder, max_words=2), support, threshold=1.0, expected_share=1.0)
  plain = SlotFillerModel(SlotRetriever(encoder, max_words=2), support, threshold=1.0)
  assert filler.expected_for("add") == {"song", "playlist"} and filler.expected_for(None) is None
  assert plain.expected_for("add") is None
  text = "please add the tune w to the list called blues"
  [joint], [alone] = filler.predict([text], intents=["add"]), plain.predict([text], intents=["add"])
  added = set(joint.slots) - set(alone.slots)
  assert {s.label for s in alone.slots} == {"song"} and set(alone.slots) < set(joint.slots)
  assert [(s.label, s.end - s.start, s.evidence.label) for s in added] == [("playlist", 1, "playlist")]
  assert filler.predict([text])[0] == alone  # no intent: nothing expected
  loaded = SlotFillerModel.load(filler.save(tmp_path / "export"))
  assert loaded.expected_share == 1.0 and loaded.predict([text], intents=["add"])[0] == joint
  with pytest.raises(ValueError, match=r"expected_share 0 must be in \(0, 1\]"):
    SlotFillerModel(SlotRetriever(encoder, max_words=2), support, threshold=0.0, expected_share=0)
