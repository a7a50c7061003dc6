"""Annotated examples in the forms teams keep them (data.annotated): Rasa nlu.yml, JSON lines / CSV with character
spans, seq.in / seq.out / label folders; errors that name the file, the line and the field."""

from __future__ import annotations

import json
import logging
import pathlib

import pytest

from fewshot_nlu.data import annotated
from fewshot_nlu.errors import DataError, MissingDataFile

RASA = """version: "3.1"
nlu:
- intent: order_pizza
  examples: |
    - I'd like a [large](size) [pepperoni](topping) pizza, please!
    - two [margherita]{"entity": "topping", "role": "extra"} pizzas to [10 Downing St.](address)
    - can I get a [medium](size) [veggie](topping:vegetarian)?
- intent: greet
  examples: |
    - hi
- synonym: vegetarian
  examples: |
    - veg
- regex: zipcode
  examples: |
    - \\d{5}
- lookup: city
  examples: |
    - london
"""


def test_rasa_nlu_yml_gives_text_intent_and_entities_at_exact_offsets(tmp_path, caplog):
  path = tmp_path / "nlu.yml"
  path.write_text(RASA)
  with caplog.at_level(logging.WARNING):
    data = annotated.read(path)
  assert "not used: regex zipcode; lookup city" in caplog.text
  first, second, third, greet = data.examples
  assert first.text == "I'd like a large pepperoni pizza, please!" and first.intent == "order_pizza"
  assert [(first.text[e.start:e.end], e.entity, e.value) for e in first.entities] == [
      ("large", "size", "large"), ("pepperoni", "topping", "pepperoni")]
  assert first.where == f"{path}:5" and greet.where == f"{path}:10" and greet.entities == ()
  assert [(e.label, e.value) for e in second.entities] == [("topping:extra", "margherita"), ("address", "10 Downing St.")]
  assert [(e.entity, e.value) for e in third.entities] == [("size", "medium"), ("topping", "vegetarian")]
  assert data.synonyms == {"veg": "vegetarian"} and data.intents == ["greet", "order_pizza"]
  spans, tokens, tags = annotated.to_bio(second)
  assert tokens == ["two", "margherita", "pizzas", "to", "10", "Downing", "St", "."]
  assert tags == ["O", "B-topping:extra", "O", "O", "B-address", "I-address", "I-address", "I-address"]
  assert annotated.split_label("topping:extra") == ("topping", "extra")


def test_a_synonym_maps_an_unmarked_value():
  data = annotated.read([{"text": "a veg one", "intent": "x", "entities": [{"start": 2, "end": 5, "entity": "t"}]}])
  assert data.examples[0].entities[0].value == "veg"  # no synonyms given: the text itself
  ex = annotated.example("a VEG one", "x", [{"start": 2, "end": 5, "entity": "t"}], "w", {"veg": "vegetarian"})
  assert ex.entities[0].value == "vegetarian"


