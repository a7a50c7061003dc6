"""Joint intent + BIO slot builders: SNIPS / MixATIS split sizes as counted in shared/data, decoded examples,
and file:line errors for a user's malformed folder."""

import pytest

from fewshot_nlu.data.builders import base, get_builder
from tests.conftest import SHARED_DATA

# Counts from shared/data/SNIPS_BIO/PROVENANCE.md and MixATIS_clean/PROVENANCE.md.
SIZES = {
    "snips_joint": {"train": 13084, "valid": 700, "test": 700},
    "mixatis": {"train": 13162, "dev": 759, "test": 828},
}
FOLDERS = {"snips_joint": "SNIPS_BIO", "mixatis": "MixATIS_clean"}
# The first line of every split, read off the raw files.
FIRST = {
    ("snips_joint", "train"): ("listen to westbam alumb allergic on google music",
                               "O O B-artist O B-album O B-service I-service", ["PlayMusic"]),
    ("snips_joint", "valid"): ("i d like to have this track onto my classical relaxations playlist",
                               "O O O O O O B-music_item O B-playlist_owner B-playlist I-playlist O",
                               ["AddToPlaylist"]),
    ("snips_joint", "test"): ("add sabrina salerno to the grime instrumentals playlist",
                              "O B-artist I-artist O O B-playlist I-playlist O", ["AddToPlaylist"]),
    ("mixatis", "train"): ("define airline ua , names of airports and also show me city served both by nationair "
                           "and canadian airlines international",
                           "O O B-airline_code O O O O O O O O O O O O B-airline_name O B-airline_name "
                           "I-airline_name I-airline_name", ["atis_abbreviation", "atis_airport", "atis_city"]),
    ("mixatis", "dev"): ("how many passengers can a boeing 737 hold and also flights from pittsburgh to baltimore "
                         "between 10 am and 2 pm",
                         "O O O O O O B-aircraft_code O O O O O B-fromloc.city_name O B-toloc.city_name O "
                         "B-depart_time.start_time I-depart_time.start_time O B-depart_time.end_time "
                         "I-depart_time.end_time", ["atis_capacity", "atis_flight"]),
    ("mixatis", "test"): ("list california airports , list la and how many canadian airlines international flights "
                          "use aircraft 320",
                          "O B-state_name O O O B-city_name O O O B-airline_name I-airline_name I-airline_name "
                          "O O O B-aircraft_code", ["atis_airport", "atis_city", "atis_quantity"]),
}


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
  if not SHARED_DATA.exists():
    pytest.skip(f"{SHARED_DATA} not present")
  tfds_dir = tmp_path_factory.mktemp("tfds")
  return {(name, split): base.load_split(builder, split)
          for name in SIZES
          for builder in [get_builder(name, data_dir=str(tfds_dir), raw_dir=SHARED_DATA / FOLDERS[name])]
          for split in SIZES[name]}


@pytest.mark.parametrize("name,split", [(n, s) for n in SIZES for s in SIZES[n]])
def test_split_sizes_and_first_example(splits, name, split):
  examples = splits[name, split]
  assert len(examples) == SIZES[name][split]
  assert [e["index"] for e in examples] == list(range(len(examples)))
  assert all(len(e["tokens"]) == len(e["tags"]) > 0 and e["intents"] for e in examples)
  text, tags, intents = FIRST[name, split]
  assert examples[0] == {"index": 0, "text": text, "tokens": text.split(), "tags": tags.split(),
                         "intents": intents}


def test_mixatis_intent_counts(splits):
  counts = [sum(len(e["intents"]) == n for e in splits["mixatis", "train"]) for n in (1, 2, 3)]
  assert counts == [1118, 8445, 3599]  # MixATIS_clean/PROVENANCE.md


def write_split(folder, lines):
  """``lines``: (seq.in, seq.out, label) triples, or a dict {file: [lines]} for misaligned files."""
  folder.mkdir(parents=True)
  columns = dict(zip(("seq.in", "seq.out", "label"), zip(*lines))) if isinstance(lines, list) else lines
  for name, column in columns.items():
    (folder / name).write_text("\n".join(column) + "\n")


def build(raw, tmp_path):
  builder = base.prepare(get_builder("joint_nlu_folder", raw_dir=raw, data_dir=str(tmp_path / "tfds")))
  return {split: base.load_split(builder, split) for split in builder.info.splits}


def test_user_folder_splits_are_its_subfolders(tmp_path):
  raw = tmp_path / "raw"
  write_split(raw / "train", [("book a table at 8", "O O O O B-time", "book"),
                              ("play jazz and book it", "O B-genre O O O", "play#book")])
  write_split(raw / "my-test", [("play jazz", "O B-genre", "play")])
  (raw / "notes").mkdir()  # no seq files: not a split
  examples = build(raw, tmp_path)
  assert sorted(examples) == ["my-test", "train"]
  text = "play jazz and book it"
  assert examples["train"][1] == {"index": 1, "text": text, "tokens": text.split(),
                                  "tags": ["O", "B-genre", "O", "O", "O"], "intents": ["play", "book"]}


@pytest.mark.parametrize("lines,message", [
    ([("book a table", "O O", "book")], r"train[/\\]seq\.out:1: 2 tags for the 3 tokens"),
    ([("book it", "O O", "book"), ("a table at 8", "O O O I-time", "book")],
     r"train[/\\]seq\.out:2: tag 4 'I-time' follows 'O'"),
    ({"seq.in": ["a", "b", "c"], "seq.out": ["O", "O"], "label": ["x", "y", "z"]},
     r"train[/\\]seq\.out:3: line missing \(line counts: seq\.in 3, seq\.out 2, label 3\)"),
    ([("a", "O", "x"), ("b", "O", "x##y")], r"train[/\\]label:2: empty intent in 'x##y'"),
    ({"seq.in": ["a", "", "c"], "seq.out": ["O", "O", "O"], "label": ["x", "y", "z"]},
     r"train[/\\]seq\.in:2: empty line"),
])
def test_bad_user_folder_names_file_and_line(tmp_path, lines, message):
  raw = tmp_path / "raw"
  write_split(raw / "train", lines)
  with pytest.raises(ValueError, match=message):
    build(raw, tmp_path)


def test_split_folder_missing_a_file_is_an_error(tmp_path):
  raw = tmp_path / "raw"
  write_split(raw / "train", {"seq.in": ["a"], "label": ["x"]})
  with pytest.raises(FileNotFoundError, match=r"train[/\\]seq\.out: missing"):
    build(raw, tmp_path)


def test_user_folder_builder_needs_raw_dir(tmp_path):
  with pytest.raises(ValueError, match="raw_dir="):
    get_builder("joint_nlu_folder", data_dir=str(tmp_path))
