"""``python -m fewshot_nlu.serve`` tested live: uvicorn in a subprocess on a free port, serving a tiny k-NN
intent export written here, and a real HTTP client (httpx).

``direct`` is the same export loaded in this process, kept equal to the served model (every example a test
adds live is added to it too), so the server's answers are checked against ``direct.predict``. Two server
processes start in all: ``served`` (the real command line), and, in the last test, a restart on the same
export through ``tests.serve_with_faults`` (a planted model bug and a persist slow enough to kill -9).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from fewshot_nlu import models
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.models.intent_model import IntentModel
from tests import tiny

ROOT = pathlib.Path(__file__).parents[2]
TEXTS = tiny.CORPUS[:6]
LABELS = ["bank", "weather", "food", "music", "bank", "bank"]
MAX_TEXTS, MAX_CHARS = 8, 200
LOCAL = "http://localhost"  # an in-process TestClient's base URL: a host the server answers to


class Server:
  """A server process on a free local port; ``stop`` ends it with SIGTERM (uvicorn's graceful shutdown)."""

  def __init__(self, module_args: list[str], model: pathlib.Path, log: pathlib.Path, *extra: str):
    with socket.socket() as s:
      s.bind(("127.0.0.1", 0))
      self.port = s.getsockname()[1]
    self.log = log
    argv = [sys.executable, "-m", *module_args, "--model", str(model), "--port", str(self.port),
            "--max-texts", str(MAX_TEXTS), "--max-chars", str(MAX_CHARS), "--no-access-log", *extra]
    with open(log, "w") as out:
      self.process = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=60)
    deadline = time.monotonic() + 120
    while True:
      if self.process.poll() is not None:
        raise AssertionError(f"the server exited with {self.process.returncode}:\n{log.read_text()[-3000:]}")
      try:
        if self.client.get("/healthz").status_code == 200:
          return
      except httpx.TransportError:
        pass
      if time.monotonic() > deadline:
        self.stop()
        raise AssertionError(f"the server did not answer /healthz in 120 s:\n{log.read_text()[-3000:]}")
      time.sleep(0.2)

  def stats(self) -> dict:
    return self.client.get("/healthz").json()["stats"]

  def stop(self) -> None:
    self.client.close()
    if self.process.poll() is None:
      self.process.send_signal(signal.SIGTERM)
      try:
        self.process.wait(timeout=30)
      except subprocess.TimeoutExpired:
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def export(tiny_bert_dir, tmp_path_factory) -> pathlib.Path:
  encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
  return IntentModel.from_examples(encoder, TEXTS, LABELS).save(tmp_path_factory.mktemp("serve") / "export")


@pytest.fixture(scope="module")
def direct(export):
  return models.load(export)


@pytest.fixture(scope="module")
def served(export, direct):
  # warm-up on (the one live server of the suite that compiles its request shapes first), over batches of up to 8
  server = Server(["fewshot_nlu.serve"], export, export.parent / "served.log", "--batch-wait-ms", "50", "--persist",
                  "--max-batch", "8")
  yield server
  server.stop()


def expected(direct, texts: list[str]) -> list[dict]:
  return [{"text": t, "labels": list(p.labels), **p.to_dict()} for t, p in zip(texts, direct.predict(texts))]


def assert_same_predictions(answer: list[dict], wanted: list[dict]) -> None:
  """Equal labels and evidence; scores equal up to float32 noise (a text batched with longer ones is padded
  to another length)."""
  assert [a["labels"] for a in answer] == [w["labels"] for w in wanted]
  for a, w in zip(answer, wanted):
    assert a["text"] == w["text"] and a["score"] == pytest.approx(w["score"], abs=1e-5)
    assert [n["text"] for n in a["neighbours"]] == [n["text"] for n in w["neighbours"]]
    assert [n["score"] for n in a["neighbours"]] == pytest.approx([n["score"] for n in w["neighbours"]], abs=1e-5)


def predict(client: httpx.Client, texts: list[str], **fields) -> list[dict]:
  response = client.post("/predict", json={"texts": texts, **fields})
  assert response.status_code == 200, response.text
  return response.json()["predictions"]


# ------------------------------------------------------------------------------------------------ answers

