"""Retriever (Yu et al., 2021): batch-softmax reductions, span vectors, §5.2 decoding, the span scorer, and the
SNIPS slot-filling protocol end to end on toy episodes with a tiny model."""

from __future__ import annotations

import json
import pathlib

import jax.numpy as jnp
import numpy as np
import pytest

from fewshot_nlu.encoders import pretrained, transformer
from fewshot_nlu.evaluation.span_f1 import SpanCounts
from fewshot_nlu.methods import span_training as retriever_training
from fewshot_nlu.models.span_decoding import (
  Candidate,
  beam_search,
  decode,
  enumerate_spans,
  filter_candidates,
  merge_consecutive,
  to_bio,
)
from fewshot_nlu.losses.batch_softmax import batch_softmax_loss, reduce_label_scores
from fewshot_nlu.models.span_retrieval import SlotRetriever, SpanEncoder, labelled_spans
from tests import report_checks, tiny

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


# ------------------------------------------------------------------------------------------- reductions

def numpy_reduce(scores, labels, reduction):
  """Eq. (3)-(5) by loops: [M, N] per query and label column."""
  m, n = scores.shape[0], labels.max() + 1
  out = np.zeros((m, n))
  for q in range(m):
    for label in range(n):
      members = [c for c in range(m) if labels[c] == label]
      if reduction == "mean":
        out[q, label] = np.mean([scores[q, c] for c in members])
      elif reduction == "max":
        out[q, label] = max(scores[q, c] for c in members if c != q)
      else:
        pick = min if label == labels[q] else max
        out[q, label] = pick(scores[q, c] for c in members)
  return out


def hand_built():
  """3 labels x B = 2 spans, 2-d vectors; every span's own score (||z||^2) is the largest in its row, so a
  max that did not exclude the query itself would differ."""
  z = np.array([[3.0, 0.1], [2.0, 0.5], [0.2, 3.0], [-0.4, 2.2], [-2.5, -1.0], [-1.0, -2.0]], np.float32)
  return z, np.array([0, 0, 1, 1, 2, 2], np.int32)


@pytest.mark.parametrize("reduction", ["mean", "max", "min-max"])
def test_reductions_match_numpy(reduction):
  z, labels = hand_built()
  scores = z @ z.T
  reduced, present = reduce_label_scores(jnp.asarray(scores), jnp.asarray(labels), jnp.ones(6, bool), 3, reduction)
  np.testing.assert_allclose(np.asarray(reduced), numpy_reduce(scores, labels, reduction), rtol=1e-6, atol=1e-6)
  assert np.asarray(present).all()


def test_max_excludes_the_query_itself():
  z, labels = hand_built()
  scores = z @ z.T
  reduced, _ = reduce_label_scores(jnp.asarray(scores), jnp.asarray(labels), jnp.ones(6, bool), 3, "max")
  assert float(reduced[0, 0]) == pytest.approx(scores[0, 1])  # the other span of label 0, not ||z_0||^2 = 9.01
  assert scores[0, 0] > scores[0, 1]
  # mean (Eq. 3) keeps the query in its own label's mean; min-max's min over the own label includes it too
  mean, _ = reduce_label_scores(jnp.asarray(scores), jnp.asarray(labels), jnp.ones(6, bool), 3, "mean")
  assert float(mean[0, 0]) == pytest.approx((scores[0, 0] + scores[0, 1]) / 2, rel=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "max", "min-max"])
def test_loss_is_softmax_cross_entropy_of_reduced_scores(reduction):
  z, labels = hand_built()
  reference = numpy_reduce(z @ z.T, labels, reduction)
  log_prob = reference - np.log(np.exp(reference).sum(1, keepdims=True))
  expected = -np.mean(log_prob[np.arange(6), labels])
  loss, accuracy = batch_softmax_loss(jnp.asarray(z), jnp.asarray(labels), jnp.ones(6, bool), 3, reduction)
  assert float(loss) == pytest.approx(expected, rel=1e-5)
  assert float(accuracy) == pytest.approx(np.mean(reference.argmax(1) == labels))


