"""Fixtures of the training tests: ``tiny_model``, the tiny BERT loaded once per module."""

import pytest

from fewshot_nlu.encoders import pretrained


@pytest.fixture(scope="module")
def tiny_model(tiny_bert_dir):
  return pretrained.load_pretrained(str(tiny_bert_dir))
