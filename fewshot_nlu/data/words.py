"""Words with their character offsets, so that a slot predicted over words maps back to the exact substring of
the text it came from.

A word is a run of letters / digits that may hold joiners between them (``I'd``, ``e-mail``, ``7:30``,
``3.5``, ``jo@x.com``); any other non-space character is a word of its own (``pizza?`` -> ``pizza``, ``?``).
Annotated training text is also split wherever an entity starts or ends (``split_at``), so every annotated span
is a whole number of words, whatever the annotator's boundaries.
"""

from __future__ import annotations

import bisect
import re
from typing import Iterable, Sequence

_WORD = re.compile(r"\w+(?:[-'’.:@/&+]\w+)*|[^\w\s]")

Span = tuple[int, int]  # [start, end) character offsets


def word_spans(text: str) -> list[Span]:
  """The [start, end) character offsets of the words of ``text``, in order."""
  return [m.span() for m in _WORD.finditer(text)]


def split_at(spans: Sequence[Span], cuts: Iterable[int]) -> list[Span]:
  """``spans`` with every span that a cut offset falls strictly inside split there (``cuts``: e.g. the starts
  and ends of annotated entities)."""
  cuts = sorted(set(cuts))
  out = []
  for start, end in spans:
    inner = cuts[bisect.bisect_right(cuts, start): bisect.bisect_left(cuts, end)]
    edges = [start, *inner, end]
    out.extend((a, b) for a, b in zip(edges, edges[1:]) if a < b)
  return out


def words(text: str, spans: Sequence[Span]) -> list[str]:
  return [text[a:b] for a, b in spans]


def covering(spans: Sequence[Span], start: int, end: int) -> tuple[int, int] | None:
  """The word range [i, j) whose words exactly cover characters [start, end), or None when a boundary falls
  inside a word or the range holds no word."""
  starts = [a for a, _ in spans]
  ends = [b for _, b in spans]
  i = bisect.bisect_left(starts, start)
  j = bisect.bisect_left(ends, end)
  if i < len(spans) and j < len(spans) and starts[i] == start and ends[j] == end and i <= j:
    return i, j + 1
  return None
