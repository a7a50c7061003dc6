"""Annotated utterances in the forms chatbot teams keep them: an intent and entities as character spans of the
raw text. One reader per form, each with errors naming the file, the line and the field:

  * Rasa ``nlu.yml`` (``read_rasa``; a project's ``data/`` folder: ``read_rasa_folder``, every NLU file in it):
    ``- intent: NAME`` items whose examples carry ``[value](entity)``,
    ``[value](entity:synonym)`` or ``[value]{"entity": ..., "role": ..., "value": ...}`` annotations;
    ``synonym`` items map surface values to a canonical value (kept, ``Annotated.synonyms``); ``regex`` and
    ``lookup`` items are not used, and one warning names them;
  * JSON lines or CSV (``read_table``): ``text``, ``intent`` (optional) and ``entities``, a list of
    ``{"start", "end", "entity"[, "value", "role"]}`` character spans (in CSV a JSON list in one cell), and
    optionally ``requested_slot``: the slot(s) the bot had just asked for when the user said the text (a name
    or a list of names; in CSV names separated by spaces), which the slot filler learns to weigh
    (``parse(..., requested_slots=...)``);
  * a ``seq.in`` / ``seq.out`` / ``label`` folder (``read_joint_folder``, the ``joint_nlu_folder`` layout): its
    whitespace tokens joined by single spaces, each BIO slot an entity at the characters it covers;
  * a Dialogflow ES agent export, its ``.zip`` or the folder it unpacks to (``data.dialogflow``): training
    phrases with their parameters, entity entries' synonyms.

``read(source)`` takes any of them by path, or a list of dicts in the table's form (``{"text", "intent",
"entities"}``). Every example becomes an ``Example``; ``to_bio`` turns one into words with character offsets
(``data.words``, split at every entity boundary) and BIO tags, the form the slot filler trains and retrieves
on. Nothing is dropped or relabelled: overlapping entities, spans outside the text, a ``value`` that is not
the text it spans, an empty text are errors.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import pathlib
import re
import reprlib
from typing import Any, Sequence

from fewshot_nlu.data import words as word_lib
from fewshot_nlu.data.intent_folder import csv_rows, json_objects
from fewshot_nlu.errors import DataError, MissingDataFile

log = logging.getLogger(__name__)

ROLE_SEPARATOR = ":"  # a slot label is "entity" or "entity:role"
_WARNED: set[str] = set()


def warn_once(logger: logging.Logger, message: str, *args) -> None:
  """A warning about the data, logged once per process: a fit reads its examples more than once (the checks, the
  intents, the slots), and a person should see each problem once."""
  text = message % args
  if text not in _WARNED:
    _WARNED.add(text)
    logger.warning(text)


@dataclasses.dataclass(frozen=True)
class Entity:
  """Characters [start, end) of the example's text, of type ``entity`` (with a ``role`` where the annotation
  gives one); ``value`` is the canonical value (a synonym's target; else the text it spans)."""

  start: int
  end: int
  entity: str
  value: str
  role: str | None = None

  @property
  def label(self) -> str:
    """The slot label the slot filler learns: ``entity`` or ``entity:role``."""
    return self.entity if self.role is None else f"{self.entity}{ROLE_SEPARATOR}{self.role}"

  def to_dict(self) -> dict[str, Any]:
    out = {"start": self.start, "end": self.end, "entity": self.entity, "value": self.value}
    if self.role is not None:
      out["role"] = self.role
    return out


@dataclasses.dataclass(frozen=True)
class Example:
  text: str
  intent: str | None
  entities: tuple[Entity, ...]
  where: str  # file:line (or "examples[i]"), for messages
  requested_slot: tuple[str, ...] = ()  # the slot(s) the bot had just asked for (module docstring)

  def to_dict(self) -> dict[str, Any]:
    out = {"text": self.text, "intent": self.intent, "entities": [e.to_dict() for e in self.entities]}
    if self.requested_slot:
      out["requested_slot"] = list(self.requested_slot)
    return out


@dataclasses.dataclass(frozen=True)
class Annotated:
  """What a reader found: the examples, the synonyms (surface value, lower case -> canonical value) and what it
  did not use."""

  examples: tuple[Example, ...]
  synonyms: dict[str, str] = dataclasses.field(default_factory=dict)
  source: str = ""

  @property
  def intents(self) -> list[str]:
    return sorted({e.intent for e in self.examples if e.intent is not None})

  @property
  def slot_labels(self) -> list[str]:
    return sorted({x.label for e in self.examples for x in e.entities})

  def value_synonyms(self) -> dict[str, str]:
    """The declared synonyms, and every annotated surface whose value is another (lower case -> value)."""
    found = {e.text[x.start:x.end].lower(): x.value for e in self.examples for x in e.entities
             if x.value != e.text[x.start:x.end]}
    return {**found, **self.synonyms}


def split_label(label: str) -> tuple[str, str | None]:
  """``entity:role`` -> (entity, role); ``entity`` -> (entity, None)."""
  entity, separator, role = label.partition(ROLE_SEPARATOR)
  return (entity, role) if separator else (entity, None)


# ----------------------------------------------------------------------------------------- one example

def _word_at(text: str, i: int) -> str:
  """The run of letters and digits around character boundary ``i`` of ``text``."""
  start, end = i, i
  while start > 0 and text[start - 1].isalnum():
    start -= 1
  while end < len(text) and text[end].isalnum():
    end += 1
  return text[start:end]


def example(text: Any, intent: Any, entities: Any, where: str, synonyms: dict[str, str] | None = None,
            requested_slot: Any = None) -> Example:
  """One checked example (module docstring); ``where`` names it in errors."""
  if not isinstance(text, str) or not text.strip():
    raise DataError(f"{where}: field 'text': {text!r} is not a non-empty string")
  if intent is not None and (not isinstance(intent, str) or not intent.strip()):
    raise DataError(f"{where}: field 'intent': {intent!r} is not a non-empty string (leave it out for an "
                    "example without an intent)")
  if entities is None:
    entities = []
  if not isinstance(entities, list):
    raise DataError(f"{where}: field 'entities': expected a list of {{start, end, entity}} objects, got "
                    f"{type(entities).__name__}")
  checked = []
  for i, e in enumerate(entities):
    field = f"{where}: field 'entities[{i}]'"
    if not isinstance(e, dict) or not {"start", "end", "entity"} <= set(e):
      raise DataError(f"{field}: expected an object with start, end and entity, got {e!r}")
    unknown = sorted(set(e) - {"start", "end", "entity", "value", "role", "group", "confidence", "extractor"})
    if unknown:
      raise DataError(f"{field}: unknown key {unknown[0]!r} (the keys are start, end, entity, value, role)")
    start, end = e["start"], e["end"]
    if not (isinstance(start, int) and isinstance(end, int)) or isinstance(start, bool) or isinstance(end, bool):
      raise DataError(f"{field}: start and end must be integers (character offsets), got {start!r}, {end!r}")
    if not 0 <= start < end <= len(text):
      raise DataError(f"{field}: characters [{start}, {end}) are not a span of the {len(text)}-character text")
    surface = text[start:end]
    lead, trail = len(surface) - len(surface.lstrip()), len(surface) - len(surface.rstrip())
    if lead + trail >= len(surface):
      raise DataError(f"{field}: characters [{start}, {end}) hold only whitespace")
    start, end = start + lead, end - trail  # an annotation that took a space along
    name = e["entity"]
    if not isinstance(name, str) or not name.strip() or any(c.isspace() for c in name) or ROLE_SEPARATOR in name:
      raise DataError(f"{field}: entity {name!r} must be a non-empty name without spaces or "
                      f"{ROLE_SEPARATOR!r}")
    cut = [i for i in (start, end) if 0 < i < len(text) and text[i - 1].isalnum() and text[i].isalnum()]
    if cut:  # most likely an offset one character off; learnt as written (a value inside a word can be meant)
      warn_once(log, "%s: entities[%d]: entity %r at [%d, %d) is %r, cutting the word %r: an offset off by a "
                "character? (learnt as annotated)", where, i, name, start, end, text[start:end], _word_at(text, cut[0]))
    role = e.get("role")
    if role is not None and (not isinstance(role, str) or not role.strip() or any(c.isspace() for c in role)):
      raise DataError(f"{field}: role {role!r} must be a non-empty name without spaces")
    value = e.get("value")
    if value is not None and not isinstance(value, str):
      raise DataError(f"{field}: value {value!r} must be a string")
    canonical = value if value is not None else (synonyms or {}).get(text[start:end].lower(), text[start:end])
    checked.append(Entity(start, end, name, canonical, role))
  checked.sort(key=lambda x: (x.start, x.end))
  for a, b in zip(checked, checked[1:]):
    if b.start < a.end:
      raise DataError(f"{where}: entities {a.entity!r} [{a.start}, {a.end}) and {b.entity!r} [{b.start}, {b.end}) "
                      "overlap; a slot filler tags each character with one entity at most")
  return Example(text, intent.strip() if intent is not None else None, tuple(checked), where,
                 requested_names(requested_slot, f"{where}: field 'requested_slot'"))


def requested_names(value: Any, field: str, error: type[Exception] = DataError) -> tuple[str, ...]:
  """A ``requested_slot`` value (None, a slot name, or a list of names) as a tuple of names: the one reader of
  it, for examples (``DataError``) and the server's ``/model/parse`` body (its ``BadRequest``); ``field`` names
  where the value came from in the error."""
  names = [] if value is None else [value] if isinstance(value, str) else value
  if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() and not any(c.isspace() for c in
                                                                                            n.strip()) for n in names):
    raise error(f"{field}: expected a slot name (one word) or a list of slot names, got {reprlib.repr(value)}")
  return tuple(n.strip() for n in names)