def test_predict_labels_and_healthz_answer_like_the_model(served, direct, export):
  health = served.client.get("/healthz").json()
  assert health["status"] == "ok" and health["kind"] == "intent_model" and health["model"] == str(export)
  assert health["reject"] is False
  assert served.client.get("/labels").json() == {"kind": "intent_model", "labels": direct.labels,
                                                 "examples": len(direct)}
  texts = [TEXTS[3], "is there a fee for top ups", "what time is it"]
  answer = predict(served.client, texts)
  assert_same_predictions(answer, expected(direct, texts))
  assert answer[0]["labels"] == ["music"] and answer[0]["score"] == pytest.approx(1.0, abs=1e-5)
  one = predict(served.client, texts[:1], neighbours=1)
  assert len(one[0]["neighbours"]) == 1 and one[0]["neighbours"][0]["text"] == TEXTS[3]


def test_concurrent_clients_are_batched_and_answered_like_direct_predict(served, direct):
  asks = [[tiny.CORPUS[i % 12], f"{tiny.CORPUS[(i * 5) % 12]} please"][: 1 + i % 2] for i in range(16)]
  before = served.stats()
  start = threading.Barrier(len(asks))
  answers: list = [None] * len(asks)

  def client(i: int) -> None:
    with httpx.Client(base_url=str(served.client.base_url), timeout=60) as own:
      own.get("/healthz")  # connect before the barrier, so the requests leave together
      start.wait()
      answers[i] = predict(own, asks[i])

  threads = [threading.Thread(target=client, args=(i,)) for i in range(len(asks))]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert all(answer is not None for answer in answers)
  assert_same_predictions([p for answer in answers for p in answer], expected(direct, sum(asks, [])))
  after = served.stats()
  requests = after["predict_requests"] - before["predict_requests"]
  calls = after["predict_calls"] - before["predict_calls"]
  assert requests == 16 and after["predict_texts"] - before["predict_texts"] == sum(map(len, asks))
  assert calls < requests, f"{requests} requests took {calls} model calls: nothing was batched"


# --------------------------------------------------------------------------------------------- bad input

BAD = [
    ("/predict", b'{"texts": ', 400, "malformed JSON: Expecting value at line 1 column 11"),
    ("/predict", b"", 400, "empty body"),
    ("/predict", b"\xff\xfe", 400, "not UTF-8"),
    ("/predict", b'{"texts": [NaN]}', 400, "NaN is not a JSON value"),
    ("/predict", b"[1]", 400, "must be a JSON object, got a list"),
    ("/predict", {"texts": []}, 400, "texts: empty list"),
    ("/predict", {"texts": "hi"}, 400, "texts: expected a list of strings, got a string"),
    ("/predict", {"texts": ["ok", ""]}, 400, "texts[1]: empty text"),
    ("/predict", {"texts": [" \t"]}, 400, "texts[0]: empty text"),
    ("/predict", {"texts": ["ok", 3]}, 400, "texts[1]: expected a string, got a number"),
    ("/predict", {"texts": [None]}, 400, "texts[0]: expected a string, got null"),
    ("/predict", {"texts": ["hi"] * (MAX_TEXTS + 1)}, 413, f"more than this server's limit of {MAX_TEXTS}"),
    ("/predict", {"texts": ["a" * (MAX_CHARS + 1)]}, 413, f"texts[0]: {MAX_CHARS + 1} characters"),
    ("/predict", {"texts": ["hi"], "colour": "red"}, 400, "unknown field 'colour'"),
    ("/predict", {"text": ["hi"]}, 400, "unknown field 'text'"),
    ("/predict", {}, 400, "missing field 'texts'"),
    ("/predict", {"texts": ["hi"], "neighbours": -1}, 400, "neighbours: expected an integer from 0 to 100"),
    ("/predict", {"texts": ["hi"], "neighbours": True}, 400, "neighbours: expected an integer"),
    ("/predict", {"texts": ["hi"], "reject": "yes"}, 400, "reject: expected true or false"),
    ("/predict", {"texts": ["hi"], "reject": True}, 400, "cannot reject out-of-scope texts"),
    ("/predict", b'{"texts": ["' + b"a" * 100_000 + b'"]}', 413, "the body is larger than this server's limit"),
    ("/examples", {"texts": ["a"]}, 400, "missing field 'labels'"),
    ("/examples", {"texts": ["a"], "labels": []}, 400, "labels: 0 labels for 1 texts"),
    ("/examples", {"texts": ["a"], "labels": "x"}, 400, "labels: expected a list"),
    ("/examples", {"texts": ["a"], "labels": [""]}, 400, "labels[0]: expected a non-empty string"),
    ("/examples", {"texts": ["a"], "labels": [7]}, 400, "labels[0]: expected a non-empty string"),
    ("/examples", {"texts": [""], "labels": ["x"]}, 400, "texts[0]: empty text"),
    ("/examples?persist=maybe", {"texts": ["a"], "labels": ["x"]}, 400, "persist: expected true or false"),
    ("/examples?force=1", {"texts": ["a"], "labels": ["x"]}, 400, "unknown query parameter 'force'"),
    ("/predict", b'{"texts": ["\\ud800 hi"]}', 400, "texts[0]: not valid Unicode text (a lone surrogate"),
    ("/examples", b'{"texts": ["a"], "labels": ["\\udfff"]}', 400, "labels[0]: not valid Unicode text"),
    ("/predict", b'{"texts": ["a"], "texts": ["b"]}', 400, "the key 'texts' appears twice"),
    ("/examples", {"texts": ["a"], "labels": [["x", "y"]]}, 400, "labels[0]: ['x', 'y'] (list): this model takes "
     "one string label per text"),
]


