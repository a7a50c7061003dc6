"""Integration: the packaged encoders against sentence-transformers' reference fixtures.

Each fixture (tests/fixtures/<name>_reference/) was produced by tests/fixtures/minilm_reference/make_reference.py
with torch + sentence-transformers in a throwaway venv; see its README.md and each VERSIONS.txt. all-MiniLM-L6-v2
(``minilm-l6``) is checked in every run; all-mpnet-base-v2 (``mpnet-base``) where its five parts are installed
(``pip install "fewshot_nlu[mpnet]"``; 440 MB, so CI leaves it out and the test says it was skipped).
"""

import importlib.metadata
import pathlib

import numpy as np
import pytest

from fewshot_nlu.encoders import pretrained
from fewshot_nlu.encoders.sentence import SentenceEncoder

FIXTURES = pathlib.Path(__file__).parents[1] / "fixtures"
MODELS = {"minilm-l6": FIXTURES / "minilm_reference" / "reference.npz",
          "mpnet-base": FIXTURES / "mpnet_reference" / "reference.npz"}

pytestmark = pytest.mark.integration


def _installed(name: str) -> bool:
  if name not in pretrained.SPLIT_PACKAGES:
    return True
  try:
    for distribution in pretrained.SPLIT_PACKAGES[name][0]:
      importlib.metadata.distribution(distribution)
  except importlib.metadata.PackageNotFoundError:
    return False
  return True


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
  if not _installed(request.param):
    pytest.skip(f"{request.param}: its packages are not installed (pip install \"fewshot_nlu[mpnet]\")")
  reference = np.load(MODELS[request.param], allow_pickle=False)
  encoder = SentenceEncoder.from_pretrained(request.param, max_length=int(reference["max_seq_length"]), batch_size=8)
  return reference, encoder


def test_token_ids_match(model):
  reference, encoder = model
  ids = encoder.tokenizer.encode(list(reference["sentences"]), int(reference["max_seq_length"]))
  for i, row in enumerate(ids):
    expected = reference["token_ids"][i, : reference["lengths"][i]].tolist()
    assert row == expected, reference["sentences"][i]


def test_embeddings_match_sentence_transformers(model):
  reference, encoder = model
  assert bool(reference["embeddings_are_normalized"])
  ours = encoder.encode(list(reference["sentences"]))
  cosine = np.sum(ours * reference["embeddings"], axis=1) / (
      np.linalg.norm(ours, axis=1) * np.linalg.norm(reference["embeddings"], axis=1))
  assert cosine.min() >= 0.9999, (cosine.min(), reference["sentences"][np.argmin(cosine)])


def test_embeddings_on_onnxruntime_match_sentence_transformers(model):
  pytest.importorskip("onnxruntime")
  from fewshot_nlu.encoders import onnx_inference
  reference, encoder = model
  encoder.onnx = onnx_inference.OnnxForward(encoder)
  try:
    ours = encoder.encode(list(reference["sentences"]))
  finally:
    encoder.onnx = None
  cosine = np.sum(ours * reference["embeddings"], axis=1) / (
      np.linalg.norm(ours, axis=1) * np.linalg.norm(reference["embeddings"], axis=1))
  assert cosine.min() >= 0.9999, (cosine.min(), reference["sentences"][np.argmin(cosine)])