def labels_named(names: Sequence[str] | str | None, labels: Sequence[str]) -> frozenset | None:
  """The slot labels (``entity`` or ``entity:role``) that slot names stand for: a name's own label and its role
  labels; None when none does (no name, or a slot the examples never annotate)."""
  names = {names} if isinstance(names, str) else set(names or ())
  found = frozenset(l for l in labels if l in names or split_label(l)[0] in names)
  return found or None


def to_bio(ex: Example) -> tuple[list[word_lib.Span], list[str], list[str]]:
  """(word character spans, words, BIO tags) of an example: its words split at every entity boundary, and a
  B-/I- tag of the entity's ``label`` on the words each entity covers."""
  spans = word_lib.split_at(word_lib.word_spans(ex.text), [o for e in ex.entities for o in (e.start, e.end)])
  tags = ["O"] * len(spans)
  for e in ex.entities:
    cover = word_lib.covering(spans, e.start, e.end)
    if cover is None:  # cannot happen after split_at, but a silent mis-tag would be worse than an error
      raise DataError(f"{ex.where}: entity {e.entity!r} [{e.start}, {e.end}) does not cover whole words")
    i, j = cover
    tags[i:j] = [f"B-{e.label}"] + [f"I-{e.label}"] * (j - i - 1)
  return spans, word_lib.words(ex.text, spans), tags


