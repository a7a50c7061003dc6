"""BIO tag sequences: their labelled spans (conlleval's reading) and strict validation with errors that name
where the sequence came from. Shared by the dataset builders, the span scorers and slot-filling models."""

from __future__ import annotations

from typing import Sequence

from fewshot_nlu.errors import DataError


def bio_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
  """Labelled spans ``(label, start, end_inclusive)`` (token positions) of a BIO tag sequence, in order.

  ``B-X`` opens a span; ``I-X`` extends an open ``X`` span; an ``I-X`` that cannot extend one (after ``O`` or
  another label) opens a new span, as conlleval does, so predicted sequences that are not strict BIO still
  score. ``O`` (or anything that is not ``B-``/``I-`` with a label) closes the open span."""
  spans = []
  label, start = None, 0
  for position, tag in enumerate(tags):
    prefix, _, name = tag.partition("-")
    if prefix == "I" and name and name == label:
      continue
    if label is not None:
      spans.append((label, start, position - 1))
    label, start = (name, position) if prefix in ("B", "I") and name else (None, position)
  if label is not None:
    spans.append((label, start, len(tags) - 1))
  return spans


def validate_bio(tags: Sequence[str], where: str) -> None:
  """Raises ``ValueError`` naming ``where`` (e.g. ``path:line``) and the tag's position (from 1) at the first
  tag that is not ``O`` / ``B-<slot>`` / ``I-<slot>``, or an ``I-X`` preceded by neither ``B-X`` nor ``I-X``."""
  previous = "O"
  for position, tag in enumerate(tags, start=1):
    prefix, dash, name = tag.partition("-")
    if tag != "O" and not (prefix in ("B", "I") and dash and name):
      raise DataError(f"{where}: tag {position} {tag!r} is not O, B-<slot> or I-<slot>")
    if prefix == "I" and previous not in (f"B-{name}", f"I-{name}"):
      raise DataError(f"{where}: tag {position} {tag!r} follows {previous!r} "
                       f"(invalid BIO: I-{name} must follow B-{name} or I-{name})")
    previous = tag
