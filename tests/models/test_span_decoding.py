"""Span decoding (``models.span_decoding``, Retriever §5.2): span enumeration, beam search, merging, the dynamic
threshold."""

from fewshot_nlu.models.span_decoding import (
  Candidate,
  beam_search,
  decode,
  enumerate_spans,
  filter_candidates,
  merge_consecutive,
  to_bio,
)


def test_span_enumeration():
  assert enumerate_spans(3, 7) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
  assert len(enumerate_spans(10, 7)) == sum(min(7, 10 - s) for s in range(10))
  assert all(e - s <= 2 for s, e in enumerate_spans(6, 2))


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
