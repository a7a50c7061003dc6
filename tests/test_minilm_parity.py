"""Integration: the shipped all-MiniLM-L6-v2 against the sentence-transformers reference fixture.

The fixture (tests/fixtures/minilm_reference/) was produced by make_reference.py with torch +
sentence-transformers in a throwaway venv; see its README.md and VERSIONS.txt.
"""

import pathlib

import numpy as np
import pytest

from fewshot_nlu.encoders.sentence import SentenceEncoder

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "minilm_reference" / "reference.npz"

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def reference():
  return np.load(FIXTURE, allow_pickle=False)


@pytest.fixture(scope="module")
def encoder(reference):
  return SentenceEncoder.from_pretrained("minilm-l6", max_length=int(reference["max_seq_length"]),
                                         batch_size=8)


def test_token_ids_match(reference, encoder):
  ids = encoder.tokenizer.encode(list(reference["sentences"]), int(reference["max_seq_length"]))
  for i, row in enumerate(ids):
    expected = reference["token_ids"][i, : reference["lengths"][i]].tolist()
    assert row == expected, reference["sentences"][i]


def test_embeddings_match_sentence_transformers(reference, encoder):
  assert bool(reference["embeddings_are_normalized"])
  ours = encoder.encode(list(reference["sentences"]))
  cosine = np.sum(ours * reference["embeddings"], axis=1) / (
      np.linalg.norm(ours, axis=1) * np.linalg.norm(reference["embeddings"], axis=1))
  assert cosine.min() >= 0.9999, (cosine.min(), reference["sentences"][np.argmin(cosine)])
