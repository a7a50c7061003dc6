"""SNIPS few-shot slot-tagging episodes (Hou et al. 2020): per-fold episode and utterance counts as counted in
shared/data/SNIPS_fewshot_slot/PROVENANCE.md, held-out domains, a decoded episode, and errors for bad files."""

import json

import pytest

from fewshot_nlu.data.builders import get_builder
from fewshot_nlu.data.builders.slots import load_episodes
from tests.conftest import SHARED_DATA

# PROVENANCE.md "fold layout": test domain of fold k; the valid domain of fold k is the test domain of k + 1.
TEST_DOMAIN = {1: "GetWeather", 2: "PlayMusic", 3: "AddToPlaylist", 4: "RateBook", 5: "SearchScreeningEvent",
               6: "BookRestaurant", 7: "SearchCreativeWork"}
# PROVENANCE.md "Files": support utterances per file, and query utterances per episode.
SUPPORT = {
    "shot_1": {"train": [2240, 2581, 2870, 2754, 2266, 2567, 2862], "test": [646, 742, 305, 453, 421, 941, 120]},
    "shot_5": {"train": [10147, 11731, 13013, 12503, 10248, 11469, 12794],
               "test": [2941, 3293, 1357, 2011, 1867, 4266, 646]},
}
QUERY_SIZE = {"shot_1": 20, "shot_5": 10}
EPISODES = {"train": 500, "valid": 100, "test": 100}
SPLITS = [(config, fold, part) for config in SUPPORT for fold in TEST_DOMAIN for part in EPISODES]


def next_fold(fold):
  return fold % 7 + 1


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
  if not SHARED_DATA.exists():
    pytest.skip(f"{SHARED_DATA} not present")
  tfds_dir = tmp_path_factory.mktemp("tfds")
  builders = {config: get_builder("snips_fewshot_slots", config=config, data_dir=str(tfds_dir),
                                  raw_dir=SHARED_DATA / "SNIPS_fewshot_slot") for config in SUPPORT}
  return {(config, fold, part): load_episodes(builders[config], f"fold{fold}_{part}")
          for config, fold, part in SPLITS}


@pytest.mark.parametrize("config,fold,part", SPLITS)
def test_split_counts(episodes, config, fold, part):
  split = episodes[config, fold, part]
  assert len(split) == EPISODES[part]
  assert [e["index"] for e in split] == list(range(EPISODES[part]))
  assert all(len(e["query"]) == QUERY_SIZE[config] for e in split)
  support = SUPPORT[config]["train" if part == "train" else "test"]
  expected = support[fold - 1] if part != "valid" else support[next_fold(fold) - 1]
  assert sum(len(e["support"]) for e in split) == expected
  domains = {e["domain"] for e in split}
  if part == "train":
    assert domains == set(TEST_DOMAIN.values()) - {TEST_DOMAIN[fold], TEST_DOMAIN[next_fold(fold)]}
  else:
    assert domains == {TEST_DOMAIN[fold if part == "test" else next_fold(fold)]}
  first = split[0]["query"][0]
  assert len(first["tokens"]) == len(first["tags"]) > 0 and first["intent"] == split[0]["domain"]


def test_valid_equals_next_test_as_shipped(episodes):
  for config in SUPPORT:
    for fold in TEST_DOMAIN:
      assert episodes[config, fold, "valid"] == episodes[config, next_fold(fold), "test"]


def test_decoded_episode(episodes):
  # PROVENANCE.md example: first support and query utterance of episode 0 of snips-test-1-shot-5.json.
  episode = episodes["shot_5", 1, "test"][0]
  assert episode["domain"] == "GetWeather" and episode["index"] == 0
  assert episode["support"][0] == {
      "tokens": "what s the weather in my current spot the day after tomorrow".split(),
      "tags": ["O"] * 6 + ["B-current_location", "I-current_location", "B-timeRange"] + ["I-timeRange"] * 3,
      "intent": "GetWeather"}
  assert episode["query"][0] == {"tokens": "what is the weather forecast in canfield at 22:23:22".split(),
                                 "tags": ["O"] * 6 + ["B-city", "O", "B-timeRange"], "intent": "GetWeather"}


def write_fold1(raw, test_episode):
  """A raw folder whose 1-shot fold-1 test file holds ``test_episode``; the other fold files are fine."""
  good = {"support": {"seq_ins": [["hi"]], "seq_outs": [["O"]], "labels": ["D"]},
          "query": {"seq_ins": [["hi"]], "seq_outs": [["O"]], "labels": ["D"]}}
  (raw / "xval_snips").mkdir(parents=True)
  for fold in TEST_DOMAIN:
    for part in EPISODES:
      episode = test_episode if (fold, part) == (1, "test") else good
      (raw / "xval_snips" / f"snips_{part}_{fold}.json").write_text(json.dumps({"D": [good, episode]}))


@pytest.mark.parametrize("query,message", [
    ({"seq_ins": [["a", "b"]], "seq_outs": [["O"]], "labels": ["D"]}, r"field 'seq_outs': 1 tags for 2 tokens"),
    ({"seq_ins": [["a", "b"]], "seq_outs": [["O", "I-x"]], "labels": ["D"]},
     r"field 'seq_outs': tag 2 'I-x' follows 'O'"),
    ({"seq_ins": [["a b"]], "seq_outs": [["O"]], "labels": ["D"]}, r"field 'seq_ins': token 'a b'"),
    ({"seq_ins": [["a"]], "seq_outs": [["O"]], "labels": []}, r"query: fields seq_ins, seq_outs, labels differ"),
    ({"seq_ins": [["a"]], "labels": ["D"]}, r"query: field 'seq_outs' missing"),
])
def test_bad_episode_names_file_episode_and_field(tmp_path, query, message):
  write_fold1(tmp_path / "raw", {"support": {"seq_ins": [], "seq_outs": [], "labels": []}, "query": query})
  builder = get_builder("snips_fewshot_slots", config="shot_1", raw_dir=tmp_path / "raw",
                        data_dir=str(tmp_path / "tfds"))
  with pytest.raises(ValueError, match=r"snips_test_1\.json: domain 'D' episode 1 .*" + message):
    builder.download_and_prepare()


def test_bad_json_names_file_and_line(tmp_path):
  write_fold1(tmp_path / "raw", {})
  (tmp_path / "raw" / "xval_snips" / "snips_test_1.json").write_text('{"D": [\n{"support": }]}')
  builder = get_builder("snips_fewshot_slots", config="shot_1", raw_dir=tmp_path / "raw",
                        data_dir=str(tmp_path / "tfds"))
  with pytest.raises(ValueError, match=r"snips_test_1\.json:2:13: invalid JSON"):
    builder.download_and_prepare()


def test_latin1_file_is_read_with_a_warning(tmp_path, caplog):
  write_fold1(tmp_path / "raw", {})
  episode = {"support": {"seq_ins": [], "seq_outs": [], "labels": []},
             "query": {"seq_ins": [["café"]], "seq_outs": [["O"]], "labels": ["D"]}}
  path = tmp_path / "raw" / "xval_snips" / "snips_test_1.json"
  path.write_bytes(json.dumps({"D": [episode]}, ensure_ascii=False).encode("latin-1"))
  builder = get_builder("snips_fewshot_slots", config="shot_1", raw_dir=tmp_path / "raw",
                        data_dir=str(tmp_path / "tfds"))
  assert load_episodes(builder, "fold1_test")[0]["query"][0]["tokens"] == ["café"]
  assert "snips_test_1.json:1: not valid UTF-8" in caplog.text
