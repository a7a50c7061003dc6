"""Whether a slot value takes the punctuation right after it, as the user's own annotations have it.

Words split punctuation off (``data.words``: ``1 p.m.`` -> ``1``, ``p.m``, ``.``), so a decoded span ends before
a full stop. Teams' annotations differ there: a time parser's output marks ``12:30PM.`` and ``1 p.m.`` with the
stop (the abbreviation's), a name ``Ohno.`` without it. Restaurants-8k's test set has 158 time values that end
in the stop and 16 that do not; its 64-utterance training file, 4 and 2. A span encoder sees the stop as a word
like any other and learns no such convention from a handful of examples, so the convention is counted instead.

``count`` goes through the support set's labelled spans: a span whose last word is punctuation touching the
word before it *includes* that mark; a span followed by a punctuation word touching its last word *excludes*
it. Counts are kept per (label, the last word's trailing letters lowercased, mark): ``pm`` for ``12:30PM`` and
``m`` for ``p.m``, and per (label, whether the last word ends in a letter, mark): a stop after ``8:15`` is a
sentence's, not an abbreviation's (Restaurants-8k's test set: all 8 time values ending in a digit before a stop
leave it). ``takes`` answers from the finer key when the support has seen it (and its counts are not tied), else
from the coarser one, else None: with no evidence a prediction stays as decoded. ``adjust`` moves a decoded
span's end by one word accordingly.
"""

from __future__ import annotations

import collections
import re
from typing import Mapping, Sequence

from fewshot_nlu.models.span_retrieval import labelled_spans

_PUNCTUATION = re.compile(r"[^\w\s]+")
_TRAILING_LETTERS = re.compile(r"[^\W\d_]*$")

Counts = Mapping[tuple, tuple[int, int]]  # key -> (spans that include the mark, spans that exclude it)


def _is_mark(word: str) -> bool:
  return bool(_PUNCTUATION.fullmatch(word))


def _touching(offsets: Sequence[Sequence[int]] | None, left: int, right: int) -> bool:
  """Word ``right`` starts where word ``left`` ends (True without offsets: whitespace words carry none)."""
  return offsets is None or offsets[left][1] == offsets[right][0]


def _ends_in_mark(words: Sequence[str], offsets: Sequence[Sequence[int]] | None, start: int, end: int) -> bool:
  """``words[start:end]`` ends in a mark touching a word of the span before it."""
  return end - start >= 2 and _is_mark(words[end - 1]) and _touching(offsets, end - 2, end - 1)


def _mark_follows(words: Sequence[str], offsets: Sequence[Sequence[int]] | None, end: int) -> bool:
  """Word ``end`` is a mark touching the span that ends before it."""
  return end < len(words) and _is_mark(words[end]) and _touching(offsets, end - 1, end)


def _keys(label: str, word: str, mark: str) -> tuple[tuple, tuple]:
  """The finer key (the word's trailing letters, lowercased) and the coarser one (whether it ends in a letter)."""
  letters = _TRAILING_LETTERS.search(word.lower()).group()
  return (label, letters, mark), (label, bool(letters), mark)


def count(support: Sequence[dict]) -> dict[tuple, tuple[int, int]]:
  """Per key, how many labelled support spans include / exclude the punctuation mark after their last word.
  ``support``: ``{"tokens", "tags"}`` rows (with ``offsets`` where they came as text)."""
  counts: dict[tuple, list[int]] = collections.defaultdict(lambda: [0, 0])
  for u in support:
    tokens, offsets = u["tokens"], u.get("offsets")
    for start, end, label in labelled_spans(u["tags"]):
      if _ends_in_mark(tokens, offsets, start, end):
        word, mark, column = tokens[end - 2], tokens[end - 1], 0
      elif _mark_follows(tokens, offsets, end):
        word, mark, column = tokens[end - 1], tokens[end], 1
      else:
        continue
      for key in _keys(label, word, mark):
        counts[key][column] += 1
  return {k: (v[0], v[1]) for k, v in counts.items()}


def takes(counts: Counts, label: str, word: str, mark: str) -> bool | None:
  """Whether a ``label`` span ending in ``word`` takes the ``mark`` after it; None where the support is silent
  or tied."""
  for key in _keys(label, word, mark):
    include, exclude = counts.get(key, (0, 0))
    if include != exclude:
      return include > exclude
  return None


def adjust(counts: Counts, label: str, start: int, end: int, words: Sequence[str],
           offsets: Sequence[Sequence[int]] | None, taken: frozenset = frozenset()) -> int:
  """The end of the decoded span ``words[start:end]`` after the convention: one word further to take a mark
  that follows it (unless word ``end`` is in ``taken``, another slot's), one word back to drop a trailing mark
  the convention excludes, else ``end``."""
  if not counts:
    return end
  if end not in taken and _mark_follows(words, offsets, end) and takes(counts, label, words[end - 1], words[end]):
    return end + 1
  if _ends_in_mark(words, offsets, start, end) and takes(counts, label, words[end - 2], words[end - 1]) is False:
    return end - 1
  return end


def ends(counts: Counts, spans: Sequence, words: Sequence[str], offsets: Sequence[Sequence[int]] | None) -> list[int]:
  """``adjust``'s end of each decoded span (``span_decoding.Candidate``s of one utterance): what a prediction
  answers, and what the cross-validation that picks the threshold scores (``methods.nlu.train.select``)."""
  taken = frozenset(i for span in spans for i in range(span.start, span.end))
  return [adjust(counts, span.label, span.start, span.end, words, offsets, taken) for span in spans]