def support_rows(examples: Sequence[Example]) -> list[dict]:
  """The examples as a slot filler's support utterances: ``tokens`` (words split at entity boundaries), BIO
  ``tags``, ``intent``, and the raw ``text`` with each word's character ``offsets`` in it, so what a prediction
  retrieved is shown as the user wrote it."""
  rows = []
  for e in examples:
    spans, tokens, tags = to_bio(e)
    row = {"tokens": tokens, "tags": tags, "intent": e.intent, "text": e.text,
           "offsets": [[int(a), int(b)] for a, b in spans]}
    if e.requested_slot:
      row["requested"] = list(e.requested_slot)
    rows.append(row)
  return rows


# --------------------------------------------------------------------------------------------- readers

def read(source: Any) -> Annotated:
  """Annotated examples from a path (``.yml`` / ``.yaml``: Rasa; ``.jsonl`` / ``.csv``: table; a Dialogflow
  export's ``.zip`` or a folder with its ``agent.json``; a folder with ``seq.in``: the ``seq.in`` / ``seq.out`` /
  ``label`` layout; another folder with YAML files: a Rasa project's ``data/``, every NLU file in it) or a list of
  ``{"text", "intent", "entities"}`` dicts."""
  if isinstance(source, (str, pathlib.Path)):
    path = pathlib.Path(source).expanduser()
    if not path.exists():
      raise MissingDataFile(f"{path}: no such file or folder")
    from fewshot_nlu.data import dialogflow
    if dialogflow.is_export(path):
      return dialogflow.read_dialogflow(path)
    if path.is_dir():
      yaml_files = _rasa_project_yaml(path)
      return read_rasa_folder(path, yaml_files) if yaml_files else read_joint_folder(path)
    if path.suffix in (".yml", ".yaml"):
      return read_rasa(path)
    if path.suffix in (".jsonl", ".csv"):
      return read_table(path)
    raise DataError(f"{path}: expected a Rasa nlu.yml, a .jsonl / .csv with text, intent and entities, a "
                    "Dialogflow export (.zip, or its folder with agent.json) or a seq.in / seq.out / label folder")
  if isinstance(source, Annotated):
    return source
  if isinstance(source, (list, tuple)):
    rows = []
    for i, row in enumerate(source):
      if not isinstance(row, dict):
        raise DataError(f"examples[{i}]: expected a dict with text, intent and entities, got {type(row).__name__}")
      _known(row, f"examples[{i}]")
      rows.append(example(row.get("text"), row.get("intent"), row.get("entities"), f"examples[{i}]",
                          requested_slot=row.get("requested_slot")))
    return _nonempty(Annotated(tuple(rows), source="examples"))
  raise DataError(f"examples: expected a path or a list of dicts, got {type(source).__name__}")


