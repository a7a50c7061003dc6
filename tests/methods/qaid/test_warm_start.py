"""QAID's warm start (``methods.qaid.warm_start``): the warm projection keeps the encoder's token similarities
(the identity exactly; below full width, the uncentred principal directions, against numpy's eigenvectors and
beating random projections), and step 0 scores are the encoder's own late interaction."""

import jax.numpy as jnp
import numpy as np
import pytest

from configs import qaid_banking77
from fewshot_nlu.encoders import pretrained, transformer
from fewshot_nlu.methods.qaid import train as qaid
from fewshot_nlu.methods.qaid import warm_start
from fewshot_nlu.methods.qaid.model import QAIDModel
from tests import tiny


def _tokens(n=300, hidden=12, seed=0):
  rng = np.random.default_rng(seed)
  # anisotropic, as real token vectors are: a few strong directions
  return rng.normal(0, 1, (n, hidden)) * np.linspace(3.0, 0.2, hidden) + rng.normal(0, 0.5, hidden)


def test_full_width_warm_projection_is_the_identity_and_keeps_every_token_similarity():
  tokens = _tokens()
  for width in (12, 20):  # at and above the encoder's width (zero-padded)
    projection = warm_start.fit(tokens, width)
    z = tokens @ projection["kernel"] + projection["bias"]
    np.testing.assert_allclose(z @ z.T, tokens @ tokens.T, rtol=1e-6, atol=1e-5)
    assert warm_start.retained_fraction(tokens, projection) == pytest.approx(1.0)


def test_narrow_warm_projection_is_the_top_eigenvectors_of_the_normalised_tokens():
  tokens = _tokens()
  projection = warm_start.fit(tokens, 4)
  kernel = projection["kernel"].astype(np.float64)
  np.testing.assert_allclose(kernel.T @ kernel, np.eye(4), atol=1e-5)  # orthonormal columns
  directions = tokens / np.linalg.norm(tokens, axis=1, keepdims=True)
  values, vectors = np.linalg.eigh(directions.T @ directions)
  top = vectors[:, np.argsort(values)[::-1][:4]]
  np.testing.assert_allclose(kernel @ kernel.T, top @ top.T, atol=1e-5)  # the same subspace
  assert warm_start.retained_fraction(tokens, projection) == pytest.approx(np.sort(values)[::-1][:4].sum()
                                                                          / values.sum(), rel=1e-5)
  rng = np.random.default_rng(1)
  for _ in range(20):  # no other orthonormal 4-d projection keeps more
    q, _ = np.linalg.qr(rng.normal(size=(12, 4)))
    assert warm_start.retained_fraction(tokens, {"kernel": q}) < warm_start.retained_fraction(tokens, projection)
  with pytest.raises(ValueError, match="cannot span"):
    warm_start.fit(tokens[:3], 4)


def test_warm_step_zero_scores_are_the_encoders_own_late_interaction(tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  config = qaid_banking77.get_config()
  config.qaid.projection_dim = 0
  params, _, notes = qaid.init_params(model, config, num_intents=3, texts=tiny.CORPUS[:6])
  assert notes["projection"].startswith("warm: the identity")
  qaid_model = QAIDModel(model.config, params["encoder"], model.tokenizer, params["projection"], batch_size=4)
  qaid_model.add_answers(["a", "b"], tiny.CORPUS[6:8])
  scores = qaid_model.scores(tiny.CORPUS[:3])
  ids = model.tokenizer.encode(tiny.CORPUS[:3] + tiny.CORPUS[6:8], 32)
  hidden = [np.asarray(transformer.encoder_for(model.config, model.params).apply(
      {"params": model.params}, jnp.asarray([t]), jnp.ones((1, len(t)), jnp.int32)))[0] for t in ids]
  unit = [h / np.linalg.norm(h, axis=1, keepdims=True) for h in hidden]
  want = np.array([[np.mean(np.max(unit[q] @ unit[3 + a].T, axis=1)) for a in range(2)] for q in range(3)])
  np.testing.assert_allclose(scores, want, rtol=1e-4, atol=1e-5)
  config.qaid.projection_dim = 8  # narrower than the tiny encoder: principal directions of the texts' tokens
  _, _, notes = qaid.init_params(model, config, num_intents=3, texts=tiny.CORPUS)
  assert notes["projection"].startswith("warm: the top 8 principal directions")
