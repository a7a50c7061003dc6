"""Serve an exported model over HTTP (see ``fewshot_nlu.serve`` for the routes):

  python -m fewshot_nlu.serve --model runs/convfit_banking77/export --port 8000
  curl -s localhost:8000/predict -d '{"texts": ["I lost my card"]}'
  curl -s 'localhost:8000/examples?persist=true' -d '{"texts": ["my card got eaten"], "labels": ["card_swallowed"]}'

Concurrent requests are gathered into one model call (``--batch-wait-ms``, ``--max-batch``). Examples added
through /examples live in the served model; ``?persist=true`` also writes every example the model holds into
``--model`` (atomically: a kill meanwhile leaves the export as it was). One server per export when persisting.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys


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
  parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
  parser.add_argument("--no-access-log", action="store_true", help="do not log every request")
  return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
  args = parse_args(argv)
  os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
  logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s:     %(name)s: %(message)s")
  from fewshot_nlu import errors
  try:
    import starlette  # noqa: F401
    import uvicorn
  except ImportError as e:
    print(f"error: the server needs the serve extra ({e.name} is missing): pip install 'fewshot_nlu[serve]'",
          file=sys.stderr)
    return errors.EXIT_USER_ERROR
  from fewshot_nlu.predict import load_model
  from fewshot_nlu.serve.app import create_app
  from fewshot_nlu.serve.bodies import Limits
  try:
    limits = Limits(max_texts=args.max_texts, max_chars=args.max_chars)
    if args.max_batch < 1 or args.batch_wait_ms < 0 or not 0 <= args.port < 65536:
      raise errors.UserError(f"--max-batch must be >= 1 (got {args.max_batch}), --batch-wait-ms >= 0 (got "
                             f"{args.batch_wait_ms}), --port from 0 to 65535 (got {args.port})")
    model = load_model(args.model)
  except (OSError, ValueError, NotImplementedError, errors.UserError) as e:
    print(errors.one_line(e) or f"error: {e}", file=sys.stderr)
    return errors.EXIT_USER_ERROR
  log = logging.getLogger("fewshot_nlu.serve")
  if not args.no_warmup:
    try:
      model.predict(["hello"])
    except Exception as e:  # a model without examples yet still serves /examples
      log.warning("warm-up prediction failed (%s: %s); serving anyway", type(e).__name__, e)
  log.info("serving %s (kind %s, %d labels)", args.model, model.kind, len(model.labels))
  app = create_app(model, args.model, limits=limits, max_batch_texts=args.max_batch,
                   batch_wait_s=args.batch_wait_ms / 1000)
  uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                                access_log=not args.no_access_log)).run()
  return 0


if __name__ == "__main__":
  sys.exit(main())