def _known(row: dict, where: str) -> None:
  unknown = sorted(set(row) - {"text", "intent", "entities", "requested_slot"})
  if unknown:
    raise DataError(f"{where}: unknown field {unknown[0]!r} (the fields are text, intent, entities, "
                    "requested_slot)")


def _nonempty(annotated: Annotated) -> Annotated:
  if not annotated.examples:
    raise DataError(f"{annotated.source}: no examples")
  return annotated


def read_table(path: pathlib.Path) -> Annotated:
  """JSON lines, or a CSV whose ``entities`` cell is a JSON list (module docstring)."""
  rows = []
  if path.suffix == ".jsonl":
    for where, record in json_objects(path, "text, intent and entities"):
      _known(record, where)
      rows.append(example(record.get("text"), record.get("intent"), record.get("entities"), where,
                          requested_slot=record.get("requested_slot")))
  else:
    header, records = csv_rows(path)
    if "text" not in header:
      raise DataError(f"{path}:1: the header must name a 'text' column (and 'intent', 'entities'); it names "
                      f"{header}")
    _known(dict.fromkeys(header), f"{path}:1")
    for where, record in records:
      cell = (record.get("entities") or "").strip()
      try:
        entities = json.loads(cell) if cell else []
      except json.JSONDecodeError as e:
        raise DataError(f"{where}: field 'entities': not a JSON list ({e.msg} at column {e.colno})") from None
      requested = (record.get("requested_slot") or "").split()
      rows.append(example(record.get("text"), record.get("intent") or None, entities, where,
                          requested_slot=requested or None))
  return _nonempty(Annotated(tuple(rows), source=str(path)))


def read_joint_folder(path: pathlib.Path, multi_intent: bool = False) -> Annotated:
  """A ``seq.in`` / ``seq.out`` / ``label`` folder: text = its tokens joined by spaces, each BIO slot an entity.
  A multi-intent label (``a#b``) is an error, or with ``multi_intent`` the joined label as one intent."""
  from fewshot_nlu.data.bio import bio_spans
  from fewshot_nlu.data.joint_folder import read_joint_split
  rows = []
  for e in read_joint_split(path):
    starts, offset = [], 0
    for token in e["tokens"]:
      starts.append(offset)
      offset += len(token) + 1
    entities = [{"start": starts[a], "end": starts[b] + len(e["tokens"][b]), "entity": label}
                for label, a, b in bio_spans(e["tags"])]
    if len(e["intents"]) > 1 and not multi_intent:
      raise DataError(f"{path / 'label'}:{e['index'] + 1}: {len(e['intents'])} intents "
                      f"({'#'.join(e['intents'])}); the joint model takes one intent per utterance")
    rows.append(example(" ".join(e["tokens"]), "#".join(e["intents"]), entities, f"{path / 'seq.in'}:{e['index'] + 1}"))
  return _nonempty(Annotated(tuple(rows), source=str(path)))


# ---------------------------------------------------------------------------------------------- Rasa

_ANNOTATION = re.compile(r"\[(?P<text>[^\]\[]+)\](?:\((?P<short>[^)]*)\)|(?P<json>\{[^{}]*\}))")