def test_none_column_of_non_slot_spans_matches_numpy():
  """The "none" column: max over the non-slot spans' dot products, one more softmax class (losses docstring)."""
  z, labels = hand_built()
  negatives = np.array([[1.0, 1.0], [2.9, 0.0], [0.0, 0.0]], np.float32)
  valid = np.array([True, True, False])  # the third is padding and must not count
  reference = numpy_reduce(z @ z.T, labels, "max")
  none = (z @ negatives[:2].T).max(1, keepdims=True)
  logits = np.concatenate([reference, none], 1)
  log_prob = logits - np.log(np.exp(logits).sum(1, keepdims=True))
  loss, accuracy = batch_softmax_loss(jnp.asarray(z), jnp.asarray(labels), jnp.ones(6, bool), 3, "max",
                                      jnp.asarray(negatives), jnp.asarray(valid))
  assert float(loss) == pytest.approx(-np.mean(log_prob[np.arange(6), labels]), rel=1e-5)
  assert float(accuracy) == pytest.approx(np.mean(logits.argmax(1) == labels))
  assert (logits.argmax(1) == 3).any()  # span 0 is nearer the negative [2.9, 0] than its own label: a miss


def test_padding_rows_and_a_lone_span_are_left_out():
  z, labels = hand_built()
  valid = np.array([1, 1, 1, 1, 1, 0], bool)  # label 2 keeps one span: under max it has no gold column
  loss, _ = batch_softmax_loss(jnp.asarray(z), jnp.asarray(labels), jnp.asarray(valid), 3, "max")
  scores = z[:5] @ z[:5].T
  expected = []
  for q in range(4):  # queries of labels 0 and 1; span 4 (label 2, alone) is a candidate only
    cols = [max(scores[q, c] for c in range(5) if labels[c] == l and c != q) for l in range(3)]
    expected.append(-(cols[labels[q]] - np.log(np.sum(np.exp(cols)))))
  assert float(loss) == pytest.approx(np.mean(expected), rel=1e-5)


def _toy_slot_utterances():
  words = [s.split() for s in tiny.CORPUS[:8]]
  return [{"tokens": w, "tags": ["B-a"] + ["O"] * (len(w) - 2) + ["B-b"] if len(w) > 1 else ["B-a"]}
          for w in words]


@pytest.mark.parametrize("reduction,negatives,cosine_scale", [
    ("max", 0, 0.0), pytest.param("mean", 0, 0.0, marks=pytest.mark.slow), ("max", 3, 20.0)])
def test_sharded_batch_softmax_equals_single_device(tiny_bert_dir, reduction, negatives, cosine_scale):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  config = _config(reduction)
  config.retriever.cosine_scale = cosine_scale
  items = retriever_training.slot_items(model.tokenizer, _toy_slot_utterances(), 32, negatives=negatives)
  loss_fn = retriever_training.make_loss_fn(model.config, config, len(items.label_names), span=True)

  def make_batch(mesh):
    stream = retriever_training.item_stream(items, config, 8, model.tokenizer.pad_id)
    return next(stream)

  tiny.assert_sharded_loss_equals_single_device({"encoder": model.params},
                                                {"encoder": transformer.logical_axes(model.config)},
                                                loss_fn, make_batch, atol=1e-4)  # grads ~6: float32 rounding


def _config(reduction="max"):
  from configs import retriever_snips
  config = retriever_snips.get_config()
  config.retriever.reduction = reduction
  config.retriever.per_label_batch = 4
  return config


