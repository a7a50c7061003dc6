"""``data.words``: words that keep their character offsets, punctuation split off."""

from fewshot_nlu.data import words


def test_words_keep_their_offsets_and_split_off_punctuation():
  text = "I'd like 2 pizzas, at 7:30pm; e-mail jo@x.com!"
  spans = words.word_spans(text)
  assert words.words(text, spans) == ["I'd", "like", "2", "pizzas", ",", "at", "7:30pm", ";", "e-mail", "jo@x.com",
                                      "!"]
  assert all(text[a:b] == w for (a, b), w in zip(spans, words.words(text, spans)))
  at = text.index("7:30pm")
  split = words.split_at(spans, [at + 4])  # "7:30pm" cut into "7:30" + "pm"
  assert words.words(text, split)[6:8] == ["7:30", "pm"] and words.covering(split, at, at + 4) == (6, 7)
  assert words.covering(spans, at, at + 4) is None  # a boundary inside a word
