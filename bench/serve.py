"""HTTP serving: requests/s and p50 / p99 latency of ``python -m fewshot_nlu.serve`` at 1 and 16 concurrent clients.

  python bench/serve.py --model runs/convfit_banking77/export --write
  python bench/serve.py --url http://127.0.0.1:8000          # a server already running (nothing started)

Workload: the first N (default 2,000) utterances of CLINC150's test split, one utterance per POST /predict
(``--texts-per-request``), sent in order by each client. Each concurrency level (``--concurrency``, default 1
and 16) sends ``--requests`` requests from that many clients, each client sending its next request as soon as
its last is answered (closed loop, keep-alive connections). Before timing, every utterance is sent once, alone,
so that each length bucket the workload uses is compiled (not timed). The server runs on this machine
as a subprocess with its default batching (``--batch-wait-ms``), the clients in this process: they share the
CPU, as a co-located client would. ``--client``: ``httpx`` (asyncio + httpx, what a Python service would use) or
``raw`` (keep-alive HTTP/1.1 over asyncio streams, a few lines with no library: a light load generator, as wrk is,
so that on 2 cores the clients take less of the CPU the server is measured on). Also reported: model calls per
request (below 1 when the server gathered concurrent requests into one encode).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import json
import urllib.parse

import httpx

import runner
from encode import DEFAULT_DATA, load_sentences  # the same CLINC150 workload as the encoding benchmark
from runner import REPO


def start_server(model: str, batch_wait_ms: float | None, log: pathlib.Path,
                 server_args: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  cmd = [sys.executable, "-m", "fewshot_nlu.serve", "--model", model, "--port", str(port), "--no-access-log",
         "--log-level", "warning"]
  if batch_wait_ms is not None:
    cmd += ["--batch-wait-ms", str(batch_wait_ms)]
  cmd += list(server_args)
  print("$", " ".join(cmd[1:]), flush=True)
  with open(log, "w") as out:
    process = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                               env=dict(os.environ, TOKENIZERS_PARALLELISM="false"))
  url = f"http://127.0.0.1:{port}"
  deadline = time.monotonic() + 600
  while time.monotonic() < deadline:
    if process.poll() is not None:
      raise SystemExit(f"the server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
    try:
      if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
        return process, url
    except httpx.TransportError:
      time.sleep(0.5)
  process.kill()
  raise SystemExit(f"the server did not answer /healthz in 600 s:\n{log.read_text()[-3000:]}")


def warm_up(url: str, sentences: list[str]) -> float:
  """Sends every sentence once, alone (a batch is padded to its longest text, so only single texts reach every
  length bucket the workload uses and compile it)."""
  start = time.perf_counter()
  with httpx.Client(base_url=url, timeout=600) as client:
    for sentence in sentences:
      client.post("/predict", json={"texts": [sentence]}).raise_for_status()
  return time.perf_counter() - start


class RawConnection:
  """One keep-alive HTTP/1.1 connection that POSTs JSON and reads the answer (status, Content-Length body)."""

  def __init__(self, url: str):
    parsed = urllib.parse.urlsplit(url)
    self.host, self.port = parsed.hostname, parsed.port or 80
    self.reader = self.writer = None

  async def post(self, path: str, payload: dict) -> int:
    """The answer's status (its body read and dropped)."""
    if self.writer is None:
      self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
    body = json.dumps(payload).encode()
    self.writer.write(f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    head = await self.reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    await self.reader.readexactly(length)
    return status

  def close(self) -> None:
    if self.writer is not None:
      self.writer.close()


async def load_test(url: str, sentences: list[str], *, clients: int, requests: int, per_request: int,
                    client_kind: str = "httpx") -> dict:
  """``requests`` POST /predict from ``clients`` closed-loop clients (``client_kind``: httpx or raw); latencies
  in seconds."""
  latencies: list[float] = []
  next_request = 0

  async def client(post) -> None:
    nonlocal next_request
    while next_request < requests:
      i = next_request
      next_request += 1
      texts = [sentences[(i * per_request + j) % len(sentences)] for j in range(per_request)]
      start = time.perf_counter()
      status = await post({"texts": texts})
      latencies.append(time.perf_counter() - start)
      if status != 200:
        raise RuntimeError(f"POST /predict answered {status}")

  limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
  async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as http:
    before = (await http.get("/healthz")).json()["stats"]
    async def httpx_post(payload: dict) -> int:
      return (await http.post("/predict", json=payload)).status_code

    connections = [RawConnection(url) for _ in range(clients)] if client_kind == "raw" else []
    posts = [functools.partial(c.post, "/predict") for c in connections] or [httpx_post] * clients
    start = time.perf_counter()
    await asyncio.gather(*(client(post) for post in posts))
    wall = time.perf_counter() - start
    for c in connections:
      c.close()
    after = (await http.get("/healthz")).json()["stats"]
  cuts = statistics.quantiles(latencies, n=100, method="inclusive")
  calls = after["predict_calls"] - before["predict_calls"]
  return {"clients": clients, "client": client_kind, "requests": requests, "texts_per_request": per_request,
          "wall_s": wall,
          "requests_per_s": requests / wall, "p50_ms": 1000 * cuts[49], "p99_ms": 1000 * cuts[98],
          "mean_ms": 1000 * statistics.fmean(latencies), "model_calls": calls, "calls_per_request": calls / requests}


def table(rows: list[dict]) -> list[str]:
  lines = ["| client | clients | requests | requests/s | p50 ms | p99 ms | mean ms | model calls per request |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
  for r in rows:
    lines.append(f"| {r['client']} | {r['clients']} | {r['requests']} | {r['requests_per_s']:.1f} | {r['p50_ms']:.1f} | "
                 f"{r['p99_ms']:.1f} | {r['mean_ms']:.1f} | {r['calls_per_request']:.2f} |")
  return lines


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  target = parser.add_mutually_exclusive_group(required=True)
  target.add_argument("--model", help="an export folder to serve (the server is started and stopped here)")
  target.add_argument("--url", help="the base URL of a server already running")
  parser.add_argument("--data", default=DEFAULT_DATA, help="the folder holding CLINC150/ (FEWSHOT_NLU_DATA)")
  parser.add_argument("--sentences", type=int, default=2000, help="utterances in the workload (default 2000)")
  parser.add_argument("--requests", type=int, default=1000, help="requests per concurrency level (default 1000)")
  parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16], help="clients (default: 1 16)")
  parser.add_argument("--texts-per-request", type=int, default=1)
  parser.add_argument("--client", nargs="+", choices=("httpx", "raw"), default=["httpx", "raw"],
                      help="load generators, each at every concurrency (default: both)")
  parser.add_argument("--batch-wait-ms", type=float, help="passed to the server (default: the server's)")
  parser.add_argument("--quantize", choices=["int8"], help="passed to the server: int8 encoders (encoders.quantize)")
  parser.add_argument("--runtime", choices=["xla", "onnxruntime"],
                      help="passed to the server: the encoders' runtime (encoders.onnx_inference)")
  parser.add_argument("--write", action="store_true", help="write the table to --output")
  parser.add_argument("--output", default=str(runner.RESULTS / "serve.md"))
  args = parser.parse_args()

  sentences = load_sentences(args.data, args.sentences)
  process = None
  if args.model:
    process, url = start_server(args.model, args.batch_wait_ms, pathlib.Path(tempfile.gettempdir()) / "bench_serve.log",
                                tuple(a for flag in ("quantize", "runtime") if getattr(args, flag)
                                      for a in (f"--{flag}", getattr(args, flag))))
  else:
    url = args.url.rstrip("/")
  try:
    health = httpx.get(f"{url}/healthz", timeout=30).json()
    warm_s = warm_up(url, sentences)
    print(f"warm-up: {warm_s:.1f} s ({len(sentences)} utterances, one per request)", flush=True)
    rows = []
    for client_kind in args.client:
      for clients in args.concurrency:
        rows.append(asyncio.run(load_test(url, sentences, clients=clients, requests=args.requests,
                                          per_request=args.texts_per_request, client_kind=client_kind)))
        print(table(rows[-1:])[-1], flush=True)
  finally:
    if process is not None:
      process.terminate()
      process.wait(timeout=60)
  lines = ["# HTTP serving (bench/serve.py)", "",
           f"`python -m fewshot_nlu.serve` serving {args.model or url} (kind {health['kind']}); one CLINC150 test "
           f"utterance per POST /predict ({args.texts_per_request} per request), {args.requests} requests per row "
           "from closed-loop clients on the same machine (keep-alive; `client`: httpx, or raw asyncio streams), after a warm-up that "
           "compiles every length bucket. Latency is per request, as the client sees it. Model calls per request "
           "below 1: the server gathered concurrent requests into one encode.", "",
           runner.machine(), "", f"Command: `{runner.rerun_command(__file__)}`", "", *table(rows)]
  print("\n".join(lines))
  if args.write:
    pathlib.Path(args.output).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
  main()