def test_negative_spans_are_spans_of_the_same_utterance_that_are_no_slot(tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  utterances = _toy_slot_utterances()
  items = retriever_training.slot_items(model.tokenizer, utterances, 32, negatives=4, max_words=3, seed=1)
  encoded = model.tokenizer.encode_words([u["tokens"] for u in utterances], 32)
  assert items.negative_first.shape == (len(items), 4)
  for i in range(len(items)):
    u = next(k for k, (ids, _) in enumerate(encoded) if ids == items.token_ids[i])
    pieces = encoded[u][1]
    spans = {(pieces[s][0], pieces[e - 1][1]): (s, e) for s, e in enumerate_spans(len(pieces), 3)}
    gold = {(pieces[s][0], pieces[e - 1][1]) for s, e, _ in labelled_spans(utterances[u]["tags"])}
    drawn = [(int(a), int(b)) for a, b, ok in zip(items.negative_first[i], items.negative_last[i],
                                                  items.negative_valid[i]) if ok]
    assert len(drawn) == min(4, len(spans) - len(gold)) and len(set(drawn)) == len(drawn)
    assert all(d in spans and d not in gold for d in drawn)
  again = retriever_training.slot_items(model.tokenizer, utterances, 32, negatives=4, max_words=3, seed=1)
  np.testing.assert_array_equal(again.negative_first, items.negative_first)  # seeded


def test_lower_layers_is_the_layer_output_and_saves_as_a_smaller_model(tiny_bert_dir, tmp_path):
  from fewshot_nlu.encoders import frozen_prefix
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  cut = pretrained.lower_layers(model, 1)
  assert cut.config.num_layers == 1 and set(cut.params) == {"embeddings", "layer_0"}
  assert pretrained.lower_layers(model, 0) is model
  with pytest.raises(ValueError, match="cannot keep"):
    pretrained.lower_layers(model, model.config.num_layers + 1)
  ids = np.array(model.tokenizer.encode(["book a table for two"], 16))
  mask = np.ones_like(ids)
  expected = frozen_prefix.prefix_states(model.config, frozen_prefix.split(model.params, model.config, 1)[0], ids,
                                         mask)
  got = transformer.encoder_for(cut.config, cut.params).apply({"params": cut.params}, ids, mask)
  np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-5)
  pretrained.save_pretrained(tmp_path / "cut", cut.config, cut.params, cut.tokenizer)
  assert pretrained.load_pretrained(str(tmp_path / "cut")).config.num_layers == 1


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


# ------------------------------------------------------------------------------------- span vectors

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


def test_span_enumeration():
  assert enumerate_spans(3, 7) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
  assert len(enumerate_spans(10, 7)) == sum(min(7, 10 - s) for s in range(10))
  assert all(e - s <= 2 for s, e in enumerate_spans(6, 2))


# ------------------------------------------------------------------------------------------ decoding

WORDS = "book a table at black horse tavern at 7 pm".split()


def figure_1_candidates():
  name = "restaurant_name"
  return [Candidate(4, 5, name, 0.95), Candidate(8, 10, "time", 0.94), Candidate(4, 7, name, 0.93),
          Candidate(6, 7, name, 0.85), Candidate(0, 2, "party_size", 0.30), Candidate(4, 6, name, 0.80)]


def test_beam_search_finds_black_horse_tavern_where_greedy_does_not():
  kept = filter_candidates(figure_1_candidates(), 0.84)
  assert [c.score for c in kept] == [0.95, 0.94, 0.93, 0.85]
  greedy = beam_search(kept, beam_size=1)
  assert [(c.start, c.end) for c in greedy] == [(4, 5), (6, 7), (8, 10)]  # "black", "tavern", "7 pm"
  beam = beam_search(kept, beam_size=10)
  assert [(c.start, c.end, c.label) for c in beam] == [(4, 7, "restaurant_name"), (8, 10, "time")]
  assert to_bio(beam, len(WORDS)) == ["O"] * 4 + ["B-restaurant_name", "I-restaurant_name", "I-restaurant_name",
                                                   "O", "B-time", "I-time"]