def parse_markup(line: str, where: str) -> tuple[str, list[dict]]:
  """A Rasa training example (``book [two](people) seats``) -> (its plain text, its entities as offsets)."""
  text, entities, position = [], [], 0
  length = 0
  for m in _ANNOTATION.finditer(line):
    text.append(line[position:m.start()])
    length += m.start() - position
    surface = m.group("text")
    entity: dict[str, Any] = {"start": length, "end": length + len(surface)}
    if m.group("short") is not None:
      name, _, synonym = m.group("short").partition(":")
      entity["entity"] = name.strip()
      if synonym.strip():
        entity["value"] = synonym.strip()
    else:
      try:
        spec = json.loads(m.group("json"))
      except json.JSONDecodeError as e:
        raise DataError(f"{where}: annotation {m.group(0)!r}: not valid JSON ({e.msg})") from None
      if not isinstance(spec, dict) or "entity" not in spec:
        raise DataError(f"{where}: annotation {m.group(0)!r} must name its \"entity\"")
      entity.update({k: v for k, v in spec.items() if k in ("entity", "role", "value", "group")})
    entities.append(entity)
    text.append(surface)
    length += len(surface)
    position = m.end()
  text.append(line[position:])
  plain = "".join(text)
  if "[" in plain and "](" in line[position:]:
    raise DataError(f"{where}: an annotation is not closed: {line!r}")
  return plain, entities


def read_rasa(path: pathlib.Path) -> Annotated:
  """A Rasa NLU training data file (module docstring)."""
  return _rasa_examples([path], str(path))


def _rasa_examples(paths: Sequence[pathlib.Path], source: str, texts: Sequence[str] | None = None) -> Annotated:
  """The examples of Rasa NLU files (``texts``: their contents, when already read), each annotated value mapped
  by the synonyms of all of them (as Rasa does)."""
  raw: list[tuple[str, str, str]] = []  # (intent, example line, where)
  synonyms: dict[str, str] = {}
  for i, path in enumerate(paths):
    items, found = _rasa_items(path, None if texts is None else texts[i])
    raw += items
    synonyms.update(found)
  rows = []
  for intent, line, where in raw:
    text, entities = parse_markup(line, where)
    rows.append(example(text, intent, entities, where, synonyms))
  return _nonempty(Annotated(tuple(rows), synonyms, source))


