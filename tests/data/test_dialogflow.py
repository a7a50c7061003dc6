"""The Dialogflow ES export reader (``data.dialogflow``): an export written here as the console writes one
(pretty-printed JSON, one training phrase per list item), read as a folder and as a zip."""

from __future__ import annotations

import json
import logging
import pathlib
import zipfile

import pytest

from fewshot_nlu.data import annotated, dialogflow
from fewshot_nlu.errors import DataError


def _phrase(*chunks) -> dict:
  """A training phrase: plain strings, or (text, meta, alias) triples for annotated chunks."""
  data = []
  for chunk in chunks:
    if isinstance(chunk, str):
      data.append({"text": chunk, "userDefined": False})
    else:
      text, meta, alias = chunk
      data.append({"text": text, "meta": meta, "alias": alias, "userDefined": True})
  return {"id": "x", "data": data, "isTemplate": False, "count": 0, "lang": "en", "updated": 0}


PHRASES = {
    "order_pizza": [_phrase("can I get a ", ("large", "@size", "size"), " ", ("veggie", "@topping", "topping"), "?"),
                    _phrase(("two", "@sys.number", "amount"), " pizzas, ", ("big", "@size", "size"), " please"),
                    _phrase("a ", ("medium", "@size", ""), " one for ", ("tonight", "@sys.ignore", ""))],
    "Default Welcome Intent": [_phrase("hello there!"), _phrase("hi")],
    "Default Fallback Intent": [_phrase("what's the weather")],
}


def write_export(root: pathlib.Path) -> pathlib.Path:
  (root / "intents").mkdir(parents=True)
  (root / "entities").mkdir()
  (root / "agent.json").write_text(json.dumps({"displayName": "pizza", "language": "en"}, indent=2))
  for name, phrases in PHRASES.items():
    intent = {"id": "i", "name": name, "auto": True, "responses": []}
    if "Fallback" in name:
      intent["fallbackIntent"] = True
    (root / "intents" / f"{name}.json").write_text(json.dumps(intent, indent=2))
    (root / "intents" / f"{name}_usersays_en.json").write_text(json.dumps(phrases, indent=2))
  (root / "intents" / "goodbye.json").write_text(json.dumps({"name": "goodbye"}, indent=2))  # events only
  (root / "entities" / "size.json").write_text(json.dumps({"name": "size", "isRegexp": False}, indent=2))
  (root / "entities" / "size_entries_en.json").write_text(json.dumps([
      {"value": "large", "synonyms": ["large", "big", "family size"]},
      {"value": "medium", "synonyms": ["medium", "@sys.number"]}], indent=2))
  (root / "entities" / "zip.json").write_text(json.dumps({"name": "zip", "isRegexp": True}, indent=2))
  (root / "entities" / "zip_entries_en.json").write_text(json.dumps([{"value": "[0-9]{5}", "synonyms": []}]))
  return root


def _zip(folder: pathlib.Path, path: pathlib.Path, under: str = "") -> pathlib.Path:
  with zipfile.ZipFile(path, "w") as z:
    for file in sorted(folder.rglob("*")):
      if file.is_file():
        z.write(file, f"{under}{file.relative_to(folder).as_posix()}")
  return path


