"""The Starlette application: four routes over one ``ModelWorker``.

Every answer is JSON. A request the client must change gets a 4xx ``{"error": "<field>: <what>"}`` (400; 413
past a size limit; 404 / 405 for unknown routes and methods); an error the model reports about its input (a
ValueError, NotImplementedError or UserError: a bad BIO sequence, a model that cannot take examples) is a 400
with its message; anything else is logged with its traceback and answered 500, and the server goes on.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import math
import pathlib
import time
from typing import Any, Awaitable, Callable

import numpy as np
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from fewshot_nlu import errors
from fewshot_nlu.serve import bodies
from fewshot_nlu.serve.security import Access, RequestGuard
from fewshot_nlu.serve.worker import ModelWorker, Stopped

log = logging.getLogger(__name__)

MODEL_ERRORS = (ValueError, NotImplementedError, errors.UserError)  # what a model raises about its input


def supports_reject(model) -> bool:
  """Whether ``model.predict`` takes ``reject=`` (out-of-scope rejection) AND the model carries a calibrated
  threshold for it (``models.rejection``: an export written before calibration, or never calibrated, has none)."""
  try:
    takes_reject = "reject" in inspect.signature(model.predict).parameters
  except (TypeError, ValueError):
    return False
  return takes_reject and getattr(model, "rejection", None) is not None


def create_app(model, model_dir: str | pathlib.Path, *, limits: bodies.Limits = bodies.Limits(),
               max_batch_texts: int = 64, batch_wait_s: float = 0.002, access: Access = Access(),
               persist: bool = False) -> Starlette:
  """The server for ``model`` (loaded from ``model_dir``), behind ``access`` (``serve.security``: hosts, origins,
  API key, read-only). ``persist``: ``/examples?persist=true`` writes the examples into ``model_dir`` (the caller
  holds the export's lock, ``serve.__main__``); without it such a request is refused."""
  worker = ModelWorker(model, max_batch_texts=max_batch_texts, batch_wait_s=batch_wait_s)
  model_dir = pathlib.Path(model_dir)
  can_reject = supports_reject(model)
  started = time.time()

  async def predict(request: Request) -> JSONResponse:
    asked = bodies.predict_request(await read_body(request, limits), limits)
    options = dict(asked.options)
    if options.get("reject") and not can_reject:
      raise bodies.BadRequest(f"reject: this model (kind {model.kind!r}) cannot reject out-of-scope texts (it "
                              "has no calibrated threshold); send the request without \"reject\"")
    if not options.get("reject", True):
      del options["reject"]  # False is every model's default, also of those without the argument
    predictions = await model_call(worker.predict(asked.texts, **options))
    return JSONResponse(finite({"predictions": [{"text": text, "labels": list(p.labels), **p.to_dict()}
                                                for text, p in zip(asked.texts, predictions)]}))

  async def examples(request: Request) -> JSONResponse:
    asked = bodies.examples_request(await read_body(request, limits), dict(request.query_params), limits)
    if asked.persist and not persist:
      raise bodies.BadRequest("persist: this server does not write to its export; start it with --persist (one "
                              "persisting server per export) or send the examples without ?persist=true", status=403)

    def add() -> dict:  # on the model's thread, alone
      before = set(model.labels) | set(getattr(model, "slot_labels", ()))
      if model.kind == "nlu":
        model.add_examples(asked.annotated())
      elif asked.entities is not None:
        raise bodies.BadRequest(f"entities: this model (kind {model.kind!r}) takes no entities; a joint nlu model "
                                "does")
      else:
        model.add_examples(asked.texts, asked.labels)
      if asked.persist:
        try:
          model.save_rows(model_dir)
        except Exception as e:
          raise NotPersisted(f"the examples were added to the live model but NOT written to {model_dir}: "
                             f"{type(e).__name__}: {e}") from e
      now = list(model.labels) + [l for l in getattr(model, "slot_labels", ()) if l not in model.labels]
      return {"added": len(asked.texts), "new_labels": [l for l in now if l not in before],
              "labels": len(model.labels), "examples": _size(model), "persisted": asked.persist}

    return JSONResponse(await model_call(worker.exclusive(add)))

  async def parse(request: Request) -> JSONResponse:
    """Rasa's ``/model/parse``: one text's intent, ranking and entities (a joint ``nlu`` model; an intent model
    answers the intent part)."""
    asked = bodies.parse_request(await read_body(request, limits), limits)
    options = {"reject": True} if can_reject else {}
    if asked.requested_slot:
      if model.kind != "nlu":
        raise bodies.BadRequest(f"requested_slot: this {model.kind} model fills no slots; leave it out")
      # one text with its own context: not batched with other requests
      [prediction] = await model_call(worker.exclusive(
          lambda: model.predict([asked.text], requested_slots=[list(asked.requested_slot)], **options)))
    else:
      [prediction] = await model_call(worker.predict([asked.text], **options))
    answer = prediction.to_dict() if model.kind == "nlu" else intent_parse(asked.text, prediction)
    if asked.message_id is not None:
      answer["message_id"] = asked.message_id
    return JSONResponse(finite(answer))

  async def labels(request: Request) -> JSONResponse:
    listed = await model_call(worker.exclusive(lambda: (list(model.labels), _size(model))))
    return JSONResponse({"kind": model.kind, "labels": listed[0], "examples": listed[1]})

  async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok", "kind": model.kind, "model": str(model_dir), "reject": can_reject,
                         "uptime_s": round(time.time() - started, 3), "queued": worker.queued,
                         "stats": dict(worker.stats)})

  @contextlib.asynccontextmanager
  async def lifespan(app):
    await worker.start()
    try:
      yield
    finally:
      await worker.stop()

  routes = [Route("/predict", answered(predict), methods=["POST"]),
            Route("/model/parse", answered(parse), methods=["POST"]),
            Route("/examples", answered(examples), methods=["POST"]),
            Route("/labels", answered(labels), methods=["GET"]),
            Route("/healthz", answered(healthz), methods=["GET"])]
  middleware = [Middleware(RequestGuard, access=access),
                Middleware(CORSMiddleware, allow_origins=access.allowed_origins, allow_methods=["GET", "POST"],
                           allow_headers=["Content-Type", "Authorization"])]
  app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware,
                  exception_handlers={HTTPException: http_error, Exception: internal_error})
  app.state.worker = worker
  return app


