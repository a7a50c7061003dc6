"""Serve an exported model over HTTP (see ``fewshot_nlu.serve`` for the routes):

  python -m fewshot_nlu.serve --model runs/convfit_banking77/export --port 8000
  curl -s localhost:8000/predict -H 'Content-Type: application/json' -d '{"texts": ["I lost my card"]}'

Safe by default: it listens on 127.0.0.1, answers only requests naming an allowed host (localhost names and the
bound address; ``--allow-host``), refuses requests from browser pages of other origins (``--allow-origin``
names the ones allowed: CSRF, DNS rebinding) and bodies that are not ``application/json``. ``--api-key`` (or
``FEWSHOT_NLU_API_KEY``) requires ``Authorization: Bearer <key>`` on every route but ``/healthz``;
``--read-only`` refuses new examples (``serve.security``).

Concurrent requests are gathered into one model call (``--batch-wait-ms``, ``--max-batch``). Examples added
through /examples live in the served model; with ``--persist``, ``?persist=true`` also writes every example the
model holds into ``--model`` (atomically: a kill meanwhile leaves the export as it was). A persisting server
holds an exclusive lock on the export: a second one exits naming the holder's pid; servers that do not persist
may share an export.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys

from fewshot_nlu.encoders import QUANTIZATIONS, RUNTIMES
import time


def parse_args(argv: list[str] | None):
  from fewshot_nlu.serve.bodies import Limits
  defaults = Limits()
  parser = argparse.ArgumentParser(prog="python -m fewshot_nlu.serve", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--model", required=True, help="an export/ folder written by a training run")
  parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0 for "
                      "every interface)")
  parser.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
  parser.add_argument("--max-texts", type=int, default=defaults.max_texts,
                      help=f"texts per request at most (default {defaults.max_texts})")
  parser.add_argument("--max-chars", type=int, default=defaults.max_chars,
                      help=f"characters per text at most (default {defaults.max_chars})")
  parser.add_argument("--max-batch", type=int, default=64,
                      help="texts per batched model call at most (default 64; one request is never split)")
  parser.add_argument("--batch-wait-ms", type=float, default=2.0,
                      help="how long a prediction waits for others to share its model call (default 2)")
  parser.add_argument("--no-warmup", action="store_true",
                      help="skip the prediction at start-up that compiles the encoder for short texts")
  parser.add_argument("--api-key", help="require 'Authorization: Bearer KEY' on every route but /healthz "
                      "(default: $FEWSHOT_NLU_API_KEY if set, else no key)")
  parser.add_argument("--read-only", action="store_true", help="refuse POST /examples")
  parser.add_argument("--persist", action="store_true",
                      help="let /examples?persist=true write into --model (takes an exclusive lock on the export)")
  parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                      help="a browser origin allowed to call the server, e.g. http://localhost:3000 (repeatable; "
                      "default: none, so no web page can)")
  parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                      help="a Host name the server answers to besides localhost names and --host (repeatable)")
  parser.add_argument("--quantize", choices=QUANTIZATIONS,
                      help="serve with the encoders' dense layers as int8 products: "
                      "lower latency on a CPU, predictions close to float32's (encoders.quantize)")
  parser.add_argument("--runtime", choices=RUNTIMES, default="xla",
                      help="onnxruntime: serve with the encoders run by ONNX Runtime, the same predictions "
                      "at lower latency on a CPU (needs the onnxruntime extra; encoders.onnx_inference)")
  parser.add_argument("--verbose", action="store_true", help="also show libraries' start-up and probing lines")
  parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
  parser.add_argument("--no-access-log", action="store_true", help="do not log every request")
  return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
  args = parse_args(argv)
  os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
  logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s:     %(name)s: %(message)s")
  from fewshot_nlu import console, errors
  console.set_verbose(args.verbose)
  console.quiet_backend_logs()
  try:
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
  except ImportError as e:
    print(f"error: the server needs the serve extra ({e.name} is missing): pip install 'fewshot_nlu[serve]'",
          file=sys.stderr)
    return errors.EXIT_USER_ERROR
  from fewshot_nlu.methods import runner
  from fewshot_nlu.defaults import common
  from fewshot_nlu.predict import load_model
  from fewshot_nlu.serve.bodies import Limits
  from fewshot_nlu.serve.security import Access
  with contextlib.ExitStack() as held:
    try:
      limits = Limits(max_texts=args.max_texts, max_chars=args.max_chars)
      if args.max_batch < 1 or args.batch_wait_ms < 0 or not 0 <= args.port < 65536:
        raise errors.UserError(f"--max-batch must be >= 1 (got {args.max_batch}), --batch-wait-ms >= 0 (got "
                               f"{args.batch_wait_ms}), --port from 0 to 65535 (got {args.port})")
      if args.persist and args.read_only:
        raise errors.UserError("--persist and --read-only: a read-only server takes no examples to persist")
      try:
        access = Access.for_server(args.host, hosts=args.allow_host, origins=args.allow_origin,
                                   api_key=args.api_key, read_only=args.read_only)
      except ValueError as e:
        raise errors.UserError(str(e)) from None
      if args.persist:
        held.enter_context(persist_lock(args.model))
      runner.enable_compilation_cache(common.compilation_cache_dir())  # warm-up programs persist across restarts
      model = load_model(args.model, args.quantize, args.runtime)
    except (OSError, ValueError, NotImplementedError, errors.UserError) as e:
      print(errors.one_line(e) or f"error: {e}", file=sys.stderr)
      return errors.EXIT_USER_ERROR
    return serve(args, model, limits, access)


SERVE_LOCK = ".serve.lock"


def persist_lock(model_dir: str):
  """The exclusive lock a ``--persist`` server holds on its export (``<export>/.serve.lock``)."""
  import pathlib
  from fewshot_nlu import errors, workdirs
  path = pathlib.Path(model_dir) / SERVE_LOCK
  if not path.parent.is_dir():
    raise errors.UserError(f"--model {model_dir}: no such directory")
  return workdirs.exclusive(path, lambda holder: errors.UserError(
      f"--persist: {model_dir} is served with --persist by another process (pid {holder}, holding {path}); one "
      "persisting server per export: stop it, or serve without --persist"))


WARM_UP_TOKENS = 48  # utterances up to this many tokens (a chatbot's traffic) compile before the first request


def warm_up_shapes(max_batch: int) -> list[tuple[int, int]]:
  """The (rows, tokens) shapes ``warm_up`` compiles: each length bucket up to ``WARM_UP_TOKENS`` at one row and at
  the largest gathered batch (``max_batch`` rows, rounded down to a power of two: full encoder batches pad to the
  fine buckets), and each coarse bucket at the powers of two of rows between (the short gathered batches;
  ``encoders.inference``)."""
  from fewshot_nlu.data import batching
  buckets = [b for b in batching.length_buckets(WARM_UP_TOKENS, batching.INFERENCE_BUCKETS) if b <= WARM_UP_TOKENS]
  largest = 1 << (max_batch.bit_length() - 1)
  shapes, rows = [], 1
  while rows <= largest:
    shapes += [(rows, length) for length in (buckets if rows in (1, largest) else batching.coarse_buckets(buckets))]
    rows *= 2
  return shapes


def warm_up(model, max_batch: int) -> int:
  """Compiles what the server's model calls run before the first request pays for it: one prediction per shape of
  ``warm_up_shapes``, under a progress bar. The programs land in the persistent compilation cache
  (``$FEWSHOT_NLU_JAX_CACHE``), so a restart loads them. Returns the calls made."""
  from fewshot_nlu import console
  shapes = warm_up_shapes(max_batch)
  logging.getLogger("fewshot_nlu.serve").info(
      "warming up: compiling the model's programs for %d request shapes before serving (once: later starts load "
      "them from the cache; --no-warmup skips)", len(shapes))
  for rows, length in console.bar(shapes, desc="warm-up: compiling", unit="shape"):
    model.predict([" ".join(["hello"] * max(1, length - 2))] * rows)  # [CLS] + words + [SEP]: that bucket
  return len(shapes)


def serve(args, model, limits, access) -> int:
  import uvicorn
  from fewshot_nlu.serve.app import create_app
  log = logging.getLogger("fewshot_nlu.serve")
  if not args.no_warmup:
    try:
      start = time.perf_counter()
      calls = warm_up(model, args.max_batch)
      log.info("warmed up: %d shapes compiled in %.1f s (cached for later starts)", calls,
               time.perf_counter() - start)
    except Exception as e:  # a model without examples yet still serves /examples
      log.warning("warm-up prediction failed (%s: %s); serving anyway", type(e).__name__, e)
  log.info("serving %s (kind %s, %d labels%s)", args.model, model.kind, len(model.labels),
           (f", {args.quantize} encoders" if args.quantize else "")
           + (f", {args.runtime} runtime" if args.runtime != "xla" else ""))
  if access.api_key is None and args.host not in ("127.0.0.1", "localhost", "::1"):
    log.warning("listening on %s without an API key: anyone who reaches this address can %s; set --api-key or "
                "FEWSHOT_NLU_API_KEY", args.host, "query the model" if access.read_only else
                "query the model and add examples (--read-only refuses them)")
  app = create_app(model, args.model, limits=limits, max_batch_texts=args.max_batch,
                   batch_wait_s=args.batch_wait_ms / 1000, access=access, persist=args.persist)
  uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                                access_log=not args.no_access_log)).run()
  return 0


if __name__ == "__main__":
  sys.exit(main())
