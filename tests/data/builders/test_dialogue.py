"""DialoguePairs on shared/data's SGD and Taskmaster-4 subsets: the full ``consecutive`` config is built once,
``multi_turn`` and ``context_response`` on the first 2 files of each source. Every example is checked against
the raw JSON, and the counts against an independent count of the raw dialogues."""

from __future__ import annotations

import hashlib
import json

import pytest

from fewshot_nlu.data.builders import base
from fewshot_nlu.data.builders.dialogue import DialoguePairs, DialoguePairsConfig, make_examples, read_source
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.skipif(not ((SHARED_DATA / "SGD").is_dir() and (SHARED_DATA / "Taskmaster4").is_dir()),
                                reason=f"no SGD/ and Taskmaster4/ in {SHARED_DATA}")

SPLITS = ("train", "heldout")
SMALL = {
    "consecutive_2files": DialoguePairsConfig(name="consecutive_2files", max_files=2),
    "multi_turn_2files": DialoguePairsConfig(name="multi_turn_2files", pairing="multi_turn", max_files=2),
    "context_response_2files": DialoguePairsConfig(name="context_response_2files", pairing="context_response",
                                                   short_words=-1, max_files=2),
}
# The module docstring's numbers for the full consecutive config: (train, heldout) pairs.
FULL_CONSECUTIVE = (54088, 2565)


def raw_dialogues(max_files=None):
  """{(source, dialogue id): [turn texts]} read straight from the JSON files."""
  dialogues = {}
  for path in sorted((SHARED_DATA / "SGD" / "train").glob("dialogues_*.json"))[:max_files]:
    for d in json.loads(path.read_text()):
      dialogues["sgd", d["dialogue_id"]] = [t["utterance"] for t in d["turns"]]
  for path in sorted((SHARED_DATA / "Taskmaster4").rglob("*.json"))[:max_files]:
    for d in json.loads(path.read_text()):
      dialogues["taskmaster4", d["conversation_id"]] = [u["text"] for u in d["utterances"]]
  return dialogues


def held_out(source, dialogue_id):
  return int(hashlib.sha256(f"{source}/{dialogue_id}".encode()).hexdigest()[:16], 16) < 0.05 * 16**16


def long(text):
  return len(text.split()) > 3


def count_pairs(turns, pairing):
  if pairing == "consecutive":
    return sum(long(a) and long(b) for a, b in zip(turns, turns[1:]))
  if pairing == "multi_turn":
    return sum(long(a) and long(b) and long(c) for a, b, c in zip(turns, turns[1:], turns[2:]))
  return max(len(turns) - 1, 0)


def build(data_dir, config):
  builder = DialoguePairs(config=config, data_dir=str(data_dir), raw_dir=SHARED_DATA)
  return {split: base.load_split(builder, split) for split in SPLITS}


@pytest.fixture(scope="module")
def raw():
  return {None: raw_dialogues(), 2: raw_dialogues(2)}


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
  data_dir = tmp_path_factory.mktemp("tfds")
  built = {"consecutive": build(data_dir, "consecutive")}
  built.update({name: build(data_dir, config) for name, config in SMALL.items()})
  built["multi_turn_2files_again"] = build(tmp_path_factory.mktemp("tfds_again"), SMALL["multi_turn_2files"])
  return built


def config_of(name):
  return SMALL[name] if name in SMALL else DialoguePairs.builder_configs[name]


BUILT = ("consecutive", *SMALL)


def test_raw_counts_match_provenance(raw):
  full = raw[None]
  by_source = {s: [t for (src, _), t in full.items() if src == s] for s in ("sgd", "taskmaster4")}
  assert [len(by_source["sgd"]), sum(map(len, by_source["sgd"]))] == [4509, 71646]
  assert [len(by_source["taskmaster4"]), sum(map(len, by_source["taskmaster4"]))] == [1000, 3766]


def test_consecutive_pairs_have_no_short_utterance(builds):
  for split in SPLITS:
    for example in builds["consecutive"][split]:
      assert len(example["query"]) == 1
      assert long(example["query"][0]) and long(example["response"]), example


