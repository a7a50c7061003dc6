"""A new user's first hour, as probed in the first-contact issue: each test is one thing that failed before and
works now. ``fit`` with the shipped defaults on a handful of intents (batch geometry from the data, recorded in
the run's config; no checkpoints left behind), the default job on a folder with only ``train`` and ``test``, a
failed run that does not claim its workdir, one check of examples for ``fit`` / ``add_examples`` / ``predict``
/ ``scores`` / ``load``, errors in the caller's spelling, and no TFDS chatter. The server's side of the issue
(CSRF, foreign hosts, API key, read-only, the persist lock, bad JSON) is in serve/test_security /
serve/test_main."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import fewshot_nlu as fn
from fewshot_nlu.config_checks import ConfigError, python_spelling
from fewshot_nlu.errors import DataError, MissingDataFile
from fewshot_nlu.models.protocol import EMPTY

ROOT = pathlib.Path(__file__).parents[1]
# the tiny random model; every other field is the shipped default
TINY = {"model": {"max_length": 16}, "compilation_cache_dir": "", "mesh": {"data": 1}}
# for tests of what a fit leaves behind, not of how it trains: a few steps, no second Stage 2 for the threshold
QUICK = {"train": {"max_steps": 4}, "eval": {"calibration_rule": "leave_one_out"}}

PIZZA = {  # a first bot: few intents, uneven examples, punctuation
    "order": ["I'd like a large pepperoni pizza", "order a margherita, please", "can I get two pizzas?",
              "one hawaiian to go", "a veggie pizza for delivery", "i want to order food", "pizza please!",
              "get me a calzone"],
    "track": ["where's my order?", "how long until my pizza arrives", "track my delivery"],
    "cancel": ["cancel my order!", "please cancel it"],
    "menu": ["what toppings do you have?", "do you have vegan cheese", "is there gluten free crust"],
    "greet": ["hi", "hello there", "good evening", "hey!"],
    "bye": ["thanks, bye"],
    "hours": ["when do you open?", "are you open on sunday", "what time do you close", "opening hours",
              "are you open now?"],
}


def as_lists(bot: dict) -> tuple[list[str], list[str]]:
  return [t for ts in bot.values() for t in ts], [l for l, ts in bot.items() for _ in ts]


@pytest.fixture(autouse=True)
def fit_cache(tmp_path, monkeypatch):
  monkeypatch.setenv("FEWSHOT_NLU_CACHE", str(tmp_path / "cache"))


def tiny(model_dir, **more) -> dict:
  return {**json.loads(json.dumps(TINY)), **more, "model": {**TINY["model"], "name": str(model_dir)}}


@pytest.mark.parametrize("bot", [
    {"a": ["one", "two", "three"], "b": ["four", "five", "six"], "c": ["seven", "eight", "nine"]},  # 3 x 3
    PIZZA,  # 7 intents, 1-8 examples each
], ids=["3x3", "7-intents-1-8-examples"])
def test_fit_with_the_defaults_works_on_a_few_intents_and_leaves_no_checkpoints(bot, tiny_bert_dir, tmp_path, capfd):
  texts, labels = as_lists(bot)
  model = fn.fit(texts, labels, method="convfit", workdir=tmp_path / "run", **tiny(tiny_bert_dir))
  predictions = model.predict(["two pizzas please", "hello"])
  assert [p.label in bot for p in predictions] == [True, True]
  config = json.loads((tmp_path / "run" / "config.json").read_text())
  assert config["stage2"]["intents_per_batch"] == len(bot)  # P from the data: all of them, batches padded
  assert config["train"]["batch_size"] == 32 and config["stage2"]["examples_per_class"] == 4  # as shipped
  assert not (tmp_path / "run" / "checkpoints").exists() and (tmp_path / "run" / "export").is_dir()
  out, err = capfd.readouterr()
  assert "Downloading and preparing dataset" not in out + err and "Shuffling" not in out + err


def test_fit_keeps_checkpoints_when_asked_and_a_temporary_workdir_holds_only_the_export(tiny_bert_dir, tmp_path):
  texts, labels = as_lists(PIZZA)
  kept = fn.fit(texts, labels, workdir=tmp_path / "kept", keep_checkpoints=True, **tiny(tiny_bert_dir, **QUICK))
  assert any((kept.workdir / "checkpoints").iterdir())
  temporary = fn.fit(texts, labels, **tiny(tiny_bert_dir, **QUICK))
  assert not (temporary.workdir / "checkpoints").exists() and (temporary.workdir / "export").is_dir()


def test_a_run_that_fails_before_its_first_checkpoint_does_not_claim_the_workdir(tiny_bert_dir, tmp_path):
  texts, labels = as_lists(PIZZA)
  with pytest.raises(Exception):  # fails inside the run, after the claim: the model cannot be loaded
    fn.fit(texts, labels, workdir=tmp_path / "run", **tiny(tmp_path / "no_model_here"))
  assert not (tmp_path / "run" / "identity.json").exists()
  model = fn.fit(texts, labels, workdir=tmp_path / "run", train={"batch_size": 24, "max_steps": 4},
                 **tiny(tiny_bert_dir, eval=QUICK["eval"]))
  assert model.predict(["hello"])[0].label in PIZZA


def test_errors_of_fit_name_fields_as_keyword_arguments(tiny_bert_dir, tmp_path):
  texts, labels = as_lists(PIZZA)
  with pytest.raises(ConfigError, match=r'stage2=\{"intents_per_batch": \.\.\.\}: 8 intents per batch, but '
                     r'intent_table/train has 7; set it to 7 or less'):
    fn.fit(texts, labels, workdir=tmp_path / "run", stage2={"intents_per_batch": 8}, **tiny(tiny_bert_dir))
  with pytest.raises(ConfigError, match=r'stage2=\{"intents_per_batch": \.\.\.\}: 7 intents x 5 utterances '
                     r'\(stage2=\{"examples_per_class": \.\.\.\}\) do not fit batches of train=\{"batch_size": 32\}'):
    fn.fit(texts, labels, workdir=tmp_path / "run", stage2={"intents_per_batch": 7, "examples_per_class": 5},
           **tiny(tiny_bert_dir))
  with pytest.raises(ConfigError, match=r'stage2=\{"examples_per_class": \.\.\.\}: batches of 32 with K=20'):
    fn.fit(texts, labels, workdir=tmp_path / "run2", stage2={"examples_per_class": 20}, **tiny(tiny_bert_dir))
  assert python_spelling("--workdir=x holds a run; use a new --workdir, or add --overwrite") == \
      "workdir=x holds a run; use a new workdir=, or add overwrite=True"
  assert python_spelling("set --config.classifier.kind=prototype or --config.eval.calibration_split=") == \
      """set classifier={"kind": 'prototype'} or eval={"calibration_split": ""}"""


def test_the_default_job_runs_on_a_folder_with_only_train_and_test(tiny_bert_dir, tmp_path):
  folder = tmp_path / "my_bot"
  texts, labels = as_lists(PIZZA)
  for split, rows in (("train", range(len(texts))), ("test", range(0, len(texts), 3))):
    (folder / split).mkdir(parents=True)
    (folder / split / "seq.in").write_text("".join(texts[i] + "\n" for i in rows))
    (folder / split / "label").write_text("".join(labels[i] + "\n" for i in rows))
  workdir = tmp_path / "run"
  result = subprocess.run(
      [sys.executable, "-m", "fewshot_nlu.main", "--config=configs/default.py", f"--workdir={workdir}",
       "--config.data.builder=intent_folder", f"--config.data.raw_dir={folder}", f"--config.model.name={tiny_bert_dir}",
       "--config.model.max_length=16", "--config.compilation_cache_dir=", "--config.mesh.data=1",
       f"--config.data.tfds_dir={tmp_path / 'tfds'}", "--config.train.max_steps=4"],
      cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  warnings = [line for line in result.stderr.splitlines() if line.startswith("W") and "fitted to the data" in line]
  assert len(warnings) == 1, result.stderr  # one line says what the run did without a development split
  for said in ("data.train_split='train'", "classifier.select_split=''", "eval.calibration_split=''"):
    assert said in warnings[0]
  results = json.loads((workdir / "results.json").read_text())
  # 2 to 8 examples per intent: a skewed pool, so without a development split the rule is class prototypes
  assert results["eval_split"] == "test" and results["classifier_selection"]["chosen"] == "prototype"
  config = json.loads((workdir / "config.json").read_text())
  assert config["data"]["train_split"] == "train" and config["stage2"]["intents_per_batch"] == len(PIZZA)
  assert "Downloading and preparing dataset" not in result.stdout + result.stderr


def test_an_explicit_split_the_data_lacks_is_still_an_error(tiny_bert_dir, tmp_path):
  texts, labels = as_lists(PIZZA)
  with pytest.raises(ConfigError, match=r"'dev' is not a split of intent_table"):
    fn.fit(texts, labels, workdir=tmp_path / "run", classifier={"select_split": "dev"}, **tiny(tiny_bert_dir))


@pytest.fixture(scope="module")
def model(tiny_bert_dir, tmp_path_factory):
  import os
  os.environ["FEWSHOT_NLU_CACHE"] = str(tmp_path_factory.mktemp("cache"))
  texts, labels = as_lists(PIZZA)
  return fn.fit(texts, labels, **tiny(tiny_bert_dir, **QUICK))


@pytest.mark.parametrize("texts,labels,message", [
    (["freeze it"], [None], r"labels\[0\]: label None \(a missing value\) is not a string"),
    ([""], ["order"], r"texts\[0\]: empty text"),
    (["  "], ["order"], r"texts\[0\]: empty text"),
    ([None], ["order"], r"texts\[0\]: None \(a missing value\) is not a string"),
    (["two please"], [["order", "menu"]], r"labels\[0\]: \['order', 'menu'\] \(list\): this model takes one string"),
    (["two please"], [""], r"labels\[0\]: empty label"),
    (["a", "b"], ["order"], r"2 texts but 1 labels"),
    ("one text", ["order"], r"texts: expected a list of texts, got one str"),
])
def test_add_examples_checks_its_examples_as_fit_does(model, texts, labels, message):
  before = (list(model.labels), len(model))
  with pytest.raises(ValueError, match=message):
    model.add_examples(texts, labels)
  assert (list(model.labels), len(model)) == before  # nothing half-added


def test_predict_and_scores_answer_empty_lists_and_blank_texts(model):
  assert model.predict([]) == [] and model.scores([]).shape == (0, len(model.labels))
  predictions = model.predict(["", "hello", "   "])
  assert predictions[0] is EMPTY and predictions[2] is EMPTY and predictions[1].label in PIZZA
  assert EMPTY.to_dict() == {"empty": True}
  scores = model.scores(["hello", ""])
  assert np.isfinite(scores[0]).all() and np.isnan(scores[1]).all()
  with pytest.raises(ValueError, match=r"texts\[1\]: 3 \(int\) is not a string"):
    model.predict(["hello", 3])
  with pytest.raises(ValueError, match="got one str; wrap it in a list"):
    model.predict("hello")
  model.add_examples(["  open on holidays?  "], ["hours"])  # stripped, as fit stores texts
  assert model.predict(["open on holidays?"], neighbours=1)[0].neighbours[0].text == "open on holidays?"


def test_load_says_what_it_reads_when_given_a_file_or_nothing(tmp_path):
  table = tmp_path / "train.csv"
  table.write_text("text,label\nhi,greet\n")
  with pytest.raises(DataError, match=r"a file; fn.load reads a model folder .*fn.fit\('.*train.csv'\)"):
    fn.load(table)
  with pytest.raises(MissingDataFile, match="no such folder"):
    fn.load(tmp_path / "nowhere")
