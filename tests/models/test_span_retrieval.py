"""Span vectors and retrieval (``models.span_retrieval``): each distinct utterance encoded once, first / last
word-piece vectors, the slot retriever's own support span, and unlabelled support spans that reject query spans."""

import numpy as np
import pytest

from fewshot_nlu.encoders import pretrained
from fewshot_nlu.models.span_decoding import enumerate_spans
from fewshot_nlu.models.span_retrieval import SlotRetriever, SpanEncoder, labelled_spans
from tests import tiny


def test_span_encoder_encodes_each_distinct_utterance_once(tiny_bert_dir, monkeypatch):
  from fewshot_nlu.models import span_retrieval as spans_module
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  calls = []
  real = spans_module.inference.encode_bucketed
  monkeypatch.setattr(spans_module.inference, "encode_bucketed",
                      lambda ids, *a, **k: calls.append(len(ids)) or real(ids, *a, **k))
  words = ["play jazz please".split(), "set an alarm".split()]
  first = encoder.encode(words + words, [[(0, 1), (1, 2)], [(2, 3)], [(0, 3)], [(1, 3)]])
  second = encoder.encode([words[1]], [[(2, 3)]])
  assert calls == [2]  # two distinct utterances, encoded once; the second call is all cache
  np.testing.assert_array_equal(second[0], first[1])


def test_span_vectors_use_first_and_last_word_piece(tiny_roberta_dir):
  model = pretrained.load_pretrained(str(tiny_roberta_dir))
  words = "i want to transfer money to my savings account".split()
  (ids, pieces), = model.tokenizer.encode_words([words], 32)
  multi = [i for i, (first, last) in enumerate(pieces) if last > first]
  assert multi, "the tiny BPE vocabulary should split some word into several pieces"
  spans = [(3, 5), (multi[0], multi[0] + 1), (0, 1), (7, 9)]
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  vectors, = encoder.encode([words], [spans])
  tensors = tiny.hf_tensors("roberta", model.config.vocab_size)
  config = tiny.hf_config("roberta", model.config.vocab_size)
  hidden = tiny.reference_forward(tensors, config, np.array([ids]), np.ones((1, len(ids))))[0]
  for (start, end), v in zip(spans, vectors):
    first, last = pieces[start][0], pieces[end - 1][1]
    np.testing.assert_allclose(v, np.concatenate([hidden[first], hidden[last]]), atol=2e-4)
  # the pieces of a multi-piece word decode back to the word
  first, last = pieces[multi[0]]
  assert model.tokenizer.backend.decode(ids[first : last + 1]).strip() == words[multi[0]]


def test_slot_retriever_retrieves_its_own_support_span(tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  support = [{"tokens": "book a table at an italian restaurant".split(),
              "tags": "O O O O O B-cuisine O".split()},
             {"tokens": "set an alarm for seven am".split(), "tags": "O O O O B-time I-time".split()}]
  for inference, similarity in (("nearest", "cosine"), ("prototype", "cosine"), ("nearest", "dot")):
    retriever = SlotRetriever(encoder, max_words=3, inference=inference, similarity=similarity)
    assert retriever.set_support(support) == 2
    rows = retriever.candidates([support[1]["tokens"]])
    exact = {(c.start, c.end): (c, p) for c, p in rows[0]}
    c, payload = exact[(4, 6)]
    assert c.label == "time" and c.score == pytest.approx(1.0, abs=1e-5)  # the span itself: cosine 1
    assert all(0.0 <= c.score <= 1.0 for c, _ in rows[0])
    assert len(rows[0]) == len(enumerate_spans(6, 3))
    if inference == "nearest":
      assert payload["text"] == "seven am"
    if similarity == "cosine":  # the hit is the support span of highest cosine, and its score that cosine
      query = encoder.encode([support[1]["tokens"]], [[(c.start, c.end) for c, _ in rows[0]]])[0]
      index = retriever.index.vectors
      cosines = (query / np.maximum(np.linalg.norm(query, axis=1, keepdims=True), 1e-12)) @ (
          index / np.linalg.norm(index, axis=1, keepdims=True)).T
      np.testing.assert_allclose([c.score for c, _ in rows[0]], np.clip(cosines.max(1), 0, 1), atol=1e-5)


def test_unlabelled_support_spans_reject_the_query_spans_nearest_them(tiny_bert_dir):
  """With a none margin, a query span is a candidate only when its nearest labelled span is closer (cosine) than
  its nearest unlabelled one by more than the margin (numpy reference on the same vectors)."""
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  support = [{"tokens": "book a table at an italian restaurant".split(), "tags": "O O O O O B-cuisine O".split()},
             {"tokens": "set an alarm for seven am".split(), "tags": "O O O O B-time I-time".split()}]
  query = "book an alarm at seven".split()
  plain = SlotRetriever(encoder, max_words=3)
  plain.set_support(support)
  everything = plain.candidates([query])[0]
  assert len(everything) == len(enumerate_spans(len(query), 3))

  def unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)

  others = [[span for span in enumerate_spans(len(u["tokens"]), 3) if span not in {(s, e) for s, e, _ in
                                                                                   labelled_spans(u["tags"])}]
            for u in support]
  unlabelled = unit(np.concatenate(encoder.encode([u["tokens"] for u in support], others)))
  query_vectors = unit(encoder.encode([query], [[(c.start, c.end) for c, _ in everything]])[0])
  nearest_none = (query_vectors @ unlabelled.T).max(1)
  for margin in (0.0, 0.05):
    retriever = SlotRetriever(encoder, max_words=3, none_margin=margin)
    retriever.set_support(support)
    assert len(retriever.none_index) == len(unlabelled)
    kept = retriever.candidates([query])[0]
    expected = [c for (c, _), none in zip(everything, nearest_none) if c.score > none + margin + 1e-6]
    assert [(c.start, c.end, c.label) for c, _ in kept] == [(c.start, c.end, c.label) for c in expected]
    assert len(kept) < len(everything)  # "book", "at", ... are the support's own unlabelled words
  # a support utterance's own unlabelled span is nearest itself (cosine 1): never a candidate
  retriever = SlotRetriever(encoder, max_words=3, none_margin=0.0)
  retriever.set_support(support)
  spans = {(c.start, c.end) for c, _ in retriever.candidates([support[1]["tokens"]])[0]}
  assert (0, 1) not in spans and (4, 6) in spans
  # a floor keeps exactly the candidates scoring at least it (the unlabelled spans searched for those alone)
  for floor in (0.3, 0.6, 0.9):
    floored = retriever.candidates([query], floor=floor)[0]
    assert floored == [(c, p) for c, p in retriever.candidates([query])[0] if c.score >= floor - 1e-9]