def test_bad_input_gets_a_4xx_json_error_naming_the_field_and_the_server_stays_up(served, direct):
  labels_before = served.client.get("/labels").json()
  for path, body, status, message in BAD:
    if isinstance(body, bytes):
      response = served.client.post(path, content=body, headers={"content-type": "application/json"})
    else:
      response = served.client.post(path, json=body)
    assert response.status_code == status, (path, body, response.text)
    assert message in response.json()["error"], (path, body, response.text)
  response = served.client.get("/nowhere")
  assert response.status_code == 404 and "POST /predict" in response.json()["error"]
  response = served.client.get("/predict")
  assert response.status_code == 405 and response.json() == {"error": "GET /predict: method not allowed"}
  assert served.client.get("/labels").json() == labels_before  # no refused example reached the model
  assert served.client.get("/healthz").status_code == 200
  assert_same_predictions(predict(served.client, [TEXTS[0]]), expected(direct, [TEXTS[0]]))


# ------------------------------------------------------------------------------------------ live updates

def test_examples_added_live_change_predictions_without_touching_the_export(served, direct, export):
  text = tiny.CORPUS[6]  # "set an alarm for seven am"
  assert "alarm" not in predict(served.client, [text])[0]["labels"]
  on_disk = (export / "intent_model.json").read_text()
  response = served.client.post("/examples", json={"texts": [text], "labels": ["alarm"]})
  direct.add_examples([text], ["alarm"])
  assert response.status_code == 200, response.text
  assert response.json() == {"added": 1, "new_labels": ["alarm"], "labels": len(direct.labels),
                             "examples": len(direct), "persisted": False}
  answer = predict(served.client, [text, TEXTS[1]])
  assert answer[0]["labels"] == ["alarm"] and answer[0]["score"] == pytest.approx(1.0, abs=1e-5)
  assert_same_predictions(answer, expected(direct, [text, TEXTS[1]]))
  assert served.client.get("/labels").json()["labels"] == direct.labels
  assert (export / "intent_model.json").read_text() == on_disk


