"""NLU++ builder: fold sizes as counted in shared/data/NLUPP/PROVENANCE.md, decoded examples, Multi-ConvFiT's
10-fold low-/high-data protocol, and errors for bad files."""

import json

import pytest

from fewshot_nlu.data.builders import base, get_builder
from fewshot_nlu.data.builders.nlupp import protocol_splits
from tests.conftest import SHARED_DATA

# PROVENANCE.md "Files": examples in fold0 .. fold19.
FOLD_SIZES = {
    "banking": [104, 105, 102, 103, 109, 102, 102, 103, 107, 102, 104, 101, 103, 103, 101, 107, 105, 104, 104, 100],
    "hotels": [47, 48, 53, 49, 49, 53, 49, 51, 54, 50, 50, 50, 54, 52, 50, 50, 53, 49, 49, 49],
}
TOTALS = {"banking": 2071, "hotels": 1009}
WITH_SLOTS = {"banking": 677, "hotels": 586}  # PROVENANCE.md "examples with >= 1 slot"
NO_INTENT = {"banking": 88, "hotels": 274}  # PROVENANCE.md "intents per example" 0:...


@pytest.fixture(scope="module")
def folds(tmp_path_factory):
  if not SHARED_DATA.exists():
    pytest.skip(f"{SHARED_DATA} not present")
  tfds_dir = tmp_path_factory.mktemp("tfds")
  return {domain: [base.load_split(builder, f"fold{k}") for k in range(20)]
          for domain in FOLD_SIZES
          for builder in [get_builder("nlupp", config=domain, data_dir=str(tfds_dir), raw_dir=SHARED_DATA / "NLUPP")]}


@pytest.mark.parametrize("domain", sorted(FOLD_SIZES))
def test_fold_sizes_and_counts(folds, domain):
  assert [len(fold) for fold in folds[domain]] == FOLD_SIZES[domain]
  examples = [e for fold in folds[domain] for e in fold]
  assert len(examples) == TOTALS[domain]
  assert sum(json.loads(e["slots"]) != {} for e in examples) == WITH_SLOTS[domain]
  assert sum(not e["intents"] for e in examples) == NO_INTENT[domain]
  for k, fold in enumerate(folds[domain]):
    assert [(e["fold"], e["index"]) for e in fold] == [(k, i) for i in range(len(fold))]


@pytest.mark.parametrize("domain,fold,expected", [
    ("banking", 0, {"index": 0, "fold": 0, "text": "How long does it usually take to get a new pin?",
                    "intents": ["how_long", "pin", "arrival", "new"], "slots": "{}"}),
    ("banking", 19, None),
    ("hotels", 0, {"index": 0, "fold": 0, "text": "we will arrive tomorrow at 25 to 7 p.m.", "intents": [],
                   "slots": json.dumps({"date_from": {"span": [15, 23], "text": "tomorrow",
                                                      "value": {"day": 16, "month": 3, "year": 2022}},
                                        "time_from": {"span": [27, 39], "text": "25 to 7 p.m.",
                                                      "value": {"hour": 18, "minute": 35}}}, sort_keys=True)}),
])
def test_decoded_example(folds, domain, fold, expected):
  raw = json.loads((SHARED_DATA / "NLUPP" / "data" / domain / f"fold{fold}.json").read_text())
  first = folds[domain][fold][0]
  assert first["text"] == raw[0]["text"] and first["intents"] == raw[0].get("intents", [])
  assert json.loads(first["slots"]) == raw[0].get("slots", {})
  if expected is not None:
    assert first == expected


def test_banking_example_with_slots_keeps_shipped_keys(folds):
  # PROVENANCE.md example (banking fold0, example 1): date_period carries the shipped key "values".
  slots = json.loads(folds["banking"][0][1]["slots"])
  assert sorted(slots) == ["date_period", "time_from", "time_to"]
  assert "values" in slots["date_period"] and slots["time_to"]["value"] == {"hour": 18, "minute": 35}


def test_protocol_splits():
  train, test = protocol_splits("low", 0)
  assert train == ["fold0", "fold1"] and test == [f"fold{k}" for k in range(2, 20)]
  train, test = protocol_splits("high", 9)
  assert train == [f"fold{k}" for k in range(18)] and test == ["fold18", "fold19"]
  assert protocol_splits("low", 5, n_folds=20) == (["fold5"], [f"fold{k}" for k in range(20) if k != 5])
  for fold in range(10):
    low_train, low_test = protocol_splits("low", fold)
    assert (low_test, low_train) == protocol_splits("high", fold)
    assert sorted(low_train + low_test, key=lambda s: int(s[4:])) == [f"fold{k}" for k in range(20)]


@pytest.mark.parametrize("args,message", [
    (("mid", 0), "regime"), (("low", 10), "fold must be in 0..9"), (("low", 0, 3), "n_folds must divide"),
])
def test_protocol_splits_rejects(args, message):
  with pytest.raises(ValueError, match=message):
    protocol_splits(*args)


def test_protocol_splits_load_as_tfds_splits(folds, tmp_path):
  builder = get_builder("nlupp", config="hotels", data_dir=str(tmp_path), raw_dir=SHARED_DATA / "NLUPP")
  train, test = protocol_splits("low", 3)
  source = base.prepare(builder).as_data_source(split="+".join(train))
  assert len(source) == FOLD_SIZES["hotels"][6] + FOLD_SIZES["hotels"][7]


def write_folds(raw, bad_fold0):
  (raw / "data" / "banking").mkdir(parents=True)
  for k in range(20):
    text = bad_fold0 if k == 0 else json.dumps([{"text": "hi", "intents": ["greet"]}])
    (raw / "data" / "banking" / f"fold{k}.json").write_text(text)


@pytest.mark.parametrize("fold0,message", [
    ('[\n{"text": "hi",\n "intents": ["greet"]', r"fold0\.json:3:\d+: invalid JSON"),
    ('[{"text": "hi"}, {"intents": ["greet"]}]', r"fold0\.json: example 1: field 'text' missing"),
    ('[{"text": "hi", "intents": "greet"}]', r"fold0\.json: example 0: field 'intents' is not a list"),
    ('[{"text": "hi", "label": "greet"}]', r"fold0\.json: example 0: unknown field 'label'"),
    ('[{"text": "at 5", "slots": {"time": {"text": "5", "span": [0, 1]}}}]',
     r"fold0\.json: example 0: field 'slots.time': span \[0, 1\] cuts 'a'"),
])
def test_bad_fold_names_file_and_field(tmp_path, fold0, message):
  write_folds(tmp_path / "raw", fold0)
  builder = get_builder("nlupp", config="banking", raw_dir=tmp_path / "raw", data_dir=str(tmp_path / "tfds"))
  with pytest.raises(ValueError, match=message):
    builder.download_and_prepare()
