"""A Dialogflow ES agent export (the console's *Export as ZIP*, the zip itself or a folder it was unpacked into)
as annotated examples (``data.annotated``): a team moving a bot off Dialogflow brings its training phrases with
their parameters as they are.

The export holds ``agent.json`` (its ``language``), and per intent ``intents/<name>.json`` beside
``intents/<name>_usersays_<language>.json``: a list of training phrases, each a list of text chunks
(``data``); a chunk with ``meta`` (its entity type, ``@size``, ``@sys.number``) or ``alias`` (the parameter
name) annotates its text. Here:

  * the intent is the intent file's ``name``; a chunk's entity is its ``alias`` (the parameter name the bot's
    fulfilment reads), else its ``meta`` without the ``@``; ``@sys.ignore`` chunks are plain text (Rasa's
    Dialogflow reader does the same);
  * ``entities/<name>_entries_<language>.json`` lists each value with its synonyms: a synonym annotated in a
    phrase takes its entry's value (``Entity.value``), as Rasa's ``synonym`` items do; regular-expression
    entities (``isRegexp``) and synonyms that name other entities (composite entities, ``@...``) are not used,
    and one warning names them;
  * a fallback intent's phrases are the utterances the bot should *not* match (Dialogflow's negative examples):
    they are not learnt as an intent (the out-of-scope threshold rejects what resembles no intent) and one
    warning says so; template-mode phrases (``isTemplate``: ``@size:size pizza`` written as text) are skipped
    with one warning too; an intent without training phrases (events only) is named in one line.

Errors name the file (``agent.zip/intents/x_usersays_en.json`` inside a zip), the line of the phrase and the
field (``data[2]``).
"""

from __future__ import annotations

import json
import logging
import pathlib
import posixpath
import zipfile
from typing import Any, Iterator

from fewshot_nlu.data import annotated
from fewshot_nlu.errors import DataError

log = logging.getLogger(__name__)

IGNORE = "@sys.ignore"


def is_export(path: pathlib.Path) -> bool:
  """A folder holding ``agent.json``, or a ``.zip`` (read as an export: ``read`` says what is missing)."""
  return (path.is_dir() and (path / "agent.json").is_file()) or (path.is_file() and path.suffix == ".zip")