def test_restricted_labels_retrieve_the_nearest_span_of_those_labels(tiny_bert_dir):
  """``candidates(labels=...)``: each query span's hit is its nearest support span among the allowed labels
  (numpy reference on the same vectors); None allows all; labels no span has give no candidate."""
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  support = [{"tokens": "book a table at an italian restaurant".split(), "tags": "O O O O O B-cuisine O".split()},
             {"tokens": "set an alarm for seven am".split(), "tags": "O O O O B-time I-time".split()},
             {"tokens": "play jazz tonight".split(), "tags": "O B-genre B-time".split()}]
  retriever = SlotRetriever(encoder, max_words=3)
  retriever.set_support(support)
  query = "book jazz at seven".split()
  everything, only_time, unknown = retriever.candidates([query] * 3, labels=[None, frozenset({"time"}),
                                                                             frozenset({"nothing"})])
  assert everything == retriever.candidates([query])[0] and unknown == []
  vectors, payloads = retriever.index.vectors, retriever.index.payloads
  keep = [i for i, p in enumerate(payloads) if p["label"] == "time"]
  query_vectors = encoder.encode([query], [[(c.start, c.end) for c, _ in everything]])[0]
  cosines = (query_vectors / np.linalg.norm(query_vectors, axis=1, keepdims=True)) @ vectors[keep].T
  assert {c.label for c, _ in only_time} == {"time"}
  np.testing.assert_allclose([c.score for c, _ in only_time], np.clip(cosines.max(1), 0, 1), atol=1e-5)
  assert [p["text"] for _, p in only_time] == [payloads[keep[j]]["text"] for j in cosines.argmax(1)]
  assert any(c.label != "time" for c, _ in everything)  # the restriction changed some hits
  with pytest.raises(ValueError, match="2 label sets"):
    retriever.candidates([query], labels=[None, None])
  retriever.set_support(support[:2])  # a new support set drops the sub-indexes built for the old one
  assert [p["text"] for _, p in retriever.candidates([query], labels=[frozenset({"time"})])[0]][:1] == ["seven am"]


def test_span_vectors_through_a_metric_are_the_plain_vectors_times_it(tiny_bert_dir):
  """With a learnt span metric W, a span's vector is [first, last] @ W (computed per piece, then gathered; for
  uncached queries in the encoder's program); a span cut by truncation stays zero."""
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  plain = SpanEncoder(model.config, model.params, model.tokenizer, max_length=8, batch_size=4)
  width = 2 * model.config.hidden_size
  metric = np.random.default_rng(0).normal(size=(width, width)).astype(np.float32)
  words = ["book a table at an italian restaurant tonight".split(), "hi".split()]
  spans = [enumerate_spans(len(w), 3) for w in words]
  expected = [v @ metric for v in plain.encode(words, spans)]
  learnt = plain.with_metric(metric)
  got = learnt.encode(words, spans)
  for e, g, query in zip(expected, got, learnt.encode(words, spans, cache=False)):
    np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(query, e, rtol=1e-4, atol=1e-4)
  cut = [i for i, (a, b) in enumerate(spans[0]) if not plain.encode([words[0]], [[(a, b)]])[0].any()]
  assert cut and not got[0][cut].any()  # max_length 8 cuts the long utterance's last words


