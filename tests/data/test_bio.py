"""BIO helpers (``data.bio``): spans of (not strictly) BIO tags, and strict BIO validation."""

import itertools

import pytest

from fewshot_nlu.data.bio import bio_spans, validate_bio


def test_bio_spans():
  assert bio_spans("O B-a I-a O B-b B-b I-b".split()) == [("a", 1, 2), ("b", 4, 4), ("b", 5, 6)]
  assert bio_spans("B-a I-a".split()) == [("a", 0, 1)]
  # Not strict BIO (predictions): a dangling I-X opens a span, as in conlleval.
  assert bio_spans("O I-a I-a B-b I-c".split()) == [("a", 1, 2), ("b", 3, 3), ("c", 4, 4)]
  assert bio_spans([]) == []


@pytest.mark.parametrize("tags,message", [
    ("O I-a", r"here: tag 2 'I-a' follows 'O'"),
    ("B-a I-b", r"here: tag 2 'I-b' follows 'B-a'"),
    ("I-a", r"here: tag 1 'I-a' follows 'O'"),
    ("O X-a", r"here: tag 2 'X-a' is not O"),
    ("B-", r"here: tag 1 'B-' is not O"),
])
def test_validate_bio_rejects(tags, message):
  with pytest.raises(ValueError, match=message):
    validate_bio(tags.split(), "here")


def _is_valid(tags):
  try:
    validate_bio(tags, "here")
  except ValueError:
    return False
  return True


def test_validate_bio_accepts_exactly_the_sequences_its_spans_rebuild():
  """Strict BIO is what re-encoding its spans gives back; checked for every sequence of up to 4 tags."""
  assert _is_valid("O B-a I-a I-a B-a B-b I-b O".split())
  alphabet = ["O", "B-a", "I-a", "B-b", "I-b"]
  for tags in (list(t) for n in range(5) for t in itertools.product(alphabet, repeat=n)):
    rebuilt = ["O"] * len(tags)
    for name, start, end in bio_spans(tags):
      rebuilt[start:end + 1] = [f"B-{name}"] + [f"I-{name}"] * (end - start)
    assert _is_valid(tags) == (rebuilt == tags), tags