def intent_parse(text: str, prediction) -> dict:
  """An intent model's prediction in Rasa's ``/model/parse`` shape: its intent, no entities."""
  if not hasattr(prediction, "label"):
    raise bodies.BadRequest("/model/parse answers with an intent; this model predicts none (use /predict)")
  intent = {"name": prediction.label, "confidence": prediction.score}
  return {"text": text, "intent": intent, "intent_ranking": [intent], "entities": []}


class NotPersisted(RuntimeError):
  """``save_rows`` failed after the examples were added live."""


async def read_body(request: Request, limits: bodies.Limits) -> dict:
  """The request's JSON object; a body past ``limits.max_body_bytes`` is refused (413) as soon as its
  Content-Length or its bytes so far show it, before it is read whole."""
  too_large = bodies.BadRequest(f"the body is larger than this server's limit of {limits.max_body_bytes} bytes",
                                status=413)
  declared = request.headers.get("content-length", "")
  if declared.isdigit() and int(declared) > limits.max_body_bytes:
    raise too_large
  chunks, size = [], 0
  try:
    async for chunk in request.stream():
      size += len(chunk)
      if size > limits.max_body_bytes:
        raise too_large
      chunks.append(chunk)
  except ClientDisconnect:
    raise bodies.BadRequest("the client disconnected before sending the whole body") from None
  return bodies.parse_json(b"".join(chunks))


async def model_call(call: Awaitable) -> Any:
  """Awaits a worker job; the model's complaints about the request become 400s."""
  try:
    return await call
  except Stopped as e:
    raise HTTPException(503, str(e)) from None
  except NotPersisted:
    raise
  except MODEL_ERRORS as e:
    raise bodies.BadRequest(f"the model refused the request: {e}") from None


def answered(handler: Callable[[Request], Awaitable[JSONResponse]]):
  """``handler`` with its errors answered as JSON: 4xx for the client's, 500 (logged) for the rest."""

  @functools.wraps(handler)
  async def endpoint(request: Request) -> JSONResponse:
    try:
      return await handler(request)
    except bodies.BadRequest as e:
      return error_response(e.status, str(e))
    except HTTPException as e:  # 503 when stopping
      return error_response(e.status_code, str(e.detail))
    except Exception as e:
      return await internal_error(request, e)

  return endpoint


def error_response(status: int, message: str) -> JSONResponse:
  return JSONResponse({"error": message}, status_code=status)


async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
  """404 / 405 and other HTTP errors raised outside the routes, as JSON."""
  detail = exc.detail
  if exc.status_code == 404:
    detail = (f"no route {request.url.path}; the routes are POST /predict, POST /model/parse, POST /examples, "
              "GET /labels, GET /healthz")
  elif exc.status_code == 405:
    detail = f"{request.method} {request.url.path}: method not allowed"
  return JSONResponse({"error": detail}, status_code=exc.status_code, headers=exc.headers)


async def internal_error(request: Request, exc: Exception) -> JSONResponse:
  log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
  return error_response(500, f"internal error: {type(exc).__name__}: {exc}")


def finite(value: Any) -> Any:
  """``value`` with NaN and infinities as null (JSON has neither; a label without examples scores -inf) and
  numpy scalars as Python numbers."""
  if isinstance(value, np.generic):
    value = value.item()
  if isinstance(value, float):
    return value if math.isfinite(value) else None
  if isinstance(value, dict):
    return {k: finite(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [finite(v) for v in value]
  return value


def _size(model) -> int | None:
  """Stored examples (None for a model that keeps none)."""
  try:
    return len(model)
  except TypeError:
    return None
