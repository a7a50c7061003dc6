"""Attacks on a live ``python -m fewshot_nlu.serve`` (uvicorn in a subprocess on a loopback port, a tiny k-NN
export): a web page's cross-site POST (CSRF, ``text/plain``), DNS rebinding (a foreign ``Host``), a missing or
wrong API key, a read-only server asked for examples, and a second persisting server on one export. Every
refusal is a JSON error, and nothing refused reaches the model. Bounded: three server processes, loopback only.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fewshot_nlu.serve import security
from tests.serve.test_main import ROOT, TEXTS, Server, export  # noqa: F401  (export: the tiny k-NN export fixture)

KEY = "s3cret-key"
PAGE = "http://localhost:3000"  # the team's own chat page, allowed by --allow-origin
EVIL = "http://evil.example"


@pytest.fixture(scope="module")
def guarded(export):
  """Key from the environment, one allowed origin, persisting (holds the export's lock)."""
  os.environ[security.API_KEY_VARIABLE] = KEY
  try:
    server = Server(["fewshot_nlu.serve"], export, export.parent / "guarded.log", "--allow-origin", PAGE,
                    "--persist", "--no-warmup")  # the warm-up is tests/serve/test_main.py's `served`
  finally:
    del os.environ[security.API_KEY_VARIABLE]
  yield server
  server.stop()


def auth(key: str = KEY) -> dict:
  return {"Authorization": f"Bearer {key}"}


def labels(server: Server) -> list[str]:
  return server.client.get("/labels", headers=auth()).json()["labels"]


def test_a_web_page_cannot_post_examples_cross_site(guarded, export):
  before, on_disk = labels(guarded), (export / "intent_model.json").read_text()
  body = '{"texts": ["transfer all my money"], "labels": ["pwned"]}'
  for headers in ({"Content-Type": "text/plain", "Origin": EVIL},  # a form / fetch without a preflight
                  {"Content-Type": "application/json", "Origin": EVIL, **auth()},  # even with the key
                  {"Content-Type": "text/plain", "Origin": "null", **auth()}):  # a sandboxed or file:// page
    response = guarded.client.post("/examples?persist=true", content=body, headers=headers)
    assert response.status_code == 403 and "origin" in response.json()["error"], response.text
  preflight = guarded.client.options("/examples", headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"})
  assert preflight.status_code == 403 and "access-control-allow-origin" not in preflight.headers
  assert labels(guarded) == before and (export / "intent_model.json").read_text() == on_disk


def test_dns_rebinding_a_foreign_host_is_refused(guarded):
  for host in ("evil.example", "evil.example:80", "attacker.test:8000", "", "[bad"):
    response = guarded.client.get("/labels", headers={"Host": host, **auth()})
    assert response.status_code in (400, 403), (host, response.text)
    if response.status_code == 403:
      assert "is not one this server answers to" in response.json()["error"]
  assert guarded.client.get("/labels", headers={"Host": f"localhost:{guarded.port}", **auth()}).status_code == 200


def test_the_api_key_guards_every_route_but_healthz(guarded):
  assert guarded.client.get("/healthz").status_code == 200
  for key in (None, "wrong", KEY + "x", KEY[:-1]):
    headers = {} if key is None else auth(key)
    for method, path, body in (("GET", "/labels", None), ("POST", "/predict", {"texts": ["hi"]}),
                               ("POST", "/examples", {"texts": ["hi"], "labels": ["x"]})):
      response = guarded.client.request(method, path, json=body, headers=headers)
      assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer", response.text
      assert "API key" in response.json()["error"]
  answer = guarded.client.post("/predict", json={"texts": [TEXTS[3]]}, headers=auth())
  assert answer.status_code == 200 and answer.json()["predictions"][0]["labels"] == ["music"]


def test_an_allowed_origin_gets_cors_headers_and_json_is_required(guarded):
  preflight = guarded.client.options("/predict", headers={
      "Origin": PAGE, "Access-Control-Request-Method": "POST",
      "Access-Control-Request-Headers": "content-type, authorization"})
  assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == PAGE
  answer = guarded.client.post("/predict", json={"texts": ["hi"]}, headers={"Origin": PAGE, **auth()})
  assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == PAGE
  plain = guarded.client.post("/predict", content='{"texts": ["hi"]}', headers={"Content-Type": "text/plain",
                                                                                **auth()})
  assert plain.status_code == 415 and "application/json" in plain.json()["error"]


def test_a_second_persisting_server_on_one_export_exits_naming_the_holder(guarded, export):
  result = subprocess.run([sys.executable, "-m", "fewshot_nlu.serve", "--model", str(export), "--persist",
                           "--port", "0"], cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert result.returncode == 2, result.stderr
  assert f"pid {guarded.process.pid}" in result.stderr and "one persisting server per export" in result.stderr


def test_a_read_only_server_shares_the_export_and_takes_no_examples(guarded, export):
  reader = Server(["fewshot_nlu.serve"], export, export.parent / "reader.log", "--read-only", "--no-warmup")
  try:
    assert reader.client.post("/predict", json={"texts": [TEXTS[1]]}).json()["predictions"][0]["labels"] == \
        ["weather"]
    refused = reader.client.post("/examples", json={"texts": ["hi"], "labels": ["x"]})
    assert refused.status_code == 403 and "read-only" in refused.json()["error"]
  finally:
    reader.stop()
  writer = Server(["fewshot_nlu.serve"], export, export.parent / "writer.log", "--no-warmup")  # no --persist: shares the export
  try:
    live = writer.client.post("/examples", json={"texts": ["hi there"], "labels": ["greeting"]})
    assert live.status_code == 200 and live.json()["persisted"] is False
    kept = writer.client.post("/examples?persist=true", json={"texts": ["hello"], "labels": ["greeting"]})
    assert kept.status_code == 403 and "--persist" in kept.json()["error"]
  finally:
    writer.stop()


def test_host_names_parse_as_browsers_send_them():
  assert security.host_name("LocalHost:8000") == "localhost"
  assert security.host_name("[::1]:8000") == "::1" and security.host_name("127.0.0.1") == "127.0.0.1"
  for bad in (None, "", "[bad", "a b", "x/y", "host:port", "user@host"):
    assert security.host_name(bad) is None, bad
  with pytest.raises(ValueError, match="an origin is scheme://host"):
    security.Access(allowed_origins=("localhost:3000",))
