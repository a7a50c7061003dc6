"""``serve.app`` in process on fake models: ``reject`` passed only to a model that takes it. The live server:
serve/test_main."""

from __future__ import annotations

from fewshot_nlu.serve import app as serve_app
from tests.serve.helpers import FakeModel


class RejectingModel(FakeModel):
  """A model with out-of-scope rejection (``predict(..., reject=True)``)."""

  kind = "fake"
  labels = ["a"]
  rejection = "a calibrated threshold"

  def predict(self, texts, *, reject: bool = False):
    return [_Answer(("oos",) if reject else ("a",)) for _ in texts]


class _Answer:
  def __init__(self, labels):
    self.labels = labels

  def to_dict(self):
    return {"labels": list(self.labels), "score": float("-inf")}


class PlainModel(RejectingModel):
  def predict(self, texts):
    return [_Answer(("a",)) for _ in texts]


def test_reject_reaches_only_a_model_that_takes_it(tmp_path):
  from starlette.testclient import TestClient
  assert serve_app.supports_reject(RejectingModel()) and not serve_app.supports_reject(PlainModel())
  uncalibrated = RejectingModel()
  uncalibrated.rejection = None
  assert not serve_app.supports_reject(uncalibrated)
  with TestClient(serve_app.create_app(RejectingModel(), tmp_path), base_url="http://localhost") as client:
    answer = client.post("/predict", json={"texts": ["x"], "reject": True}).json()
    assert answer == {"predictions": [{"text": "x", "labels": ["oos"], "score": None}]}  # -inf is no JSON
    assert client.post("/predict", json={"texts": ["x"]}).json()["predictions"][0]["labels"] == ["a"]
    assert client.get("/healthz").json()["reject"] is True
  with TestClient(serve_app.create_app(PlainModel(), tmp_path), base_url="http://localhost") as client:
    assert client.post("/predict", json={"texts": ["x"], "reject": False}).status_code == 200
    response = client.post("/predict", json={"texts": ["x"], "reject": True})
    assert response.status_code == 400 and "(kind 'fake') cannot reject" in response.json()["error"]