def _rasa_items(path: pathlib.Path, source: str | None = None) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
  """(intent, example line, file:line) of one Rasa NLU file's intent examples (``source``: its text, when already
  read), and its synonyms (surface, lower case -> value); one warning names its ``regex`` / ``lookup`` items."""
  import yaml
  if source is None:
    source = path.read_text(encoding="utf-8")
  try:
    root = yaml.compose(source, Loader=yaml.SafeLoader)
  except yaml.YAMLError as e:
    mark = getattr(e, "problem_mark", None)
    line = f":{mark.line + 1}" if mark is not None else ""
    raise DataError(f"{path}{line}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
  items = _mapping(root, path).get("nlu")
  if items is None or not isinstance(items, yaml.SequenceNode):
    raise DataError(f"{path}: no 'nlu:' list (a Rasa NLU file holds 'nlu:' items with intent and examples)")
  raw: list[tuple[str, str, str]] = []
  synonyms: dict[str, str] = {}
  ignored: dict[str, list[str]] = {}
  for item in items.value:
    fields = _mapping(item, path)
    where = f"{path}:{item.start_mark.line + 1}"
    kinds = [k for k in ("intent", "synonym", "regex", "lookup") if k in fields]
    if len(kinds) != 1:
      raise DataError(f"{where}: an nlu item needs one of intent, synonym, regex, lookup (got "
                      f"{sorted(fields)})")
    kind, name = kinds[0], _scalar(fields[kinds[0]], path)
    if "examples" not in fields:
      raise DataError(f"{where}: {kind} {name!r} has no examples")
    lines = list(_example_lines(fields["examples"], path))
    if kind == "intent":
      raw += [(name, text, line_where) for text, line_where in lines]
    elif kind == "synonym":
      synonyms.update({text.strip().lower(): name for text, _ in lines})
    else:
      ignored.setdefault(kind, []).append(name)
  if ignored:
    warn_once(log, "%s: not used: %s (the slot filler learns entities from annotated examples; add examples that "
              "show the values instead)", path, "; ".join(f"{k} {', '.join(v)}" for k, v in ignored.items()))
  return raw, synonyms


_NLU_KEY = re.compile(r"^nlu\s*:", re.M)


def _yaml_files(folder: pathlib.Path) -> list[pathlib.Path]:
  return sorted(p for p in folder.rglob("*") if p.suffix in (".yml", ".yaml") and p.is_file())


def _rasa_project_yaml(path: pathlib.Path) -> list[pathlib.Path]:
  """The YAML files of a folder ``read`` takes as a Rasa project's ``data/``; none for a file, a Dialogflow export
  or a ``seq.in`` folder (read otherwise)."""
  from fewshot_nlu.data import dialogflow
  if not path.is_dir() or (path / "seq.in").exists() or dialogflow.is_export(path):
    return []
  return _yaml_files(path)


def _rasa_nlu_files(files: Sequence[pathlib.Path]) -> tuple[list[pathlib.Path], list[str]]:
  """The Rasa NLU files among YAML ``files`` (a top-level ``nlu:`` key) and their texts."""
  nlu, texts = [], []
  for file in files:
    text = file.read_text(encoding="utf-8", errors="replace")
    if _NLU_KEY.search(text):
      nlu.append(file)
      texts.append(text)
  return nlu, texts


def read_rasa_folder(folder: pathlib.Path, files: Sequence[pathlib.Path] | None = None) -> Annotated:
  """Every Rasa NLU file (a YAML file with a top-level ``nlu:`` key) under ``folder`` (``files``: its YAML files,
  when already listed), as ``rasa train`` reads a project's ``data/``: their examples in file order, every file's
  synonyms applied to all of them; the other YAML files (domain, stories, rules, config) are passed over."""
  files = _yaml_files(folder) if files is None else files
  nlu, texts = _rasa_nlu_files(files)
  if not nlu:
    raise DataError(f"{folder}: none of its {len(files)} YAML files is a Rasa NLU file (a top-level 'nlu:' list; "
                    f"found {', '.join(f.name for f in files[:5])}{', ...' if len(files) > 5 else ''}); give the "
                    "NLU file, a .jsonl / .csv, a Dialogflow export or a seq.in / seq.out / label folder")
  return _rasa_examples(nlu, str(folder), texts)


def files_read(path: pathlib.Path) -> list[pathlib.Path] | None:
  """The files ``read(path)`` takes its examples from, where a folder holds others too: a Rasa project's NLU
  files (its domain, stories and rules change nothing the model learns); None: every file of ``path``."""
  files = _rasa_project_yaml(pathlib.Path(path).expanduser())
  return _rasa_nlu_files(files)[0] if files else None


def _mapping(node, path: pathlib.Path) -> dict:
  import yaml
  if not isinstance(node, yaml.MappingNode):
    line = f":{node.start_mark.line + 1}" if node is not None else ""
    raise DataError(f"{path}{line}: expected a mapping (key: value)")
  return {_scalar(k, path): v for k, v in node.value}


def _scalar(node, path: pathlib.Path) -> str:
  import yaml
  if not isinstance(node, yaml.ScalarNode) or not str(node.value).strip():
    raise DataError(f"{path}:{node.start_mark.line + 1}: expected a name")
  return str(node.value).strip()


def _example_lines(node, path: pathlib.Path):
  """(example text, file:line) of an ``examples:`` block (``|`` text of ``- `` lines, or a list of strings /
  ``{text: ...}`` mappings)."""
  import yaml
  if isinstance(node, yaml.ScalarNode):
    first = node.start_mark.line + (1 if node.style in ("|", ">") else 0)
    for offset, line in enumerate(str(node.value).splitlines()):
      stripped = line.strip()
      if not stripped or stripped.startswith("#"):
        continue
      if not stripped.startswith("- "):
        raise DataError(f"{path}:{first + offset + 1}: an example line starts with '- ', got {stripped!r}")
      yield stripped[2:].strip(), f"{path}:{first + offset + 1}"
  elif isinstance(node, yaml.SequenceNode):
    for entry in node.value:
      if isinstance(entry, yaml.MappingNode):
        entry = _mapping(entry, path).get("text")
      if not isinstance(entry, yaml.ScalarNode):
        raise DataError(f"{path}:{node.start_mark.line + 1}: an example is a string or a mapping with 'text'")
      yield str(entry.value).strip(), f"{path}:{entry.start_mark.line + 1}"
  else:
    raise DataError(f"{path}:{node.start_mark.line + 1}: examples must be a '|' block of '- ' lines or a list")


def jsonl(examples: Sequence[Example]) -> str:
  """The examples as the table's JSON lines (what ``read_table`` reads back)."""
  return "".join(json.dumps(e.to_dict(), ensure_ascii=False) + "\n" for e in examples)


def write_tables(tables: dict[str, Annotated], root: pathlib.Path) -> pathlib.Path:
  """Writes each ``<name>.jsonl`` into a folder named by the content under ``root`` (``user_examples.write_files``:
  the same examples, the same folder, untouched) and returns it."""
  from fewshot_nlu.data.user_examples import write_files
  return write_files({name: jsonl(t.examples).encode("utf-8") for name, t in tables.items()}, root)