@pytest.mark.parametrize("name", BUILT)
def test_pairs_are_consecutive_turns_of_their_dialogue(builds, raw, name):
  config = config_of(name)
  dialogues = raw[config.max_files]
  for split in SPLITS:
    for e in builds[name][split]:
      turns = dialogues[e["source"], e["dialogue_id"]]
      n_query = {"consecutive": 1, "multi_turn": 2, "context_response": min(e["turn"], 3)}[config.pairing]
      assert e["query"] == turns[e["turn"] - n_query:e["turn"]], e
      assert e["response"] == turns[e["turn"]], e


@pytest.mark.parametrize("name", BUILT)
def test_counts_and_split_match_raw(builds, raw, name):
  config = config_of(name)
  expected = {split: 0 for split in SPLITS}
  for (source, dialogue_id), turns in raw[config.max_files].items():
    expected["heldout" if held_out(source, dialogue_id) else "train"] += count_pairs(turns, config.pairing)
  built = builds[name]
  assert {split: len(built[split]) for split in SPLITS} == expected
  for split in SPLITS:
    assert all(held_out(e["source"], e["dialogue_id"]) == (split == "heldout") for e in built[split])
  indices = sorted(e["index"] for split in SPLITS for e in built[split])
  assert indices == list(range(sum(expected.values())))


def test_full_consecutive_counts(builds, raw):
  assert tuple(len(builds["consecutive"][split]) for split in SPLITS) == FULL_CONSECUTIVE
  dialogues = {split: {(e["source"], e["dialogue_id"]) for e in builds["consecutive"][split]} for split in SPLITS}
  assert not dialogues["train"] & dialogues["heldout"]
  assert 0.03 < len(dialogues["heldout"]) / len(raw[None]) < 0.07
  assert len(builds["consecutive"]["heldout"]) >= 100  # enough for 1-of-100 response selection


def test_make_examples_counts_filtered_utterances(raw):
  config = DialoguePairs.builder_configs["consecutive"]
  dialogues = (d for s in config.sources for d in read_source(SHARED_DATA, s))
  examples, counts = make_examples(dialogues, config)
  for source in ("sgd", "taskmaster4"):
    turns = [t for (src, _), ts in raw[None].items() if src == source for t in ts]
    c = counts[source]
    assert c["short_utterances"] == sum(not long(t) for t in turns)
    assert c["candidates"] - c["dropped"] == c["train_pairs"] + c["heldout_pairs"]
  assert [counts["sgd"]["short_utterances"], counts["taskmaster4"]["short_utterances"]] == [6726, 586]
  assert len(examples) == sum(FULL_CONSECUTIVE)


def test_split_is_deterministic(builds):
  assert builds["multi_turn_2files"] == builds["multi_turn_2files_again"]
  # The split depends on the dialogue only, not on which files were read.
  split_of = {(e["source"], e["dialogue_id"]): s for s in SPLITS for e in builds["consecutive"][s]}
  small = builds["consecutive_2files"]
  assert all(split_of[e["source"], e["dialogue_id"]] == s for s in SPLITS for e in small[s])


def test_errors_name_file_record_and_field(tmp_path):
  folder = tmp_path / "SGD" / "train"
  folder.mkdir(parents=True)
  bad = folder / "dialogues_001.json"
  bad.write_text(json.dumps([{"dialogue_id": "1_0", "turns": [{"speaker": "USER", "utterance": "hi there"}]},
                             {"dialogue_id": "1_1", "turns": [{"speaker": "USER", "text": "hi"}]}]))
  with pytest.raises(ValueError, match=r"dialogues_001\.json: dialogue #1 \(1_1\) turns\[0\]: missing field "
                                       r"'utterance'"):
    list(read_source(tmp_path, "sgd"))
  bad.write_text('[{"dialogue_id": "1_0",\n "turns": [}]')
  with pytest.raises(ValueError, match=r"dialogues_001\.json:2:\d+: invalid JSON"):
    list(read_source(tmp_path, "sgd"))
  with pytest.raises(FileNotFoundError, match="lacks Taskmaster4/"):
    DialoguePairs(config="consecutive", data_dir=str(tmp_path / "tfds"), raw_dir=tmp_path).raw_dir()
