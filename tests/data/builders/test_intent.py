"""BANKING77 / CLINC150 / HWU64 builders: split sizes as counted in shared/data, seeded 30-shot splits."""

import collections

import pytest

from fewshot_nlu.data.builders import base, get_builder
from fewshot_nlu.data.builders.intent import sample_k_shot
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.skipif(not SHARED_DATA.exists(), reason=f"{SHARED_DATA} not present")

# Counts from shared/data/README.md and each PROVENANCE.md.
SIZES = {
    "banking77": {"train": 8622, "valid": 1540, "test": 3080, "train_5": 385, "train_10": 770, "train_30": 77 * 30},
    "clinc150": {"train": 15000, "valid": 3000, "test": 4500, "train_5": 750, "train_10": 1500,
                 "train_30": 4500, "oos_train": 100, "oos_valid": 100, "oos_test": 1000},
    "hwu64": {"train": 8954, "valid": 1076, "test": 1076, "train_5": 320, "train_10": 640},
}
FOLDERS = {"banking77": "BANKING77", "clinc150": "CLINC150", "hwu64": "HWU64"}


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory):
  return tmp_path_factory.mktemp("tfds")


@pytest.mark.parametrize("name", sorted(SIZES))
def test_split_sizes(name, tfds_dir):
  builder = get_builder(name, data_dir=str(tfds_dir), raw_dir=SHARED_DATA / FOLDERS[name])
  for split, size in SIZES[name].items():
    examples = base.load_split(builder, split)
    assert len(examples) == size, (name, split)
    assert all(e["text"] and e["label"] for e in examples)
  test = base.load_split(builder, "test")
  first_line = (SHARED_DATA / FOLDERS[name] / "test" / "seq.in").read_text().splitlines()[0]
  assert test[0]["text"] == first_line.strip()


def test_hwu64_30_shot_keeps_small_intents_whole(tfds_dir):
  builder = get_builder("hwu64", data_dir=str(tfds_dir), raw_dir=SHARED_DATA / "HWU64")
  train = collections.Counter(e["label"] for e in base.load_split(builder, "train"))
  shot30 = collections.Counter(e["label"] for e in base.load_split(builder, "train_30"))
  assert shot30 == {label: min(count, 30) for label, count in train.items()}


def test_30_shot_is_reproducible_and_seeded(tmp_path):
  def build(where, seed):
    from fewshot_nlu.data.builders.intent import IntentConfig
    b = get_builder("banking77", data_dir=str(where), raw_dir=SHARED_DATA / "BANKING77",
                    config=IntentConfig(name=f"seed{seed}", seed=seed))
    return [(e["index"], e["text"]) for e in base.load_split(b, "train_30")]
  first, second, other = build(tmp_path / "a", 0), build(tmp_path / "b", 0), build(tmp_path / "c", 1)
  assert first == second and first != other


def test_sample_k_shot():
  labels = ["a"] * 5 + ["b"] * 2 + ["c"] * 4
  chosen = sample_k_shot(labels, 3, seed=7)
  assert collections.Counter(labels[i] for i in chosen) == {"a": 3, "b": 2, "c": 3}
  assert chosen == sorted(chosen) == sample_k_shot(labels, 3, seed=7)


def test_missing_raw_folder_is_explained(tmp_path, monkeypatch):
  monkeypatch.setenv("FEWSHOT_NLU_DATA", str(tmp_path / "nowhere"))
  builder = get_builder("hwu64", data_dir=str(tmp_path / "tfds"))
  with pytest.raises(FileNotFoundError, match="FEWSHOT_NLU_DATA"):
    builder.raw_dir()


def test_intent_folder_rebuilds_when_the_folder_changes(tmp_path):
  folder = tmp_path / "mine"
  (folder / "train").mkdir(parents=True)
  (folder / "train" / "seq.in").write_text("hello\nbye\n")
  (folder / "train" / "label").write_text("greet\nleave\n")
  first = base.load_split(get_builder("intent_folder", raw_dir=folder, data_dir=str(tmp_path / "t")), "train")
  (folder / "train" / "seq.in").write_text("hello there\nbye\n")
  second = base.load_split(get_builder("intent_folder", raw_dir=folder, data_dir=str(tmp_path / "t")), "train")
  assert [e["text"] for e in first] == ["hello", "bye"] and second[0]["text"] == "hello there"