def test_an_export_gives_texts_intents_and_entities_at_exact_offsets(tmp_path, caplog):
  folder = write_export(tmp_path / "agent")
  with caplog.at_level(logging.WARNING):
    data = annotated.read(folder)
  rows = {e.text: e for e in data.examples}
  assert sorted(rows) == ["a medium one for tonight", "can I get a large veggie?", "hello there!", "hi",
                          "two pizzas, big please"]
  first = rows["can I get a large veggie?"]
  assert first.intent == "order_pizza"
  assert [(x.entity, x.start, x.end, first.text[x.start:x.end]) for x in first.entities] == [
      ("size", 12, 17, "large"), ("topping", 18, 24, "veggie")]
  second = rows["two pizzas, big please"]
  assert [(x.entity, x.value) for x in second.entities] == [("amount", "two"), ("size", "large")]  # a synonym
  third = rows["a medium one for tonight"]  # no alias: the meta names it; @sys.ignore is plain text
  assert [(x.entity, x.start, x.end) for x in third.entities] == [("size", 2, 8)]
  assert rows["hi"].intent == "Default Welcome Intent" and rows["hi"].entities == ()
  assert data.synonyms["family size"] == "large"
  assert data.intents == ["Default Welcome Intent", "order_pizza"]  # the fallback's phrases are not an intent
  text = caplog.text
  assert "fallback intent 'Default Fallback Intent'" in text and "regexp entities zip" in text
  assert "composite entries of size" in text
  assert first.where.endswith("order_pizza_usersays_en.json:2")  # the line its phrase starts on
  assert rows["two pizzas, big please"].where.endswith(f":{2 + json.dumps(PHRASES['order_pizza'][0], indent=2).count(chr(10)) + 1}")


@pytest.mark.parametrize("under", ["", "pizza-agent/"])
def test_the_zip_reads_as_its_folder(tmp_path, under):
  folder = write_export(tmp_path / "agent")
  zipped = annotated.read(_zip(folder, tmp_path / "agent.zip", under))
  unpacked = annotated.read(folder)
  assert [e.to_dict() for e in zipped.examples] == [e.to_dict() for e in unpacked.examples]
  assert zipped.examples[0].where.startswith(f"{tmp_path / 'agent.zip'}/{under}intents/")


def test_template_phrases_are_skipped_with_a_warning(tmp_path, caplog):
  folder = write_export(tmp_path / "agent")
  path = folder / "intents" / "order_pizza_usersays_en.json"
  phrases = json.loads(path.read_text()) + [{"data": [{"text": "@size:size pizza"}], "isTemplate": True}]
  path.write_text(json.dumps(phrases, indent=2))
  with caplog.at_level(logging.WARNING):
    data = annotated.read(folder)
  assert "1 template-mode training phrase(s)" in caplog.text
  assert "@size:size pizza" not in {e.text for e in data.examples}


@pytest.mark.parametrize("phrase, message", [
    ({"data": [{"txt": "hi"}]}, "order_pizza_usersays_en.json:2: field 'data[0]': expected an object with a 'text'"),
    ({"data": []}, "order_pizza_usersays_en.json:2: field 'data': expected a non-empty list"),
    ({"data": [{"text": "a "}, {"text": " ", "meta": "@size", "alias": "size"}]},
     "order_pizza_usersays_en.json:2: field 'data[1]': the 'size' parameter annotates no text"),
])
def test_bad_phrases_name_the_file_line_and_field(tmp_path, phrase, message):
  folder = write_export(tmp_path / "agent")
  (folder / "intents" / "order_pizza_usersays_en.json").write_text(json.dumps([phrase], indent=2))
  with pytest.raises(DataError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
    annotated.read(folder)


def test_broken_json_and_a_zip_without_an_agent_are_named(tmp_path):
  folder = write_export(tmp_path / "agent")
  (folder / "intents" / "order_pizza_usersays_en.json").write_text('[\n  {"data": [\n    {"text": "hi"}\n  ]\n')
  with pytest.raises(DataError, match=r"order_pizza_usersays_en.json:5: not valid JSON"):
    annotated.read(folder)
  other = tmp_path / "other.zip"
  with zipfile.ZipFile(other, "w") as z:
    z.writestr("intents/a.json", "{}")
  with pytest.raises(DataError, match="no agent.json in the zip"):
    annotated.read(other)
  (tmp_path / "bad.zip").write_text("not a zip")
  with pytest.raises(DataError, match="not a zip file"):
    annotated.read(tmp_path / "bad.zip")


def test_is_export_tells_an_agent_from_a_joint_folder(tmp_path):
  assert dialogflow.is_export(write_export(tmp_path / "agent"))
  (tmp_path / "joint").mkdir()
  assert not dialogflow.is_export(tmp_path / "joint")