def test_jsonl_csv_and_a_joint_folder_read_alike(tmp_path):
  rows = [{"text": "book a table for two at 7pm", "intent": "book",
           "entities": [{"start": 17, "end": 20, "entity": "people"}, {"start": 24, "end": 27, "entity": "time"}]},
          {"text": "hello", "intent": "greet", "entities": []}]
  (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  (tmp_path / "a.csv").write_text("text,intent,entities\n" + "".join(
      f"\"{r['text']}\",{r['intent']},\"{json.dumps(r['entities']).replace(chr(34), chr(34) * 2)}\"\n" for r in rows))
  folder = tmp_path / "joint"
  folder.mkdir()
  (folder / "seq.in").write_text("book a table for two at 7pm\nhello\n")
  (folder / "seq.out").write_text("O O O O B-people O B-time\nO\n")
  (folder / "label").write_text("book\ngreet\n")
  read = [annotated.read(p).examples for p in (tmp_path / "a.jsonl", tmp_path / "a.csv", folder)]
  as_dicts = [[e.to_dict() for e in examples] for examples in read]
  assert as_dicts[0] == as_dicts[1] == as_dicts[2]
  assert as_dicts[0][0]["entities"][0] == {"start": 17, "end": 20, "entity": "people", "value": "two"}
  assert annotated.read(rows).examples[0].to_dict() == as_dicts[0][0]


@pytest.mark.parametrize("entities,message", [
    ([{"start": 3, "end": 99, "entity": "x"}], r"a.jsonl:1: field 'entities\[0\]': characters \[3, 99\) are not a "
                                               r"span of the 10-character text"),
    ([{"start": 0, "end": 4, "entity": "x"}, {"start": 2, "end": 6, "entity": "y"}], r"a.jsonl:1: entities 'x' .* overlap"),
    ([{"start": 0, "end": 4}], r"a.jsonl:1: field 'entities\[0\]': expected an object with start, end and entity"),
    ([{"start": "0", "end": 4, "entity": "x"}], "start and end must be integers"),
    ([{"start": 0, "end": 4, "entity": "two words"}], "entity 'two words' must be a non-empty name"),
    ([{"start": 0, "end": 4, "entity": "x", "colour": 1}], "unknown key 'colour'"),
    ([{"start": 4, "end": 5, "entity": "x"}], r"characters \[4, 5\) hold only whitespace"),
])
def test_bad_annotations_name_the_file_line_and_field(tmp_path, entities, message):
  path = tmp_path / "a.jsonl"
  path.write_text(json.dumps({"text": "book it now", "intent": "b", "entities": entities})[:-1].replace(
      "book it now", "book table") + "}\n")
  with pytest.raises(DataError, match=message):
    annotated.read(path)


def test_a_spreadsheets_csv_reads_byte_order_mark_semicolons_and_crlf(tmp_path):
  entities = '[{""start"": 10, ""end"": 13, ""entity"": ""people""}]'
  (tmp_path / "a.csv").write_bytes(f'\ufefftext;intent;entities\r\n"table for two, now";book;"{entities}"\r\n'
                                   "hello;greet\r\n".encode("utf-8"))  # its empty entities cell left out
  examples = annotated.read(tmp_path / "a.csv").examples
  assert [(e.text, e.intent, [e.text[x.start:x.end] for x in e.entities]) for e in examples] == [
      ("table for two, now", "book", ["two"]), ("hello", "greet", [])]
  (tmp_path / "b.csv").write_text("utterance,intent\nhello,greet\n")
  with pytest.raises(DataError, match=r"b.csv:1: the header must name a 'text' column .* it names \['utterance', "):
    annotated.read(tmp_path / "b.csv")


def test_an_offset_that_cuts_a_word_is_learnt_as_written_with_a_warning_naming_line_and_word(tmp_path, caplog):
  path = tmp_path / "a.jsonl"
  rows = [{"text": "table for two, please", "intent": "b", "entities": [{"start": 10, "end": 12, "entity": "n"}]},
          {"text": "at 7pm", "intent": "b", "entities": [{"start": 3, "end": 6, "entity": "time"}]}]
  path.write_text("".join(json.dumps(r) + "\n" for r in rows))
  with caplog.at_level("WARNING", logger="fewshot_nlu"):
    examples = annotated.read(path).examples
  assert [(e.text[x.start:x.end], x.entity) for e in examples for x in e.entities] == [("tw", "n"), ("7pm", "time")]
  [record] = [r for r in caplog.records if "cutting the word" in r.getMessage()]
  assert "a.jsonl:1: entities[0]: entity 'n' at [10, 12) is 'tw', cutting the word 'two'" in record.getMessage()


def test_rasa_errors_name_the_line(tmp_path):
  bad = tmp_path / "nlu.yml"
  bad.write_text("nlu:\n- intent: a\n  examples: |\n    - fine\n    not a list item\n")
  with pytest.raises(DataError, match=r"nlu.yml:5: an example line starts with '- '"):
    annotated.read(bad)
  bad.write_text("nlu:\n- intent: a\n  examples: |\n    - book [two]{\"role\": \"x\"} now\n")
  with pytest.raises(DataError, match=r"nlu.yml:4: annotation .* must name its \"entity\""):
    annotated.read(bad)
  bad.write_text("nlu:\n  - intent: [oops\n")
  with pytest.raises(DataError, match=r"nlu.yml:\d+: not valid YAML"):
    annotated.read(bad)
  bad.write_text("version: '3.1'\n")
  with pytest.raises(DataError, match="no 'nlu:' list"):
    annotated.read(bad)
  with pytest.raises(MissingDataFile, match="no such file"):
    annotated.read(tmp_path / "nope.yml")
  assert pathlib.Path(bad).exists()


def test_the_requested_slot_of_an_example_reads_from_every_table_form_and_reaches_the_support_rows(tmp_path):
  """``requested_slot`` (the slot the bot had asked for): a name or a list in JSONL and dicts, names separated by
  spaces in CSV; kept by ``to_dict`` and ``support_rows`` (as ``requested``); a bad value names the field."""
  row = {"text": "13", "entities": [{"start": 0, "end": 2, "entity": "people"}], "requested_slot": "people"}
  (tmp_path / "a.jsonl").write_text(json.dumps(row) + "\n" + json.dumps({"text": "hi"}) + "\n")
  (tmp_path / "a.csv").write_text('text,entities,requested_slot\n13,"[{""start"": 0, ""end"": 2, '
                                  '""entity"": ""people""}]",people\nhi,,\n')
  for source in (tmp_path / "a.jsonl", tmp_path / "a.csv", [row, {"text": "hi"}]):
    first, second = annotated.read(source).examples
    assert first.requested_slot == ("people",) and second.requested_slot == ()
    assert first.to_dict()["requested_slot"] == ["people"] and "requested_slot" not in second.to_dict()
    rows = annotated.support_rows([first, second])
    assert rows[0]["requested"] == ["people"] and "requested" not in rows[1]
  both = annotated.read([{"text": "Ann Lee", "requested_slot": ["first_name", "last_name"]}]).examples[0]
  assert both.requested_slot == ("first_name", "last_name")
  assert annotated.read(annotated.jsonl([both]).splitlines() and [json.loads(annotated.jsonl([both]))]
                        ).examples[0].requested_slot == both.requested_slot
  for bad in (3, ["two words"], [""], {"slot": "x"}):
    with pytest.raises(DataError, match=r"examples\[0\]: field 'requested_slot'"):
      annotated.read([{"text": "13", "requested_slot": bad}])


def test_slot_names_stand_for_their_labels_and_their_role_labels():
  labels = ["city:from", "city:to", "date", "people"]
  assert annotated.labels_named("city", labels) == frozenset({"city:from", "city:to"})
  assert annotated.labels_named(["date", "city:to"], labels) == frozenset({"date", "city:to"})
  assert annotated.labels_named("time", labels) is None and annotated.labels_named(None, labels) is None


def test_a_rasa_projects_data_folder_reads_every_nlu_file_and_their_synonyms_apply_across_files(tmp_path):
  data = tmp_path / "data"
  (data / "nlu").mkdir(parents=True)
  (data / "nlu" / "orders.yml").write_text('version: "3.1"\nnlu:\n- intent: order\n  examples: |\n'
                                           "    - a [veg](topping) pizza\n    - one [large](size) please\n")
  (data / "nlu" / "synonyms.yaml").write_text("nlu:\n- synonym: vegetarian\n  examples: |\n    - veg\n"
                                              "- intent: greet\n  examples: |\n    - hi\n")
  (data / "stories.yml").write_text("stories:\n- story: s\n  steps:\n  - intent: greet\n")
  (data / "rules.yml").write_text("rules: []\n")
  read = annotated.read(data)
  assert [(e.text, e.intent) for e in read.examples] == [("a veg pizza", "order"), ("one large please", "order"),
                                                         ("hi", "greet")]
  assert read.examples[0].entities[0].value == "vegetarian"  # the synonym of another file
  assert read.examples[0].where == f"{data / 'nlu' / 'orders.yml'}:5"
  (data / "nlu" / "orders.yml").write_text("nlu:\n- intent: order\n  examples: |\n    - a [veg](topping pizza\n")
  with pytest.raises(DataError, match=r"orders.yml:4: an annotation is not closed"):
    annotated.read(data)
  only_domain = tmp_path / "project"
  only_domain.mkdir()
  (only_domain / "domain.yml").write_text("intents:\n- greet\n")
  with pytest.raises(DataError, match=r"none of its 1 YAML files is a Rasa NLU file .*found domain.yml"):
    annotated.read(only_domain)
