"""IntentTable (a user's own CSV / JSONL intent data): decoded splits, and errors naming file, line and field.
shared/data holds no table in this layout (BANKING77's PolyAI CSV names its label column ``category``), so the
builder is tested on files written here."""

import json

import pytest

from fewshot_nlu.data.builders import base, get_builder


def write(raw, files):
  raw.mkdir(parents=True, exist_ok=True)
  for name, content in files.items():
    (raw / name).write_bytes(content.encode("utf-8") if isinstance(content, str) else content)


def jsonl(*records):
  return "".join(json.dumps(r) + "\n" for r in records)


def build(tmp_path, files):
  write(tmp_path / "raw", files)
  builder = base.prepare(get_builder("intent_table", raw_dir=tmp_path / "raw", data_dir=str(tmp_path / "tfds")))
  return {split: base.load_split(builder, split) for split in builder.info.splits}


@pytest.fixture(scope="module")
def table(tmp_path_factory):
  return build(tmp_path_factory.mktemp("table"), {
      "train.csv": '\ufefftext,label,source\nbook a table,book,web\n"play ""jazz""\nplease",play,app\n',
      "multi.csv": "labels,text\nbook#play,book and play\n,hello there\n",
      "semi.csv": "\ufefftext;intent\r\nbook a table, please;book\r\nhi;greet\r\n",  # a spreadsheet's, comma locale
      "test.jsonl": jsonl({"text": " what's on? ", "label": "ask"}, {"text": "hi", "label": "greet", "id": 7}),
      "dev-2.jsonl": jsonl({"text": "book and play", "labels": ["book", "play"]}, {"text": "hmm", "labels": []}),
      "README.md": "not a split",
  })


def test_splits_are_the_table_files(table):
  assert sorted(table) == ["dev-2", "multi", "semi", "test", "train"]


def test_csv_single_label(table):
  assert table["train"] == [{"index": 0, "text": "book a table", "labels": ["book"]},
                            {"index": 1, "text": 'play "jazz"\nplease', "labels": ["play"]}]


def test_csv_multi_label(table):
  assert table["multi"] == [{"index": 0, "text": "book and play", "labels": ["book", "play"]},
                            {"index": 1, "text": "hello there", "labels": []}]


def test_csv_separated_by_semicolons(table):
  assert table["semi"] == [{"index": 0, "text": "book a table, please", "labels": ["book"]},
                           {"index": 1, "text": "hi", "labels": ["greet"]}]


def test_jsonl(table):
  assert table["test"] == [{"index": 0, "text": "what's on?", "labels": ["ask"]},
                           {"index": 1, "text": "hi", "labels": ["greet"]}]
  assert table["dev-2"] == [{"index": 0, "text": "book and play", "labels": ["book", "play"]},
                            {"index": 1, "text": "hmm", "labels": []}]


@pytest.mark.parametrize("files,message", [
    ({"train.csv": "utterance,label\nhi,greet\n"}, r"train\.csv:1 \(header\): field 'text' missing"),
    ({"train.csv": "text,category\nhi,greet\n"},
     r"train\.csv:1 \(header\): field 'label' \(or 'intent'\) or 'labels' missing"),
    ({"train.csv": "text,label,intent\nhi,a,a\n"}, r"train\.csv:1 \(header\): fields 'label' and 'intent' both"),
    ({"train.csv": "text,label,labels\nhi,a,a\n"}, r"train\.csv:1 \(header\): .* both present"),
    ({"train.csv": 'text,label\nhi,greet\n"two\nlines",x\n ,greet\n'}, r"train\.csv:5: field 'text' is empty"),
    ({"train.csv": "text,label\nhi,greet\nhello,\n"}, r"train\.csv:3: field 'label' is empty"),
    ({"train.csv": "text,labels\nhi,a##b\n"}, r"train\.csv:2: field 'labels' 'a##b' has an empty intent"),
    ({"train.csv": "text,label\nhi,greet,extra\n"}, r"train\.csv:2: 3 fields, but the header names 2"),
    ({"train.csv": "text,label\nhi,greet\n\nyo,greet\n"}, r"train\.csv:3: empty line"),
    ({"train.csv": b"text,label\nhi,greet\ncaf\xe9,x\n"}, r"train\.csv:3: not valid UTF-8"),
    ({"test.jsonl": '{"text": "hi", "label": "greet"}\n{"text": "yo", "label": }\n'},
     r"test\.jsonl:2: invalid JSON"),
    ({"test.jsonl": jsonl({"text": "hi", "label": "a"}, {"label": "b"})}, r"test\.jsonl:2: field 'text' missing"),
    ({"test.jsonl": jsonl({"text": "hi", "labels": "a#b"})}, r"test\.jsonl:1: field 'labels' must be a list"),
    ({"test.jsonl": jsonl({"text": "hi", "label": ["a"]})}, r"test\.jsonl:1: field 'label' must be a non-empty str"),
    ({"test.jsonl": jsonl(["hi", "a"])}, r"test\.jsonl:1: expected a JSON object"),
    ({"test.jsonl": '{"text": "hi", "label": "a"}\n\n'}, r"test\.jsonl:2: empty line"),
])
def test_bad_table_names_file_line_and_field(tmp_path, files, message):
  with pytest.raises(ValueError, match=message):
    build(tmp_path, files)


def test_same_split_twice_is_an_error(tmp_path):
  with pytest.raises(ValueError, match=r"split 'train' given twice \(train\.csv and train\.jsonl\)"):
    build(tmp_path, {"train.csv": "text,label\nhi,a\n", "train.jsonl": jsonl({"text": "hi", "label": "a"})})


def test_bad_split_name_and_empty_folder(tmp_path):
  with pytest.raises(ValueError, match=r"split name 'my test'"):
    build(tmp_path / "a", {"my test.csv": "text,label\nhi,a\n"})
  with pytest.raises(FileNotFoundError, match=r"no <split>\.csv or <split>\.jsonl"):
    build(tmp_path / "b", {"notes.txt": "x"})
