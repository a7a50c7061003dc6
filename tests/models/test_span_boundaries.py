"""``models.span_boundaries``: the punctuation after a slot value follows the support's annotations."""

from fewshot_nlu.data import annotated
from fewshot_nlu.models import span_boundaries
from fewshot_nlu.models.span_decoding import Candidate


def _rows(*examples):
  """Support rows as ``fit`` builds them from text with character-offset entities."""
  return annotated.support_rows([
      annotated.Example(text, None, (annotated.Entity(text.index(value), text.index(value) + len(value), label,
                                                      value),), f"examples[{i}]")
      for i, (text, value, label) in enumerate(examples)])


def test_counts_spans_that_take_and_leave_the_mark_per_last_word_and_per_letter_ending():
  rows = _rows(("book it at 12:30PM.", "12:30PM.", "time"), ("at 1 p.m. please", "1 p.m.", "time"),
               ("at noon.", "noon", "time"), ("for 8:15. thanks", "8:15", "time"),
               ("for 2 , please", "2", "people"))  # the comma does not touch the value: no evidence
  counts = span_boundaries.count(rows)
  assert counts == {("time", "pm", "."): (1, 0), ("time", "m", "."): (1, 0), ("time", "noon", "."): (0, 1),
                    ("time", "", "."): (0, 1), ("time", True, "."): (2, 1), ("time", False, "."): (0, 1)}
  assert span_boundaries.takes(counts, "time", "7:45pm", ".") is True  # the finer key
  assert span_boundaries.takes(counts, "time", "noon", ".") is False
  assert span_boundaries.takes(counts, "time", "tonight", ".") is True  # unseen word: ends in a letter, 2 to 1
  assert span_boundaries.takes(counts, "time", "9:00", ".") is False
  assert span_boundaries.takes(counts, "time", "9pm", "?") is None  # another mark: no evidence
  assert span_boundaries.takes(counts, "people", "2", ".") is None
  assert span_boundaries.takes({("time", "pm", "."): (1, 1), ("time", True, "."): (1, 1)}, "time", "pm", ".") is None


def test_a_decoded_span_takes_or_drops_the_mark_as_the_counts_say():
  counts = span_boundaries.count(_rows(("at 1 p.m. please", "1 p.m.", "time"), ("at noon. ok", "noon", "time")))
  words, offsets = ["at", "3", "p.m", ".", "ok"], [[0, 2], [3, 4], [5, 8], [8, 9], [10, 12]]
  assert span_boundaries.adjust(counts, "time", 1, 3, words, offsets) == 4
  assert span_boundaries.adjust(counts, "time", 1, 3, words, offsets, taken=frozenset({3})) == 3  # another slot's
  assert span_boundaries.adjust(counts, "time", 1, 3, words, [[0, 2], [3, 4], [5, 8], [9, 10], [11, 13]]) == 3
  assert span_boundaries.adjust(counts, "date", 1, 3, words, offsets) == 3  # no evidence for the label
  assert span_boundaries.adjust({}, "time", 1, 3, words, offsets) == 3
  noon = ["at", "noon", ".", "ok"]
  assert span_boundaries.adjust(counts, "time", 1, 3, noon, [[0, 2], [3, 7], [7, 8], [9, 11]]) == 2  # dropped
  assert span_boundaries.adjust(counts, "time", 1, 2, noon, [[0, 2], [3, 7], [7, 8], [9, 11]]) == 2
  assert span_boundaries.adjust(counts, "time", 1, 3, ["at", "9", "p.m", "."], None) == 4  # whitespace words
  assert span_boundaries.adjust(counts, "time", 1, 3, ["at", "9", "pm", "."], None) == 3  # "pm": unseen, tied


def test_ends_adjust_every_decoded_span_of_an_utterance_with_the_others_words_taken():
  """``ends``: the end ``adjust`` gives each decoded span, another decoded span's first word counted as taken (the
  ends a prediction answers and the cross-validation scores)."""
  counts = span_boundaries.count(_rows(("at 1 p.m. please", "1 p.m.", "time"), ("at 5 p.m. ok", "5 p.m.", "time")))
  words, offsets = ["at", "3", "p.m", ".", "for", "2"], [[0, 2], [3, 4], [5, 8], [8, 9], [10, 13], [14, 15]]
  spans = [Candidate(1, 3, "time", 0.9), Candidate(5, 6, "people", 0.8)]
  assert span_boundaries.ends(counts, spans, words, offsets) == [4, 6]
  blocked = [Candidate(1, 3, "time", 0.9), Candidate(3, 4, "mark", 0.5)]
  assert span_boundaries.ends(counts, blocked, words, offsets) == [3, 4]  # the mark is another slot's
  assert span_boundaries.ends({}, spans, words, offsets) == [3, 6] and span_boundaries.ends(counts, [], words,
                                                                                               offsets) == []


class _FixedRetriever:
  """Answers every text with the candidates given (the slot filler's decoding and offsets are under test)."""

  max_words = 3

  def __init__(self, candidates):
    self._candidates = candidates

  def set_support(self, support):
    del support

  def score(self, words, **kwargs):
    del kwargs
    return [None for _ in words]

  def answer(self, scored, **kwargs):
    del scored, kwargs
    return self._candidates


def test_the_slot_filler_answers_the_value_with_the_mark_its_support_gives_it():
  from fewshot_nlu.models.slot_filler import SlotFillerModel
  payload = {"text": "1 p.m.", "label": "time", "utterance": "at 1 p.m. please"}
  retriever = _FixedRetriever([(Candidate(2, 4, "time", 0.95), payload)])  # "3 p.m" of the query below
  filler = SlotFillerModel(retriever, _rows(("at 1 p.m. please", "1 p.m.", "time")), threshold=0.5,
                           words="offsets")
  [prediction] = filler.predict(["see you 3 p.m. then"])
  [slot] = prediction.slots
  assert (slot.text, slot.char_start, slot.char_end, slot.start, slot.end) == ("3 p.m.", 8, 14, 2, 5)
  filler.replace_support(_rows(("at 1 p.m please", "1 p.m", "time"), ("at 5 p.m. ok", "5 p.m", "time")))
  [prediction] = filler.predict(["see you 3 p.m. then"])
  assert [s.text for s in prediction.slots] == ["3 p.m"]  # the new support leaves the stop: counts rebuilt
