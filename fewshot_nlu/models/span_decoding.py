"""Retriever's span decoding for slot filling (Yu et al., 2021, §5.2 and App. A.1).

Every span of up to m words (``enumerate_spans``) retrieves its nearest labelled span; its score, normalised
to [0, 1], and that span's label make a ``Candidate``. Then:

  1. ``filter_candidates``: keep candidates scoring >= the threshold; if none does, lower the threshold by 0.05
     and retry, at most 10 times (the dynamic threshold).
  2. ``beam_search``: go through the kept candidates in descending score order; each beam state either skips
     the candidate or, if it overlaps none of its spans, also takes it; states are pruned to the beam size by
     the average score of their spans. Lastly, the spans of the filtered set that overlap nothing in a state
     are added to it ("we add spans in the filtered set which do not overlap with the final beam").
  3. ``merge_consecutive``: two adjacent spans (r_{i:j}, r_{j:k}) of the same label whose scores differ by
     less than lambda become r_{i:k}.

The paper leaves open how the final beam is chosen; here, every surviving state is completed by step 2's
last sentence and the completed state with the highest average score is the decoding. This is the reading
under which Figure 1's example works: with "black" (0.95), "black horse tavern" (0.93) and "tavern" (0.85),
greedy decoding (beam 1) keeps "black" and then adds "tavern" (average 0.90), while a wider beam keeps the
state holding "black horse tavern" alone, whose completion (0.93) wins. A merged span carries the higher of
its parts' scores (the paper does not say).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence


@dataclasses.dataclass(frozen=True, order=True)
class Candidate:
  """Words [start, end) labelled ``label`` with normalised retrieval score ``score`` in [0, 1]."""

  start: int
  end: int
  label: str
  score: float

  def overlaps(self, other: "Candidate") -> bool:
    return self.start < other.end and other.start < self.end


def enumerate_spans(num_words: int, max_words: int) -> list[tuple[int, int]]:
  """All word spans [start, end) of at most ``max_words`` words: the n x m query spans of §5.2 (fewer near the
  end of the utterance), ordered by start, then length."""
  return [(start, end) for start in range(num_words)
          for end in range(start + 1, min(start + max_words, num_words) + 1)]


def filter_candidates(candidates: Sequence[Candidate], threshold: float, *, step: float = 0.05,
                      retries: int = 10) -> list[Candidate]:
  """The candidates scoring >= ``threshold``, the threshold lowered by ``step`` up to ``retries`` times until
  at least one passes (App. A.1); empty if none passes even then. Sorted by descending score."""
  ranked = sorted(candidates, key=lambda c: (-c.score, c.start, c.end, c.label))
  for attempt in range(retries + 1):
    bar = threshold - attempt * step
    kept = [c for c in ranked if c.score >= bar - 1e-9]
    if kept:
      return kept
  return []


def _average(spans: tuple[Candidate, ...]) -> float:
  return sum(c.score for c in spans) / len(spans) if spans else 0.0


def _mask(c: Candidate) -> int:
  """The words of ``c`` as bits (two spans overlap when their masks share a bit)."""
  return ((1 << (c.end - c.start)) - 1) << c.start


class _Beam:
  """Beam states as (spans, score total, word mask): the same states, order and averages as tuples of spans
  summed afresh, with overlap tests and averages in O(1)."""

  def __init__(self, beam_size: int):
    self.beam_size = beam_size
    self.states: list[tuple[tuple[Candidate, ...], float, int]] = [((), 0.0, 0)]

  def add(self, candidate: Candidate) -> None:
    bits = _mask(candidate)
    expanded = self.states + [(spans + (candidate,), total + candidate.score, mask | bits)
                              for spans, total, mask in self.states if not mask & bits]
    # stable sort: among equal averages the earlier (fewer-skips) state stays first
    self.states = sorted(expanded, key=lambda s: s[1] / len(s[0]) if s[0] else 0.0, reverse=True)[:self.beam_size]

  def best(self, ranked: Sequence[Candidate]) -> list[Candidate]:
    """Every state completed with the ``ranked`` candidates it does not overlap; the best by average (the first
    of equal ones), sorted by position."""
    masks = [_mask(c) for c in ranked]
    completed = []
    for spans, total, mask in self.states:
      for candidate, bits in zip(ranked, masks):
        if not mask & bits:
          spans, total, mask = spans + (candidate,), total + candidate.score, mask | bits
      completed.append((spans, total))
    spans, _ = max(completed, key=lambda s: s[1] / len(s[0]) if s[0] else 0.0)
    return sorted(spans)


def beam_search(candidates: Sequence[Candidate], beam_size: int) -> list[Candidate]:
  """Non-overlapping spans maximising the average score (see the module docstring), sorted by position."""
  if beam_size < 1:
    raise ValueError(f"beam_size must be >= 1, got {beam_size}")
  ranked = sorted(candidates, key=lambda c: (-c.score, c.start, c.end, c.label))
  beam = _Beam(beam_size)
  for candidate in ranked:
    beam.add(candidate)
  return beam.best(ranked)


def merge_consecutive(spans: Sequence[Candidate], merge_threshold: float) -> list[Candidate]:
  """§5.2: adjacent same-label spans r_{i:j}, r_{j:k} with |s - s'| < lambda become r_{i:k} (lambda = 1: always
  merge, lambda = 0: never); applied left to right, so a chain of parts merges into one span."""
  out: list[Candidate] = []
  for span in sorted(spans):
    last = out[-1] if out else None
    if (last is not None and last.end == span.start and last.label == span.label
        and abs(last.score - span.score) < merge_threshold):
      out[-1] = Candidate(last.start, span.end, span.label, max(last.score, span.score))
    else:
      out.append(span)
  return out


def decode(candidates: Sequence[Candidate], *, threshold: float, beam_size: int = 10,
           merge_threshold: float = 0.99, threshold_step: float = 0.05, threshold_retries: int = 10
           ) -> list[Candidate]:
  """§5.2 end to end: dynamic threshold, beam search, merging. The predicted slots, by position."""
  kept = filter_candidates(candidates, threshold, step=threshold_step, retries=threshold_retries)
  return merge_consecutive(beam_search(kept, beam_size), merge_threshold)


def decode_sweep(candidates: Sequence[Candidate], thresholds: Sequence[float], *, beam_size: int = 10,
                 merge_threshold: float = 0.99, threshold_step: float = 0.05, threshold_retries: int = 10
                 ) -> list[list[Candidate]]:
  """``decode`` at every one of ``thresholds`` (the same results), in one pass of the beam search: a threshold
  (lowered as ``filter_candidates`` lowers it) keeps a prefix of the candidates ranked by score, and the beam
  after the first n ranked candidates is the same whichever threshold stops there, so each threshold's decoding
  is the beam at its prefix, completed with that prefix. For choosing a threshold on development data."""
  if beam_size < 1:
    raise ValueError(f"beam_size must be >= 1, got {beam_size}")
  ranked = sorted(candidates, key=lambda c: (-c.score, c.start, c.end, c.label))
  prefix = []  # per threshold: how many ranked candidates it keeps
  for threshold in thresholds:
    kept = 0
    for attempt in range(threshold_retries + 1):
      bar = threshold - attempt * threshold_step
      kept = sum(1 for c in ranked if c.score >= bar - 1e-9)
      if kept:
        break
    prefix.append(kept)
  beam, out, wanted = _Beam(beam_size), {}, set(prefix)
  for n in range(max(prefix, default=0) + 1):
    if n:
      beam.add(ranked[n - 1])
    if n in wanted:
      out[n] = merge_consecutive(beam.best(ranked[:n]), merge_threshold) if n else []
  return [list(out[n]) for n in prefix]


def to_bio(spans: Sequence[Candidate], num_words: int) -> list[str]:
  """The spans as a BIO tag sequence of ``num_words`` tags (for the conlleval-style scorer and for output)."""
  tags = ["O"] * num_words
  for span in spans:
    tags[span.start] = f"B-{span.label}"
    for position in range(span.start + 1, span.end):
      tags[position] = f"I-{span.label}"
  return tags