class _Export:
  """The export's files by their path under the agent's root (``agent.json``, ``intents/x.json``), in a folder
  or a zip (whose root may be one folder down, as zipping the unpacked folder makes it)."""

  def __init__(self, path: pathlib.Path):
    self.path = path
    if path.is_dir():
      self._zip = None
      self._root = ""
      self.names = sorted(p.relative_to(path).as_posix() for p in path.rglob("*.json"))
      return
    try:
      self._zip = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
      raise DataError(f"{path}: not a zip file (expected a Dialogflow agent export)") from None
    agents = sorted((n for n in self._zip.namelist() if posixpath.basename(n) == "agent.json"),
                    key=lambda n: n.count("/"))
    if not agents:
      raise DataError(f"{path}: no agent.json in the zip; a Dialogflow ES export (Settings > Export and Import > "
                      "Export as ZIP) holds agent.json, intents/ and entities/")
    self._root = posixpath.dirname(agents[0])
    prefix = f"{self._root}/" if self._root else ""
    self.names = sorted(n[len(prefix):] for n in self._zip.namelist()
                        if n.startswith(prefix) and n.endswith(".json"))

  def where(self, name: str) -> str:
    return str(self.path / name) if self._zip is None else f"{self.path}/{posixpath.join(self._root, name)}"

  def text(self, name: str) -> str:
    if self._zip is None:
      raw = (self.path / name).read_bytes()
    else:
      raw = self._zip.read(posixpath.join(self._root, name))
    try:
      return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
      raise DataError(f"{self.where(name)}: not UTF-8 text (byte {e.start})") from None

  def json(self, name: str, text: str | None = None) -> Any:
    """The JSON value in ``name`` (from ``text``, its contents, where the caller has read them already)."""
    text = self.text(name) if text is None else text
    try:
      return json.loads(text)
    except json.JSONDecodeError as e:
      raise DataError(f"{self.where(name)}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from None

  def items(self, name: str, what: str) -> Iterator[tuple[int, Any]]:
    """(line, item) of each item of the JSON list in ``name`` (the line its item starts on)."""
    text = self.text(name)
    whole = self.json(name, text)
    if not isinstance(whole, list):
      raise DataError(f"{self.where(name)}: expected a list of {what}, got {type(whole).__name__}")
    decoder, i, line = json.JSONDecoder(), text.index("[") + 1, text.count("\n", 0, text.index("[")) + 1
    for item in whole:
      while text[i] in " \t\r\n,":
        line += text[i] == "\n"
        i += 1
      _, end = decoder.raw_decode(text, i)
      yield line, item
      line += text.count("\n", i, end)
      i = end

  def definitions(self, folder: str, kind: str, language: str) -> Iterator[tuple[str, dict, str | None]]:
    """(file, its JSON object, its ``<name>_<kind>_<language>.json`` companion or None) per definition file
    directly under ``folder`` (``intents`` with ``usersays``, ``entities`` with ``entries``)."""
    for name in self.names:
      if name.startswith(f"{folder}/") and name.count("/") == 1 and f"_{kind}_" not in name:
        companion = f"{name[:-len('.json')]}_{kind}_{language}.json"
        yield name, _object(self.json(name), self.where(name)), companion if companion in self.names else None

  def objects(self, name: str, what: str) -> Iterator[tuple[str, dict]]:
    """(``file:line``, the object) per item of the JSON list of objects in ``name``."""
    for line, item in self.items(name, what):
      where = f"{self.where(name)}:{line}"
      yield where, _object(item, where)

  def close(self) -> None:
    if self._zip is not None:
      self._zip.close()


def _object(value: Any, where: str) -> dict:
  if not isinstance(value, dict):
    raise DataError(f"{where}: expected a JSON object, got {type(value).__name__}")
  return value


def read_dialogflow(path: pathlib.Path) -> annotated.Annotated:
  """The training phrases of a Dialogflow ES export (module docstring)."""
  export = _Export(pathlib.Path(path))
  try:
    return _read(export)
  finally:
    export.close()


def _read(export: _Export) -> annotated.Annotated:
  if "agent.json" not in export.names:
    raise DataError(f"{export.path}: no agent.json (a Dialogflow ES export holds agent.json, intents/ and "
                    "entities/)")
  agent = _object(export.json("agent.json"), export.where("agent.json"))
  language = agent.get("language") or "en"
  if not isinstance(language, str):
    raise DataError(f"{export.where('agent.json')}: field 'language': expected a language code, got {language!r}")
  synonyms, ignored = _synonyms(export, language)
  rows: list[annotated.Example] = []
  fallback, templates, silent = [], 0, []
  for name, intent, phrases in export.definitions("intents", "usersays", language):
    title = intent.get("name")
    if not isinstance(title, str) or not title.strip():
      raise DataError(f"{export.where(name)}: field 'name': expected the intent's name, got {title!r}")
    if phrases is None:
      silent.append(title)
      continue
    if intent.get("fallbackIntent"):
      fallback.append(title)
      continue
    for where, phrase in export.objects(phrases, "training phrases"):
      if phrase.get("isTemplate"):
        templates += 1
        continue
      text, entities = _joined(phrase.get("data"), where)
      rows.append(annotated.example(text, title, entities, where, synonyms))
  if fallback:
    annotated.warn_once(log, "%s: fallback intent %s: its training phrases (what the bot should not match) are "
                        "not learnt; the out-of-scope threshold rejects utterances that resemble no intent",
                        export.path, ", ".join(repr(t) for t in fallback))
  if templates:
    annotated.warn_once(log, "%s: %d template-mode training phrase(s) (isTemplate) skipped; write them as "
                        "examples", export.path, templates)
  if ignored:
    annotated.warn_once(log, "%s: not used: %s (the slot filler learns entities from annotated phrases)",
                        export.path, "; ".join(ignored))
  if silent:
    log.info("%s: intents without %s training phrases: %s", export.path, language, ", ".join(sorted(silent)))
  if not rows:
    raise DataError(f"{export.path}: no training phrases in language {language!r} (intents/<name>_usersays_"
                    f"{language}.json)")
  return annotated.Annotated(tuple(rows), synonyms, str(export.path))


def _joined(data: Any, where: str) -> tuple[str, list[dict]]:
  """A training phrase's chunks -> (its text, its entities as character spans)."""
  if not isinstance(data, list) or not data:
    raise DataError(f"{where}: field 'data': expected a non-empty list of text chunks, got {data!r}")
  text, entities = "", []
  for i, chunk in enumerate(data):
    if not isinstance(chunk, dict) or not isinstance(chunk.get("text"), str):
      raise DataError(f"{where}: field 'data[{i}]': expected an object with a 'text' string, got {chunk!r}")
    part = chunk["text"]
    meta, alias = chunk.get("meta"), chunk.get("alias")
    if (meta or alias) and meta != IGNORE:
      entity = alias or str(meta).lstrip("@")
      if not part.strip():
        raise DataError(f"{where}: field 'data[{i}]': the {entity!r} parameter annotates no text ({part!r})")
      entities.append({"start": len(text), "end": len(text) + len(part), "entity": entity})
    text += part
  return text, entities


def _synonyms(export: _Export, language: str) -> tuple[dict[str, str], list[str]]:
  """(surface value, lower case -> entry value) from every entity's entries, and what was not used."""
  synonyms: dict[str, str] = {}
  regexp, composite = [], []
  for name, entity, entries in export.definitions("entities", "entries", language):
    if entries is None:
      continue
    title = str(entity.get("name") or posixpath.basename(name)[:-len(".json")])
    if entity.get("isRegexp"):
      regexp.append(title)
      continue
    for where, entry in export.objects(entries, "entity entries"):
      value = entry.get("value")
      if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}: field 'value': expected the entry's value, got {value!r}")
      for synonym in entry.get("synonyms") or [value]:
        if not isinstance(synonym, str):
          raise DataError(f"{where}: field 'synonyms': expected strings, got {synonym!r}")
        if "@" in synonym:
          composite.append(title)
        elif synonym.strip():
          synonyms[synonym.strip().lower()] = value
  ignored = []
  if regexp:
    ignored.append(f"regexp entities {', '.join(sorted(set(regexp)))}")
  if composite:
    ignored.append(f"composite entries of {', '.join(sorted(set(composite)))}")
  return synonyms, ignored
