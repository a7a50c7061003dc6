"""Shared by models/test_rejection and bench/test_oos: 8 toy utterances of 4 intents and the tiny model's sentence
encoder (a module-scoped fixture)."""

import pytest

from fewshot_nlu.encoders.sentence import SentenceEncoder
from tests import tiny

TEXTS = tiny.CORPUS[:8]
LABELS = ["bank", "weather", "food", "music", "bank", "bank", "music", "weather"]


@pytest.fixture(scope="module")
def encoder(tiny_bert_dir):
  return SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