def test_persisted_examples_survive_a_restart_and_a_kill_during_persist_leaves_the_old_export(
    served, direct, export):
  text = tiny.CORPUS[7]  # "cancel my order"
  response = served.client.post("/examples?persist=true", json={"texts": [text], "labels": ["cancel"]})
  direct.add_examples([text], ["cancel"])
  assert response.status_code == 200 and response.json()["persisted"] is True, response.text
  served.stop()

  marker = export.parent / "persisting"
  restarted = Server(["tests.serve_with_faults", str(marker)], export, export.parent / "restarted.log",
                     "--batch-wait-ms", "50", "--persist", "--no-warmup")  # `served` warmed up
  try:
    assert restarted.client.get("/labels").json() == {"kind": "intent_model", "labels": direct.labels,
                                                      "examples": len(direct)}
    texts = [text, tiny.CORPUS[6], TEXTS[2]]
    assert_same_predictions(predict(restarted.client, texts), expected(direct, texts))
    assert predict(restarted.client, [text])[0]["labels"] == ["cancel"]

    # a bug in the model: that request gets a 500 JSON error, logged; the others in its batch their answers
    responses = concurrent_posts(restarted, [["__boom__"], [TEXTS[0]], [TEXTS[1]]])
    assert responses[0].status_code == 500
    assert responses[0].json() == {"error": "internal error: RuntimeError: planted bug: __boom__"}
    assert [r.status_code for r in responses[1:]] == [200, 200]
    assert_same_predictions(responses[1].json()["predictions"] + responses[2].json()["predictions"],
                            expected(direct, [TEXTS[0], TEXTS[1]]))
    assert restarted.client.get("/healthz").status_code == 200

    # kill -9 while the new index is half written: the export stays as it was
    meta_before = (export / "intent_model.json").read_text()
    persist = threading.Thread(target=lambda: _swallow(lambda: restarted.client.post(
        "/examples?persist=true", json={"texts": [tiny.CORPUS[8]], "labels": ["time"]})))
    persist.start()
    deadline = time.monotonic() + 60
    while not marker.exists():
      assert time.monotonic() < deadline and restarted.process.poll() is None, restarted.log.read_text()[-3000:]
      time.sleep(0.05)
    os.kill(restarted.process.pid, signal.SIGKILL)
    restarted.process.wait()
    persist.join()
  finally:
    restarted.stop()
  assert marker.exists()  # the kill landed with the new index's vectors written, the rest not
  assert (export / "intent_model.json").read_text() == meta_before
  survivor = models.load(export)
  assert survivor.labels == direct.labels and len(survivor) == len(direct)
  assert [p.label for p in survivor.predict([text, tiny.CORPUS[8]])] == \
      [p.label for p in direct.predict([text, tiny.CORPUS[8]])]
  assert "RuntimeError: planted bug: __boom__" in restarted.log.read_text()  # the 500 was logged


def concurrent_posts(server: Server, asks: list[list[str]]) -> list[httpx.Response]:
  """Posts each ``asks[i]`` to /predict from its own thread at once; the responses, in order."""
  responses: list = [None] * len(asks)
  start = threading.Barrier(len(asks))

  def post(i: int) -> None:
    with httpx.Client(base_url=str(server.client.base_url), timeout=60) as own:
      own.get("/healthz")
      start.wait()
      responses[i] = own.post("/predict", json={"texts": asks[i]})

  threads = [threading.Thread(target=post, args=(i,)) for i in range(len(asks))]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  return responses


def _swallow(call) -> None:
  with contextlib.suppress(httpx.TransportError):
    call()


def test_the_command_refuses_a_folder_without_a_model(tmp_path):
  result = subprocess.run([sys.executable, "-m", "fewshot_nlu.serve", "--model", str(tmp_path / "nowhere")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert result.returncode == 2 and "no such directory" in result.stderr


def test_a_calibrated_model_rejects_out_of_scope_texts_when_asked_and_an_uncalibrated_one_says_it_cannot(
    export, tmp_path):
  from starlette.testclient import TestClient

  from fewshot_nlu.serve.app import create_app

  from fewshot_nlu.models.rejection import Rejection

  texts = [TEXTS[3], "what time is it", "is there a fee for top ups"]
  calibrated = models.load(export)
  scores = sorted(p.score for p in calibrated.predict(texts))
  calibrated.rejection = Rejection((scores[0] + scores[-1]) / 2, 0.5, len(TEXTS), "set by the test")
  saved = calibrated.save(tmp_path / "calibrated")
  wanted = [p.label for p in models.load(saved).predict(texts, reject=True)]
  assert "out_of_scope" in wanted and set(wanted) != {"out_of_scope"}
  with TestClient(create_app(models.load(saved), saved), base_url=LOCAL) as client:
    assert client.get("/healthz").json()["reject"] is True
    answer = client.post("/predict", json={"texts": texts, "reject": True})
    assert answer.status_code == 200, answer.text
    assert [p["label"] for p in answer.json()["predictions"]] == wanted
  with TestClient(create_app(models.load(export), export), base_url=LOCAL) as client:
    assert client.get("/healthz").json()["reject"] is False
    refused = client.post("/predict", json={"texts": texts, "reject": True})
    assert refused.status_code == 400 and "no calibrated threshold" in refused.json()["error"]
