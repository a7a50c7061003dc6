"""Request bodies read and checked before anything reaches the model: JSON objects with known fields only,
non-empty string texts within the server's limits. Every refusal is a ``BadRequest`` whose message names the
field at fault (``texts[3]: ...``); the app answers it as a 4xx JSON error."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from fewshot_nlu.data.annotated import requested_names


class BadRequest(Exception):
  """A request the client must change; ``status`` is the HTTP status to answer with (4xx)."""

  def __init__(self, message: str, status: int = 400):
    super().__init__(message)
    self.status = status


@dataclasses.dataclass(frozen=True)
class Limits:
  """What one request may ask of the server."""

  max_texts: int = 256  # texts per request (predict or examples)
  max_chars: int = 2000  # characters per text
  max_neighbours: int = 100  # pieces of evidence per prediction

  def __post_init__(self):
    for field in dataclasses.fields(self):
      if getattr(self, field.name) < 1:
        raise ValueError(f"{field.name} must be >= 1, got {getattr(self, field.name)}")

  @property
  def max_body_bytes(self) -> int:
    """A body larger than any valid request can be (texts and labels at their limits, every character a
    ``\\uXXXX`` escape), refused before it is read whole."""
    return 2 * self.max_texts * (6 * self.max_chars + 8) + 65536


@dataclasses.dataclass(frozen=True)
class PredictRequest:
  texts: list[str]
  options: dict[str, Any]  # keyword arguments for model.predict that the client gave (neighbours, reject)


@dataclasses.dataclass(frozen=True)
class ExamplesRequest:
  texts: list[str]
  labels: list  # a label per text (a slot filler's: its BIO tags, a string or a list of strings; nlu: an intent or null)
  persist: bool
  entities: list | None = None  # nlu models: per text, its entities as {start, end, entity[, value, role]} spans

  def annotated(self) -> list[dict]:
    """The examples as ``data.annotated`` dicts (for a joint ``nlu`` model)."""
    entities = self.entities or [[] for _ in self.texts]
    return [{"text": t, "intent": l, "entities": e} for t, l, e in zip(self.texts, self.labels, entities)]


@dataclasses.dataclass(frozen=True)
class ParseRequest:
  text: str
  message_id: str | None
  requested_slot: tuple[str, ...] = ()  # the slot(s) the bot has just asked for (a Rasa form's requested_slot)


def parse_json(body: bytes) -> dict:
  """The body as a JSON object."""
  if not body.strip():
    raise BadRequest("empty body; send a JSON object, e.g. {\"texts\": [\"...\"]}")
  try:
    value = json.loads(body.decode("utf-8"), parse_constant=_no_constant, object_pairs_hook=_no_duplicate_keys)
  except UnicodeDecodeError as e:
    raise BadRequest(f"the body is not UTF-8 ({e.reason} at byte {e.start})") from None
  except json.JSONDecodeError as e:
    raise BadRequest(f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
  except _NotJSON as e:
    raise BadRequest(f"malformed JSON: {e} is not a JSON value") from None
  except RecursionError:
    raise BadRequest("malformed JSON: nested too deeply") from None
  if not isinstance(value, dict):
    raise BadRequest(f"the body must be a JSON object, got {_kind(value)}")
  _require_unicode(value, "")
  return value


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
  keys = [k for k, _ in pairs]
  repeated = next((k for k in keys if keys.count(k) > 1), None)
  if repeated is not None:
    raise BadRequest(f"malformed JSON: the key {repeated!r} appears twice in one object; give each field once")
  return dict(pairs)


def _require_unicode(value: Any, where: str) -> None:
  """Every string in ``value`` is text that UTF-8 can carry: JSON's ``\\ud800`` escapes can spell lone UTF-16
  surrogates, which are no characters (and which no tokenizer can read)."""
  if isinstance(value, str):
    try:
      value.encode("utf-8")
    except UnicodeEncodeError as e:
      raise BadRequest(f"{where or 'the body'}: not valid Unicode text (a lone surrogate "
                       f"{value[e.start]!r} at character {e.start})") from None
  elif isinstance(value, dict):
    for key, item in value.items():
      _require_unicode(key, where or "a key")
      _require_unicode(item, f"{where}.{key}" if where else key)
  elif isinstance(value, list):
    for i, item in enumerate(value):
      _require_unicode(item, f"{where}[{i}]")


def predict_request(body: dict, limits: Limits) -> PredictRequest:
  """``{"texts": [...], "neighbours": int?, "reject": bool?}``."""
  _known_fields(body, required=("texts",), optional=("neighbours", "reject"))
  options = {}
  if "neighbours" in body:
    n = body["neighbours"]
    if not _is_int(n) or not 0 <= n <= limits.max_neighbours:
      raise BadRequest(f"neighbours: expected an integer from 0 to {limits.max_neighbours}, got {json.dumps(n)}")
    options["neighbours"] = n
  if "reject" in body:
    if not isinstance(body["reject"], bool):
      raise BadRequest(f"reject: expected true or false, got {json.dumps(body['reject'])}")
    options["reject"] = body["reject"]
  return PredictRequest(texts(body["texts"], "texts", limits), options)


def examples_request(body: dict, query: dict[str, str], limits: Limits) -> ExamplesRequest:
  """``{"texts": [...], "labels": [...], "entities": [...]?}``, or the examples as Python's ``add_examples``
  takes them, ``{"examples": [{"text": ..., "intent": ..., "entities": [...]}, ...]}``; and the query
  ``?persist=true|false``."""
  unknown = sorted(set(query) - {"persist"})
  if unknown:
    raise BadRequest(f"unknown query parameter {unknown[0]!r}; the only one is 'persist'")
  persist = query.get("persist", "false").lower()
  if persist not in ("true", "false", "1", "0"):
    raise BadRequest(f"persist: expected true or false, got {query['persist']!r}")
  if "examples" in body:
    _known_fields(body, required=("examples",), optional=())
    body = _columns(body["examples"])
  _known_fields(body, required=("texts", "labels"), optional=("entities",))
  found = texts(body["texts"], "texts", limits)
  labels = body["labels"]
  if not isinstance(labels, list):
    raise BadRequest(f"labels: expected a list with a label per text, got {_kind(labels)}")
  if len(labels) != len(found):
    raise BadRequest(f"labels: {len(labels)} labels for {len(found)} texts; give one label per text")
  entities = body.get("entities")
  if entities is not None and (not isinstance(entities, list) or len(entities) != len(found)):
    raise BadRequest(f"entities: expected a list with one list of {{start, end, entity}} spans per text, got "
                     f"{_short(entities)}")
  for i, label in enumerate(labels):
    if label is None and entities is not None:
      continue  # an example with entities and no intent (a joint model's)
    parts = label if isinstance(label, list) else [label]
    if not parts or not all(isinstance(p, str) and p.strip() for p in parts) or len(" ".join(parts)) > limits.max_chars:
      raise BadRequest(f"labels[{i}]: expected a non-empty string (a slot filler's: its BIO tags, a string or a "
                       f"list of strings) of at most {limits.max_chars} characters, got {_short(label)}")
  return ExamplesRequest(found, labels, persist in ("true", "1"), entities)


def _columns(examples: Any) -> dict:
  """``{"examples": [{"text", "intent"?, "entities"?}, ...]}`` as the ``texts`` / ``labels`` / ``entities``
  columns (``entities`` only where an example has some)."""
  if not isinstance(examples, list) or not examples:
    raise BadRequest(f"examples: expected a non-empty list of {{text, intent, entities}} objects, got "
                     f"{_short(examples)}")
  columns = {"texts": [], "labels": [], "entities": []}
  for i, example in enumerate(examples):
    if not isinstance(example, dict):
      raise BadRequest(f"examples[{i}]: expected an object {{text, intent, entities}}, got {_kind(example)}")
    unknown = sorted(set(example) - {"text", "intent", "entities"})
    if unknown:
      raise BadRequest(f"examples[{i}]: unknown field {unknown[0]!r}; the fields are text, intent, entities")
    if "text" not in example:
      raise BadRequest(f"examples[{i}]: missing field 'text'")
    if example.get("intent") is None and not example.get("entities"):
      raise BadRequest(f"examples[{i}]: give an 'intent', 'entities' or both")
    columns["texts"].append(example["text"])
    columns["labels"].append(example.get("intent"))
    columns["entities"].append(example.get("entities", []))
  if not any(columns["entities"]):
    del columns["entities"]
  return columns


def parse_request(body: dict, limits: Limits) -> ParseRequest:
  """Rasa's ``/model/parse`` body: ``{"text": "...", "message_id": "..."?, "requested_slot": "..."?}``
  (``requested_slot``, ours: the slot the bot has just asked for, a name or a list of names, as a Rasa form's
  ``requested_slot``)."""
  _known_fields(body, required=("text",), optional=("message_id", "requested_slot"))
  text = body["text"]
  if not isinstance(text, str):
    raise BadRequest(f"text: expected a string, got {_kind(text)}")
  if not text.strip():
    raise BadRequest("text: empty text; give words to parse")
  if len(text) > limits.max_chars:
    raise BadRequest(f"text: {len(text)} characters, more than this server's limit of {limits.max_chars}", status=413)
  message_id = body.get("message_id")
  if message_id is not None and not isinstance(message_id, str):
    raise BadRequest(f"message_id: expected a string, got {_kind(message_id)}")
  return ParseRequest(text, message_id, requested_names(body.get("requested_slot"), "requested_slot", BadRequest))


def texts(value: Any, field: str, limits: Limits) -> list[str]:
  """A non-empty list of at most ``max_texts`` non-blank strings of at most ``max_chars`` characters."""
  if not isinstance(value, list):
    raise BadRequest(f"{field}: expected a list of strings, got {_kind(value)}")
  if not value:
    raise BadRequest(f"{field}: empty list; give at least one text")
  if len(value) > limits.max_texts:
    raise BadRequest(f"{field}: {len(value)} texts, more than this server's limit of {limits.max_texts} per "
                     "request; split them over several requests", status=413)
  for i, text in enumerate(value):
    if not isinstance(text, str):
      raise BadRequest(f"{field}[{i}]: expected a string, got {_kind(text)}")
    if not text.strip():
      raise BadRequest(f"{field}[{i}]: empty text; give words to classify")
    if len(text) > limits.max_chars:
      raise BadRequest(f"{field}[{i}]: {len(text)} characters, more than this server's limit of "
                       f"{limits.max_chars}", status=413)
  return value


def _known_fields(body: dict, *, required: tuple[str, ...], optional: tuple[str, ...]) -> None:
  unknown = sorted(set(body) - set(required) - set(optional))
  if unknown:
    raise BadRequest(f"unknown field {unknown[0]!r}; the fields are {', '.join(required + optional)}")
  missing = [f for f in required if f not in body]
  if missing:
    raise BadRequest(f"missing field {missing[0]!r}")


def _is_int(value: Any) -> bool:
  return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: Any) -> str:
  """A JSON value's type, in JSON's words."""
  if value is None:
    return "null"
  return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
          dict: "an object"}.get(type(value), type(value).__name__)


def _short(value: Any) -> str:
  text = json.dumps(value, ensure_ascii=False)
  return text if len(text) <= 60 else text[:57] + "..."


class _NotJSON(ValueError):
  """NaN / Infinity, which Python's json module reads but JSON does not have."""


def _no_constant(name: str):
  raise _NotJSON(name)