def test_merging_consecutive_same_label_spans():
  parts = [Candidate(4, 6, "restaurant_name", 0.91), Candidate(6, 7, "restaurant_name", 0.90),
           Candidate(8, 10, "time", 0.94)]
  merged = merge_consecutive(parts, 0.99)
  assert [(c.start, c.end, c.label) for c in merged] == [(4, 7, "restaurant_name"), (8, 10, "time")]
  assert merged[0].score == 0.91
  assert merge_consecutive(parts, 0.0) == parts  # lambda = 0: never merge
  assert merge_consecutive(parts, 0.005) == parts  # |0.91 - 0.90| = 0.01 >= lambda
  different = [Candidate(0, 1, "a", 0.9), Candidate(1, 2, "b", 0.9), Candidate(3, 4, "a", 0.9)]
  assert merge_consecutive(different, 1.0) == different  # other labels / a gap: never merged
  chain = [Candidate(0, 1, "a", 0.5), Candidate(1, 2, "a", 0.6), Candidate(2, 3, "a", 0.7)]
  assert merge_consecutive(chain, 1.0) == [Candidate(0, 3, "a", 0.7)]


def test_dynamic_threshold_and_full_decode():
  candidates = [Candidate(0, 1, "a", 0.62), Candidate(1, 2, "b", 0.40), Candidate(0, 2, "a", 0.55)]
  # 0.9 -> 0.85 -> ... -> 0.60 (6 lowerings) lets 0.62 through
  assert filter_candidates(candidates, 0.9) == [candidates[0]]
  assert filter_candidates(candidates, 0.9, retries=5) == []  # 0.65 is the lowest tried
  assert decode(candidates, threshold=0.9, threshold_retries=5) == []
  assert decode(figure_1_candidates(), threshold=0.85) == [Candidate(4, 7, "restaurant_name", 0.93),
                                                             Candidate(8, 10, "time", 0.94)]


# -------------------------------------------------------------------------------------------- scorer

def test_span_scorer_agrees_with_conlleval():
  fixture = json.loads((FIXTURES / "conlleval_spans.json").read_text())
  counts = SpanCounts()
  for gold, predicted in fixture["sentences"]:
    counts.add(gold, predicted)
  expected = fixture["conlleval"]
  assert (counts.correct, counts.gold, counts.predicted) == (expected["correct"], expected["found_gold"],
                                                             expected["found_guessed"])
  p, r = 100 * expected["correct"] / expected["found_guessed"], 100 * expected["correct"] / expected["found_gold"]
  assert counts.f1 == pytest.approx(2 * p * r / (p + r))
  assert SpanCounts().f1 == 0.0


# ------------------------------------------------------------------------------------------ retrieval

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


# ------------------------------------------------------------------------------------------ end to end

def _toy_episodes(domain: str, rng) -> list[dict]:
  templates = [("play {x} please", "O B-artist O"), ("set an alarm for {x}", "O O O O B-time"),
               ("book a table at {x}", "O O O O B-place")]
  values = ["jazz", "seven", "boston", "money", "music"]

  def utterance():
    text, tags = templates[rng.integers(len(templates))]
    return {"seq": text.format(x=values[rng.integers(len(values))]).split(), "tags": tags.split()}

  episodes = []
  for _ in range(2):
    sets = {}
    for part, size in (("support", 4), ("query", 3)):
      rows = [utterance() for _ in range(size)]
      sets[part] = {"seq_ins": [r["seq"] for r in rows], "seq_outs": [r["tags"] for r in rows],
                    "labels": ["intent"] * size}
    episodes.append(sets)
  return {domain: episodes}


def write_toy_snips(root: pathlib.Path) -> pathlib.Path:
  from fewshot_nlu.data.builders.slots import FOLDS, PARTS, episode_file
  rng = np.random.default_rng(0)
  for shots in (1, 5):
    for fold in FOLDS:
      for part in PARTS:
        path = root / episode_file(shots, part, fold)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_toy_episodes(f"Domain{fold}{part}", rng)))
  return root


