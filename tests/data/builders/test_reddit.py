"""RedditConversational on small PolyAI-format JSON-lines files written into tmp_path: round trip, the order of
the ``context/N`` extra contexts, globbed paths, and errors that name file, line and field."""

from __future__ import annotations

import json

import pytest

from fewshot_nlu.data.builders import base
from fewshot_nlu.data.builders.reddit import RedditConfig, RedditConversational, expand_globs, read_jsonl

N_LINES = 36  # over two train shards; 12 more in the test shard


def record(i):
  """Line ``i``: up to 11 extra contexts (so context/10 sorts after context/9), keys written in reverse."""
  fields = {"subreddit": "AskReddit", "thread_id": f"t{i // 3}", "context_author": "a", "response_author": "b",
            "context": f"context {i}: how's the café?", "response": f"response {i} ✓"}
  fields.update({f"context/{k}": f"extra {k} of {i}" for k in range(i % 12)})
  return dict(reversed(list(fields.items())))


def expected(i, index):
  r = record(i)
  return {"index": index, "context": r["context"], "response": r["response"],
          "extra_contexts": [f"extra {k} of {i}" for k in range(i % 12)]}


def write_jsonl(path, lines):
  path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
  return path


@pytest.fixture(scope="module")
def raw_dir(tmp_path_factory):
  folder = tmp_path_factory.mktemp("reddit")
  write_jsonl(folder / "train-00001-of-00002.json", [record(i) for i in range(N_LINES // 2, N_LINES)])
  write_jsonl(folder / "train-00000-of-00002.json", [record(i) for i in range(N_LINES // 2)])
  write_jsonl(folder / "test-00000-of-00001.json", [record(i) for i in range(N_LINES, N_LINES + 12)])
  return folder


@pytest.fixture(scope="module")
def built(raw_dir, tmp_path_factory):
  builder = RedditConversational(raw_dir=raw_dir, data_dir=str(tmp_path_factory.mktemp("tfds")))
  return {split: base.load_split(builder, split) for split in ("train", "test")}


def test_jsonl_round_trips(built):
  assert built["train"] == [expected(i, i) for i in range(N_LINES)]
  assert built["test"] == [expected(i, i - N_LINES) for i in range(N_LINES, N_LINES + 12)]


def test_extra_contexts_follow_context_numbers(built):
  eleven = built["train"][11]["extra_contexts"]
  assert eleven == [f"extra {k} of 11" for k in range(11)]  # context/0 .. context/10, not context/0, /1, /10, /2


def test_config_paths_are_globs(raw_dir, tmp_path):
  config = RedditConfig(name="globbed", paths=(str(raw_dir / "train-*-of-00002.json"),))
  builder = RedditConversational(config=config, data_dir=str(tmp_path))
  assert list(base.prepare(builder).info.splits) == ["train"]
  assert base.load_split(builder, "train") == [expected(i, i) for i in range(N_LINES)]


def test_glob_errors(raw_dir):
  with pytest.raises(FileNotFoundError, match="no file matches .*valid-"):
    expand_globs([str(raw_dir / "valid-*.json")])
  with pytest.raises(ValueError, match="matched by both"):
    expand_globs([str(raw_dir / "train-*.json"), str(raw_dir / "train-00000-of-00002.json")])


GOOD = json.dumps({"context": "hi there", "response": "hello you"})


@pytest.mark.parametrize("bad, message", [
    ('{"context": "hi there", "response": ', r"invalid JSON"),
    ('{"context": "hi there"}', r"missing field 'response'"),
    ('{"response": "hello you"}', r"missing field 'context'"),
    ('{"context": "hi", "response": 3}', r"field 'response' must be a string, got int"),
    ('{"context": "hi", "response": " "}', r"field 'response' is empty"),
    ('{"context": "hi", "response": "yo", "context/1": "x"}', r"missing field 'context/0'"),
    ('["hi", "yo"]', r"expected a JSON object, got list"),
    ("", r"empty line"),
])
def test_errors_name_file_line_and_field(tmp_path, bad, message):
  path = tmp_path / "train-00000-of-00001.json"
  path.write_text(f"{GOOD}\n{GOOD}\n{bad}\n{GOOD}\n", encoding="utf-8")
  with pytest.raises(ValueError, match=rf"train-00000-of-00001\.json:3: {message}"):
    list(read_jsonl(path))


def test_builder_reports_bad_line(tmp_path):
  write_jsonl(tmp_path / "train-00000-of-00001.json", [record(0), {"context": "no response here"}])
  builder = RedditConversational(raw_dir=tmp_path, data_dir=str(tmp_path / "tfds"))
  with pytest.raises(ValueError, match=r"train-00000-of-00001\.json:2: missing field 'response'"):
    base.prepare(builder)


def test_missing_raw_folder(tmp_path, monkeypatch):
  monkeypatch.setenv("FEWSHOT_NLU_DATA", str(tmp_path))
  with pytest.raises(FileNotFoundError, match="Reddit"):
    base.prepare(RedditConversational(data_dir=str(tmp_path / "tfds")))
