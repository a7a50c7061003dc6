"""Word-to-wordpiece alignment (for span encoders) on the real MiniLM tokenizer and a tiny BPE one; a
tokenizer.json's own padding is disabled."""

from fewshot_nlu.encoders import pretrained


def test_word_alignment_minilm():
  tok = pretrained.load_pretrained("minilm-l6").tokenizer
  words = ["book", "a", "table", "at", "Gordon's", "tomorrow", "unbelievably"]
  (ids, spans), = tok.encode_words([words], 32)
  assert ids[0] == tok.cls_id and ids[-1] == tok.sep_id
  assert spans[0] == (1, 1)
  for word, (first, last) in zip(words, spans):
    pieces = [tok.backend.id_to_token(i) for i in ids[first : last + 1]]
    assert "".join(p.removeprefix("##") for p in pieces) == word.lower()
  assert spans[4][1] > spans[4][0]  # "gordon's" spans several pieces
  assert ids == tok.encode([" ".join(words)], 32)[0]  # same ids as plain text for whitespace words


def test_truncated_words_are_marked(tiny_roberta_dir):
  tok = pretrained.load_pretrained(str(tiny_roberta_dir)).tokenizer
  words = "play some jazz music please".split() * 4
  (ids, spans), = tok.encode_words([words], 8)
  assert len(ids) == 8 and ids[-1] == tok.sep_id
  assert spans[-1] == (-1, -1) and spans[0][0] == 1
  assert ids == tok.encode([" ".join(words)], 8)[0]
  covered = [s for s in spans if s[0] >= 0]
  assert all(a[1] < b[0] for a, b in zip(covered, covered[1:]))  # word pieces in order, no overlap


def test_tokenizer_file_padding_is_disabled(tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))  # its tokenizer.json pads to 64
  ids = model.tokenizer.encode(["hi", "cancel my order"], 32)
  assert [len(i) for i in ids] == [3, 5]
  assert model.tokenizer.encode(["cancel my order " * 20], 8)[0][-1] == model.tokenizer.sep_id
