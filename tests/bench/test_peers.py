"""bench/peers.py's long-tail pools and their per-count accuracy, on a hand-written HWU64-shaped folder."""

from __future__ import annotations

import math
import pathlib
import sys
from collections import Counter

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "bench"))  # bench scripts import their siblings

from bench import peers  # noqa: E402

INTENTS = [f"intent_{i}" for i in range(7)]


@pytest.fixture()
def data_dir(tmp_path, monkeypatch):
  monkeypatch.setenv("FEWSHOT_NLU_TFDS_DIR", str(tmp_path / "tfds"))
  root = tmp_path / "data"
  for split, per_intent in (("train", 12), ("valid", 2), ("test", 3), ("train_5", 2), ("train_10", 2)):
    folder = root / "HWU64" / split
    folder.mkdir(parents=True)
    rows = [(f"{split} utterance {n} of {intent}", intent) for intent in INTENTS for n in range(per_intent)]
    (folder / "seq.in").write_text("".join(t + "\n" for t, _ in rows))
    (folder / "label").write_text("".join(l + "\n" for _, l in rows))
  return root


def _pool(folder: pathlib.Path) -> list[tuple[str, str]]:
  texts = (folder / "train_skewed" / "seq.in").read_text().splitlines()
  return list(zip(texts, (folder / "train_skewed" / "label").read_text().splitlines()))


def test_skewed_folder_deals_the_counts_over_the_intents_from_train(data_dir, tmp_path):
  folder = peers.skewed_folder("hwu64", 0, str(data_dir), tmp_path / "pools")
  pool = _pool(folder)
  counts = Counter(label for _, label in pool)
  assert sorted(counts.values()) == sorted(peers.SKEW_COUNTS + peers.SKEW_COUNTS[:2])  # 7 intents: 1,2,3,5,10,1,2
  assert set(counts) == set(INTENTS)
  train = set(zip((data_dir / "HWU64/train/seq.in").read_text().splitlines(),
                  (data_dir / "HWU64/train/label").read_text().splitlines()))
  assert set(pool) <= train and len(set(pool)) == len(pool)
  for split in ("valid", "test"):
    assert (folder / split).resolve() == (data_dir / "HWU64" / split).resolve()
  # written once per seed: the same pool again; another seed deals other counts or other utterances
  assert _pool(peers.skewed_folder("hwu64", 0, str(data_dir), tmp_path / "pools")) == pool
  assert _pool(peers.skewed_folder("hwu64", 1, str(data_dir), tmp_path / "pools")) != pool


def test_pool_and_test_read_the_folder_through_the_intent_folder_builder(data_dir, tmp_path):
  pool, test, raw_dir = peers.pool_and_test("hwu64", peers.SKEWED, 0, str(data_dir), tmp_path / "pools")
  assert raw_dir and len(pool.texts) == 1 + 2 + 3 + 5 + 10 + 1 + 2
  assert len(test.texts) == 3 * len(INTENTS)
  published, _, none = peers.pool_and_test("hwu64", "5", 0, str(data_dir), tmp_path / "pools")
  assert none == "" and len(published.texts) == 2 * len(INTENTS)


def test_correct_by_train_count_and_rare_accuracy():
  pool = ["a", "b", "b", "c", "c", "c", "c", "c"]  # a: 1 example, b: 2, c: 5
  gold = ["a", "a", "b", "c", "c", "d"]
  predicted = ["a", "b", "b", "c", "a", "d"]
  by_count = peers.correct_by_train_count(pool, gold, predicted)
  assert by_count == {"0": [1, 1], "1": [1, 2], "2": [1, 1], "5": [1, 2]}
  assert peers.rare_accuracy(by_count) == pytest.approx(2 / 3)  # intents with 1-3 examples: a (1 of 2), b (1 of 1)
  assert math.isnan(peers.rare_accuracy({"5": [3, 4]}))


def test_setfit_rows_on_another_body_are_named_apart_and_tabled_beside_convfit_on_it():
  """``--setfit-model``: the MiniLM rows keep their names (peers.md's table), another body's rows carry it, and
  bench/models.py tables them beside ConvFiT on the same encoder."""
  from bench import models
  assert peers.setfit_name("iterations", "minilm-l6", "hwu64", "5") == "setfit-iterations-hwu64-5"
  name = peers.setfit_name("iterations", "mpnet-base", "hwu64", "5")
  assert name == "setfit-iterations-mpnet-base-hwu64-5"
  row = lambda name, acc, results: {"name": name, "seed": 0, "results": {"accuracy": acc, **results}}  # noqa: E731
  peer_rows = [row("setfit-iterations-hwu64-5", 0.74, {"fit_seconds": 276.0}), row(name, 0.81, {"fit_seconds": 1554.0})]
  ours = [row(models.run_name("hwu64", "5", 4), 0.83, {"stage2_seconds": 200.0, "classifier_seconds": 28.0})]
  lines = models.setfit_table(peer_rows, ours)
  assert lines[-1] == "| hwu64 5-shot | 74.00 (1) | 4.6 | 81.00 (1) | 25.9 | 83.00 (1) | 3.8 |"
  assert models.setfit_table(peer_rows[:1], ours) == []  # no MPNet SetFit row: no table


def test_a_models_run_name_says_its_prefix_method_and_learning_rate():
  from bench import models
  assert models.variant_label(models.run_name("hwu64", "10", -1)) == "no prefix"
  assert models.variant_label(models.run_name("hwu64", "10", 4, learning_rate=1e-4)) == "emb + 4 layers, lr 0.0001"
  assert models.variant_label(models.run_name("banking77", "5", -1, "qaid")) == "QAID, no prefix"


def test_the_figure_takes_the_mpnet_row_valid_prefers_among_three_seed_rows():
  from bench import models
  row = lambda name, dev: {"name": name, "results": {"accuracy": 0.8, "selected_dev_accuracy": dev}}  # noqa: E731
  a, b, c = (models.run_name("hwu64", "5", 4), models.run_name("hwu64", "5", 4, learning_rate=1e-4),
             models.run_name("hwu64", "5", -1, "qaid"))
  by_name = {a: [row(a, 0.80)] * 3, b: [row(b, 0.82)] * 3, c: [row(c, 0.90)]}  # c: one seed, higher
  assert models.preferred_on_valid(by_name, "hwu64", "5") == b
  assert models.preferred_on_valid({c: by_name[c]}, "hwu64", "5") == c  # no 3-seed row: any
  assert models.preferred_on_valid(by_name, "hwu64", "10") is None