def test_snips_protocol_end_to_end(tiny_bert_dir, tmp_path, capsys):
  from fewshot_nlu import main as main_lib
  raw = write_toy_snips(tmp_path / "raw")
  config = _config()
  config.model.name = str(tiny_bert_dir)
  config.model.max_length = 32
  config.data.raw_dir, config.data.tfds_dir = str(raw), str(tmp_path / "tfds")
  config.data.folds = (2,)
  config.retriever.encoder_layers = 0  # the tiny model has 2 layers (the default cuts MiniLM at 3)
  config.train.epochs, config.train.max_steps, config.eval.dev_every, config.train.save_every = 5, 3, 2, 2
  config.compilation_cache_dir = ""
  config.mesh.data = 2
  results = main_lib.run(config, tmp_path / "run")
  assert set(results["f1"]) == {"Domain2test"}
  fold = json.loads((tmp_path / "run" / "fold2" / "results.json").read_text())
  assert fold["training"]["best_step"] in (2, 3) and fold["training"]["steps"] == 3
  assert fold["training"]["global_batch"] == 4 * 3  # B = 4 spans x 3 slot labels, a multiple of 2 devices
  assert fold["threshold"] in config.retriever.thresholds
  assert (tmp_path / "run" / "fold2" / "best" / "best.json").exists()
  lines = (tmp_path / "run" / "fold2" / "predictions.tsv").read_text().splitlines()
  assert len(lines) == 1 + 2 * 3  # header + 2 episodes x 3 queries
  assert "Domain2test" in (tmp_path / "run" / "results.md").read_text()
  assert "| Average F1 |" in capsys.readouterr().out
  # a restart keeps the finished fold instead of redoing it
  again = main_lib.run(config, tmp_path / "run")
  assert again["f1"] == results["f1"]


# ------------------------------------------------------------------------------------- CLINC protocol

def test_intent_split_and_shots():
  from fewshot_nlu.methods.retriever.intents import sample_shots, split_intents
  categories = {f"c{k}": [f"c{k}_i{j}" for j in range(15)] for k in range(10)}
  source, target = split_intents(categories, 5, 15, seed=0)
  assert len(source) == 75 and len(target) == 75 and not set(source) & set(target)
  assert len({i.split("_")[0] for i in source}) == 5  # whole categories: (5, 15) = 5 new categories
  source, target = split_intents(categories, 10, 10, seed=1)
  assert len(source) == 100 and all(sum(i.startswith(f"c{k}_") for i in target) == 5 for k in range(10))
  assert split_intents(categories, 10, 10, seed=1) == (source, target)
  texts, labels = [f"t{i}" for i in range(30)], [f"c0_i{i % 3}" for i in range(30)]
  shot_texts, shot_labels = sample_shots(texts, labels, ["c0_i0", "c0_i2"], 4, seed=0)
  assert sorted(shot_labels) == ["c0_i0"] * 4 + ["c0_i2"] * 4
  assert all(labels[texts.index(t)] == l for t, l in zip(shot_texts, shot_labels))


def test_clinc_protocol_pretrain_then_finetune(tiny_bert_dir, tmp_path):
  from configs import retriever_clinc
  from fewshot_nlu import main as main_lib
  from tests.test_dse import _toy_data
  data = _toy_data(tmp_path / "data")
  categories = tmp_path / "domains.json"
  categories.write_text(json.dumps({"a": ["money", "weather"], "b": ["food", "music"]}))

  def run(stage, model_name, workdir):
    config = retriever_clinc.get_config(f"{stage},2,1,2")
    config.model.name = model_name
    config.data.dir, config.data.tfds_dir = str(data), str(tmp_path / "tfds")
    config.retriever.categories_file = str(categories)
    config.train.max_steps, config.compilation_cache_dir, config.eval.batch_size = 2, "", 8
    return main_lib.run(config, tmp_path / workdir)

  frozen = run("frz", str(tiny_bert_dir), "frz")
  assert frozen["source_intents"] == 2 and frozen["target_intents"] == 2
  assert frozen["accuracy"]["tgt"]["support_rows"] == 4 and frozen["accuracy"]["balance"]["support_rows"] == 8
  assert frozen["accuracy"]["all"]["support_rows"] == 3 + 3 + 4  # every source example + the target shots
  pre = run("pretrain", str(tiny_bert_dir), "src")
  assert pre["training"]["labels"] == 2 and pre["training"]["items"] == 6
  tuned = run("finetune_tgt_src", str(tmp_path / "src" / "export"), "ft")
  assert tuned["training"]["labels"] == 4 and tuned["training"]["items"] == 8
  lines = (tmp_path / "ft" / "predictions.tsv").read_text().splitlines()
  assert len(lines) == 1 + 12 + 12 + 6  # all + balance score every test row; tgt the target rows
  for result in (frozen, pre, tuned):
    assert all(0 <= v["tgt"] <= 100 for v in result["accuracy"].values())
  for workdir, panels in (("frz", 1), ("ft", 2)):  # a report per support set; the embeddings once
    for n, name in enumerate(("all", "balance", "tgt")):
      report = report_checks.assert_report_matches_predictions(
          tmp_path / workdir, suffix="" if n == 0 else f"_{name}", support_set=name, embeddings=n == 0)
      assert f"support set {name!r}" in report
    assert report_checks.png_size(tmp_path / workdir / "embeddings.png")[0] > 500 * panels


