"""Slot support sets from files (``data.support``): a seq.in / seq.out folder or JSON lines, and errors that name
the file, the line and the field."""

import json

import pytest


def test_read_support_from_a_seq_folder_and_jsonl(tmp_path):
  from fewshot_nlu.data.support import read_support
  folder = tmp_path / "support"
  folder.mkdir()
  (folder / "seq.in").write_text("play jazz please\nwake me at seven am\n")
  (folder / "seq.out").write_text("O B-genre O\nO O O B-time I-time\n")
  expected = [{"tokens": ["play", "jazz", "please"], "tags": ["O", "B-genre", "O"]},
              {"tokens": "wake me at seven am".split(), "tags": "O O O B-time I-time".split()}]
  assert read_support(folder) == expected
  jsonl = tmp_path / "support.jsonl"
  jsonl.write_text(json.dumps(expected[0]) + "\n\n" + json.dumps({"tokens": "wake me at seven am",
                                                                  "tags": "O O O B-time I-time"}) + "\n")
  assert read_support(jsonl) == expected


@pytest.mark.parametrize("seq_in,seq_out,message", [
    ("play jazz\n", "O B-genre O\n", r"seq\.out:1: field 'tags': 3 tags for 2 tokens"),
    ("play jazz\nplay rock\n", "O B-genre\nO I-genre\n", r"seq\.out:2: field 'tags': tag 2 'I-genre' follows 'O'"),
    ("play jazz\nplay rock\n", "O B-genre\n", r"seq\.out:2: line missing"),
    ("play jazz\n", "O O\n", r"no utterance holds a labelled slot"),
])
def test_bad_support_folders_name_file_line_and_field(tmp_path, seq_in, seq_out, message):
  from fewshot_nlu.data.support import read_support
  (tmp_path / "seq.in").write_text(seq_in)
  (tmp_path / "seq.out").write_text(seq_out)
  with pytest.raises(ValueError, match=message):
    read_support(tmp_path)


@pytest.mark.parametrize("line,message", [
    ('{"tokens": ["a"]}', r"s\.jsonl:2: expected an object with fields 'tokens' and 'tags'"),
    ('{"tokens": ["a", "b c"], "tags": ["O", "O"]}', r"s\.jsonl:2: field 'tokens' must be a list"),
    ('{"tokens": "a b", "tags": "B-x"}', r"s\.jsonl:2: field 'tags': 1 tags for 2 tokens"),
    ("{not json", r"s\.jsonl:2: not valid JSON"),
])
def test_bad_support_jsonl_names_line_and_field(tmp_path, line, message):
  from fewshot_nlu.data.support import read_support
  path = tmp_path / "s.jsonl"
  path.write_text('{"tokens": "play jazz", "tags": "O B-genre"}\n' + line + "\n")
  with pytest.raises(ValueError, match=message):
    read_support(path)
  path.write_text("\n")
  with pytest.raises(ValueError, match="the support set is empty"):
    read_support(path)
  with pytest.raises(FileNotFoundError, match="no such support set"):
    read_support(tmp_path / "missing.jsonl")
