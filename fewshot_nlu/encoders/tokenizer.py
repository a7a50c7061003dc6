"""Tokenisation with the ``tokenizers`` library; padding is ours (length buckets), never the file's.

Pitfall handled here: many ``tokenizer.json`` files (the shipped MiniLM's included) have fixed padding to 128
and truncation built in. Both are switched off on load; truncation is set per call to the caller's
``max_length`` and padding is done by ``fewshot_nlu.data.batching``.
"""

from __future__ import annotations

import json
import pathlib
from typing import Sequence

import numpy as np
import tokenizers

_PAD_NAMES = ("[PAD]", "<pad>")
_MASK_NAMES = ("[MASK]", "<mask>")
_CLS_NAMES = ("[CLS]", "<s>")
_SEP_NAMES = ("[SEP]", "</s>")


def _first_id(tok: tokenizers.Tokenizer, names: Sequence[str]) -> int | None:
  for name in names:
    token_id = tok.token_to_id(name)
    if token_id is not None:
      return token_id
  return None


class Tokenizer:
  """A thin, picklable-free wrapper: text -> lists of token ids (special tokens included)."""

  def __init__(self, backend: tokenizers.Tokenizer):
    self.backend = backend
    backend.no_padding()
    backend.no_truncation()
    self._max_length = None
    self.pad_id = _first_id(backend, _PAD_NAMES)
    if self.pad_id is None:
      raise ValueError("tokenizer has no padding token ([PAD] or <pad>)")
    self.mask_id = _first_id(backend, _MASK_NAMES)
    self.cls_id = _first_id(backend, _CLS_NAMES)
    self.sep_id = _first_id(backend, _SEP_NAMES)

  @property
  def separator(self) -> str:
    """The text that joins dialogue turns into one input: the separator token ([SEP], </s>), or "|"."""
    return self.backend.id_to_token(self.sep_id) if self.sep_id is not None else "|"

  @property
  def vocab_size(self) -> int:
    return self.backend.get_vocab_size(with_added_tokens=True)

  @classmethod
  def from_dir(cls, directory: str | pathlib.Path) -> "Tokenizer":
    """Loads ``tokenizer.json``, else builds the fast tokenizer from vocab files via ``transformers``."""
    directory = pathlib.Path(directory)
    tokenizer_json = directory / "tokenizer.json"
    if tokenizer_json.exists():
      try:
        return cls(tokenizers.Tokenizer.from_file(str(tokenizer_json)))
      except Exception as e:  # tokenizers raises plain Exceptions with terse messages
        raise ValueError(f"{tokenizer_json}: cannot be read as a tokenizers JSON file: {e}") from e
    vocab_files = [p.name for p in directory.iterdir()
                   if p.name in ("vocab.txt", "vocab.json", "merges.txt", "sentencepiece.bpe.model")]
    if not vocab_files:
      raise FileNotFoundError(
          f"{directory}: no tokenizer.json and no vocab files (vocab.txt, vocab.json + merges.txt, "
          "sentencepiece.bpe.model)")
    import transformers  # Imported lazily: slow, and only needed for vocab-file-only checkpoints.
    fast = transformers.AutoTokenizer.from_pretrained(str(directory), use_fast=True)
    return cls(fast.backend_tokenizer)

  def save(self, directory: str | pathlib.Path) -> None:
    self.backend.save(str(pathlib.Path(directory) / "tokenizer.json"))

  def encode(self, texts: Sequence[str], max_length: int) -> list[list[int]]:
    """Token ids per text, with special tokens, truncated to ``max_length`` (specials kept)."""
    if self._max_length != max_length:
      self.backend.enable_truncation(max_length=max_length)
      self._max_length = max_length
    return [e.ids for e in self.backend.encode_batch(list(texts), add_special_tokens=True)]

  def encode_words(self, word_lists: Sequence[Sequence[str]], max_length: int
                   ) -> list[tuple[list[int], list[tuple[int, int]]]]:
    """Pre-split words -> (token ids, per word its (first, last) word-piece position), specials included.

    Retriever's span vectors use a span's first and last word pieces; this maps word spans onto them. The
    words are joined by single spaces and tokenised as that text (so ids equal ``encode`` of the sentence,
    for WordPiece and byte-level BPE alike); tokens are assigned to words by character offsets. Words cut off
    by truncation get (-1, -1).
    """
    texts, starts = [], []
    for words in word_lists:
      if any(not w or any(c.isspace() for c in w) for w in words):
        raise ValueError(f"words must be non-empty and contain no whitespace: {list(words)!r}")
      offsets, position = [], 0
      for w in words:
        offsets.append(position)
        position += len(w) + 1
      texts.append(" ".join(words))
      starts.append(np.array(offsets))
    if self._max_length != max_length:
      self.backend.enable_truncation(max_length=max_length)
      self._max_length = max_length
    out = []
    for words, word_starts, encoding in zip(
        word_lists, starts, self.backend.encode_batch(texts, add_special_tokens=True)):
      spans = [[-1, -1] for _ in words]
      for position, ((begin, end), special) in enumerate(zip(encoding.offsets, encoding.special_tokens_mask)):
        if special or end <= begin:
          continue
        word = int(np.searchsorted(word_starts, end - 1, side="right") - 1)
        if spans[word][0] < 0:
          spans[word][0] = position
        spans[word][1] = position
      out.append((encoding.ids, [tuple(s) for s in spans]))
    return out

  def describe(self) -> str:
    return json.dumps({"vocab_size": self.vocab_size, "pad_id": self.pad_id, "mask_id": self.mask_id,
                       "cls_id": self.cls_id, "sep_id": self.sep_id})