# ------------------------------------------------------------------------------ support sets from files

def test_read_support_from_a_seq_folder_and_jsonl(tmp_path):
  from fewshot_nlu.data.support import read_support
  folder = tmp_path / "support"
  folder.mkdir()
  (folder / "seq.in").write_text("play jazz please\nwake me at seven am\n")
  (folder / "seq.out").write_text("O B-genre O\nO O O B-time I-time\n")
  expected = [{"tokens": ["play", "jazz", "please"], "tags": ["O", "B-genre", "O"]},
              {"tokens": "wake me at seven am".split(), "tags": "O O O B-time I-time".split()}]
  assert read_support(folder) == expected
  jsonl = tmp_path / "support.jsonl"
  jsonl.write_text(json.dumps(expected[0]) + "\n\n" + json.dumps({"tokens": "wake me at seven am",
                                                                  "tags": "O O O B-time I-time"}) + "\n")
  assert read_support(jsonl) == expected


@pytest.mark.parametrize("seq_in,seq_out,message", [
    ("play jazz\n", "O B-genre O\n", r"seq\.out:1: field 'tags': 3 tags for 2 tokens"),
    ("play jazz\nplay rock\n", "O B-genre\nO I-genre\n", r"seq\.out:2: field 'tags': tag 2 'I-genre' follows 'O'"),
    ("play jazz\nplay rock\n", "O B-genre\n", r"seq\.out:2: line missing"),
    ("play jazz\n", "O O\n", r"no utterance holds a labelled slot"),
])
def test_bad_support_folders_name_file_line_and_field(tmp_path, seq_in, seq_out, message):
  from fewshot_nlu.data.support import read_support
  (tmp_path / "seq.in").write_text(seq_in)
  (tmp_path / "seq.out").write_text(seq_out)
  with pytest.raises(ValueError, match=message):
    read_support(tmp_path)


@pytest.mark.parametrize("line,message", [
    ('{"tokens": ["a"]}', r"s\.jsonl:2: expected an object with fields 'tokens' and 'tags'"),
    ('{"tokens": ["a", "b c"], "tags": ["O", "O"]}', r"s\.jsonl:2: field 'tokens' must be a list"),
    ('{"tokens": "a b", "tags": "B-x"}', r"s\.jsonl:2: field 'tags': 1 tags for 2 tokens"),
    ("{not json", r"s\.jsonl:2: not valid JSON"),
])
def test_bad_support_jsonl_names_line_and_field(tmp_path, line, message):
  from fewshot_nlu.data.support import read_support
  path = tmp_path / "s.jsonl"
  path.write_text('{"tokens": "play jazz", "tags": "O B-genre"}\n' + line + "\n")
  with pytest.raises(ValueError, match=message):
    read_support(path)
  path.write_text("\n")
  with pytest.raises(ValueError, match="the support set is empty"):
    read_support(path)
  with pytest.raises(FileNotFoundError, match="no such support set"):
    read_support(tmp_path / "missing.jsonl")


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