def test_requested_scores_take_a_requested_labels_span_where_its_bonus_lifts_it_above_the_nearest():
  """``requested_scores``: per span, max(nearest overall, 1 - (1 - bonus)(1 - nearest of a requested label)),
  with that hit's payload (numpy reference)."""
  from fewshot_nlu.models.span_retrieval import requested_scores
  cosines = np.array([0.9, 0.6, 0.5, 0.2])
  payloads = [{"label": "people"}] * 4
  asked = np.array([0.75, 0.58, 0.5, 0.95])
  asked_payloads = [{"label": "time"}] * 4
  scores, hits = requested_scores(cosines, payloads, asked, asked_payloads, 0.1)
  expected = np.maximum(cosines, 1 - 0.9 * (1 - asked))  # raised: 0.775, 0.622, 0.55, 0.955
  np.testing.assert_allclose(scores, expected)
  assert [h["label"] for h in hits] == ["people", "time", "time", "time"]
  same, kept = requested_scores(cosines, payloads, asked, asked_payloads, 0.0)
  np.testing.assert_allclose(same, np.maximum(cosines, asked))  # a tie keeps the nearest overall
  assert [h["label"] for h in kept] == ["people", "people", "people", "time"]


def test_candidates_with_a_requested_slot_score_its_nearest_span_plus_the_bonus(tiny_bert_dir):
  """``candidates(requested=..., requested_bonus=b)``: a query span's hit is its nearest span of a requested label
  when that cosine raised by b beats its nearest overall; b = 0 or no requested slot: the plain candidates; a requested
  label outside the allowed ones is ignored."""
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  support = [{"tokens": "a table for 13 please".split(), "tags": "O O O B-people O".split()},
             {"tokens": "at 7 pm".split(), "tags": "O B-time I-time".split()}]
  retriever = SlotRetriever(encoder, max_words=2)
  retriever.set_support(support)
  query = ["13"]
  plain = retriever.candidates([query])[0]
  assert retriever.candidates([query], requested=[frozenset({"time"})], requested_bonus=0.0)[0] == plain
  assert retriever.candidates([query], requested=[None], requested_bonus=0.5)[0] == plain
  [(hit, payload)] = retriever.candidates([query], requested=[frozenset({"time"})], requested_bonus=1.0)[0]
  assert hit.label == "time" and hit.score == 1.0 and payload["label"] == "time"
  outside = retriever.candidates([query], labels=[frozenset({"people"})], requested=[frozenset({"time"})],
                                 requested_bonus=1.0)[0]
  assert outside == retriever.candidates([query], labels=[frozenset({"people"})])[0]
  time_only = retriever.candidates([query], labels=[frozenset({"time"})])[0][0][0]
  people = plain[0][0]
  for bonus in (0.05, 0.3, 0.6):
    raised = 1 - (1 - bonus) * (1 - time_only.score)
    [(mid, _)] = retriever.candidates([query], requested=[frozenset({"time"})], requested_bonus=bonus)[0]
    assert mid.label == ("time" if raised > people.score else people.label)
    assert mid.score == pytest.approx(max(raised, people.score))
  with pytest.raises(ValueError, match="2 requested label sets"):
    retriever.candidates([query], requested=[None, None])


def test_one_scoring_answers_every_bonus_margin_and_floor_as_candidates_does(tiny_bert_dir):
  """``score`` once, then ``answer`` per requested-slot bonus, none margin and floor (the cross-validation's
  grid, ``methods.nlu.train.select``) gives what ``candidates`` gives with each setting, in any order; the
  unlabelled spans are searched once per span."""
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  support = [{"tokens": "a table for 13 please".split(), "tags": "O O O B-people O".split()},
             {"tokens": "at 7 pm on friday".split(), "tags": "O B-time I-time O B-date".split()}]
  queries = [["13"], "book for 4 at 8 pm".split(), "friday please".split()]
  requested = [frozenset({"time"}), None, frozenset({"date", "people"})]
  labels = [None, frozenset({"people", "time"}), None]
  retriever = SlotRetriever(encoder, max_words=3, none_margin=0.1)
  retriever.set_support(support)
  searched = []
  search = retriever.none_index.search
  retriever.none_index.search = lambda q, k: searched.append(len(q)) or search(q, k)
  scored = retriever.score(queries, labels=labels, requested=requested)
  settings = [(None, 0.0, 0.0), (0.1, 0.4, 0.0), (0.0, 0.2, 0.3), (None, 0.4, 0.5), (0.1, 0.0, 0.0)]
  answered = {}
  for margin, bonus, floor in settings:
    retriever.none_margin = margin
    answered[margin, bonus, floor] = [retriever.answer(x, floor=floor, requested_bonus=bonus) for x in scored]
  assert sum(searched) <= sum(len(x.spans) for x in scored)  # each span's unlabelled neighbour searched once
  for margin, bonus, floor in reversed(settings):
    retriever.none_margin = margin
    assert answered[margin, bonus, floor] == retriever.candidates(queries, floor=floor, labels=labels,
                                                                  requested=requested, requested_bonus=bonus)
  assert any(answered[None, 0.4, 0.5]) and answered[None, 0.0, 0.0] != answered[0.1, 0.4, 0.0]
