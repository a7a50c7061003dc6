"""The Python API (``fewshot_nlu.fit`` / ``fewshot_nlu.load``): every method end to end on toy data with the tiny
random model (a couple of training steps each), label sets meaning multi-label in every input form, bad input
named by row / file and line, overrides checked like ``main``'s, the workdir's resume / refuse rules, and the same
defaults as ``configs/*.py`` (configs/default.py is ConvFiT's shipped config). The input forms giving the very
same training files: data/test_user_examples."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import fewshot_nlu as fn
from fewshot_nlu import api
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.data import user_examples
from fewshot_nlu.errors import DataError, MissingDataFile
from fewshot_nlu.models.protocol import LabelSetPrediction, Model, Prediction
from fewshot_nlu.workdirs import WorkdirMismatch
from tests.api_helpers import C, LABELS, TEXTS

LABEL_SETS = [["bank"], ["bank", "chat"], ["bank"], ["music"], ["music"], [], ["misc"], ["misc", "music"], ["misc"],
              ["chat"], ["chat"], ["chat", "bank"]]
VALID = ([C[1], C[4], C[10]], ["bank", "music", "chat"])

# the tiny model and a couple of steps; every method's own fields on top
TINY = {"model": {"max_length": 16}, "compilation_cache_dir": "", "mesh": {"data": 1}, "eval": {"batch_size": 16},
        "train": {"batch_size": 8, "max_steps": 1, "save_every": 2, "log_every": 1}}
PER_METHOD = {
    "convfit": {"stage2": {"examples_per_class": 2, "length_groups": 1},  # no second Stage 2 for the threshold
                "eval": {"before_training": False, "calibration_rule": "leave_one_out"}},
    "baseline": {"eval": {"before_training": False}},
    "qaid": {"qaid": {"query_length": 16, "answer_length": 8}},
    "multi_convfit": {"stage2": {"length_groups": 1, "fast_epochs_factor": 1}, "classifier": {"mlp": {"epochs": 5}}},
    "retriever_intents": {"retriever": {"per_label_batch": 2}},
}


def overrides(method: str, model_dir) -> dict:
  merged = json.loads(json.dumps(TINY))
  for section, fields in PER_METHOD[method].items():
    merged.setdefault(section, {}).update(fields)
  merged["model"]["name"] = str(model_dir)
  return merged


@pytest.fixture(autouse=True)
def fit_cache(tmp_path, monkeypatch):
  """fit writes its training files (and their prepared TFDS files) under $FEWSHOT_NLU_CACHE."""
  monkeypatch.setenv("FEWSHOT_NLU_CACHE", str(tmp_path / "cache"))
  return tmp_path / "cache"


def test_import_is_cheap():
  import subprocess
  code = ("import sys, fewshot_nlu as fn; fn.fit; fn.load; "
          "print(sorted(m for m in ('jax', 'tensorflow', 'tensorflow_datasets') if m in sys.modules))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
  assert out.strip() == "[]"


# ------------------------------------------------------------------------------------------- end to end

SLOW = pytest.mark.slow  # ~15 s of CPU each (compiling the training step); convfit runs by default


@pytest.mark.parametrize("method", ["convfit", pytest.param("baseline", marks=SLOW), pytest.param("qaid", marks=SLOW),
                                    pytest.param("multi_convfit", marks=SLOW),
                                    pytest.param("retriever_intents", marks=SLOW)])
def test_fit_predict_add_save_load_every_method(method, tiny_bert_dir, tmp_path):
  multi = method == "multi_convfit"
  labels = LABEL_SETS if multi else LABELS
  validation = None if multi else VALID
  model = fn.fit(TEXTS, labels, method=method, validation=validation, workdir=tmp_path / "run",
                 **overrides(method, tiny_bert_dir))
  assert isinstance(model, Model) and model.workdir == tmp_path / "run"
  recorded = json.loads((tmp_path / "run" / "config.json").read_text())
  assert recorded["method"] == api.METHODS[method] and recorded["data"]["builder"] == "intent_table"
  assert recorded["data"]["eval_split"] == ("train" if validation is None else "valid")
  assert model.results == json.loads((tmp_path / "run" / "results.json").read_text())
  rows = (tmp_path / "run" / "predictions.tsv").read_text().splitlines()
  assert len(rows) == 1 + (len(TEXTS) if validation is None else len(VALID[0]))  # scored what it says it scored
  if method == "convfit":  # the validation texts calibrate its out-of-scope threshold
    assert model.rejection.rule.endswith(f"of {len(VALID[0])} intent_table/valid in-scope utterances")

  queries = [C[0], C[5], "hi thanks a lot"]
  predictions = model.predict(queries)
  assert len(predictions) == 3
  assert all(isinstance(p, LabelSetPrediction if multi else Prediction) for p in predictions)
  names = {"bank", "music", "misc", "chat"}
  assert set(model.labels) == names and all(set(p.labels) <= names for p in predictions)
  scores = model.scores(queries)
  assert scores.shape == (3, len(model.labels)) and np.isfinite(scores).all()
  if not multi:  # single label: the prediction is the best-scoring label
    assert [p.label for p in predictions] == [model.labels[i] for i in scores.argmax(1)]

  model.save(tmp_path / "saved")
  for path in (tmp_path / "saved", tmp_path / "run", tmp_path / "run" / "export"):
    again = fn.load(path)
    assert type(again) is type(model)
    assert again.predict(queries) == predictions
    np.testing.assert_allclose(again.scores(queries), scores, rtol=1e-5, atol=1e-5)

  new = ["set an alarm for seven am please"]
  if multi:
    with pytest.raises(NotImplementedError, match="without retraining"):
      model.add_examples(new, [("alarm",)])
  else:  # a new intent without retraining: the utterance itself is now its nearest labelled row
    model.add_examples(new, ["alarm"])
    assert "alarm" in model.labels and model.predict(new)[0].label == "alarm"


def test_fit_reruns_resume_and_other_data_is_refused(tiny_bert_dir, tmp_path, capsys):
  args = dict(method="convfit", workdir=tmp_path / "run", **overrides("convfit", tiny_bert_dir))
  first = fn.fit(TEXTS, LABELS, **args)
  run = tmp_path / "run"  # the last line on the terminal says where the model, results and report are
  assert capsys.readouterr().err.strip().splitlines()[-1] == (
      f"the model: {run}/export; all results: {run}/results.json; the report: {run}/report.md")
  data_folder = json.loads((tmp_path / "run" / "config.json").read_text())["data"]["raw_dir"]
  again = fn.fit(TEXTS, LABELS, **args)  # the same examples and config: accepted (trained again, the same model)
  assert again.results["steps"] == first.results["steps"] and again.predict(C) == first.predict(C)
  with pytest.raises(WorkdirMismatch, match=r'data=\{"raw_dir": '):
    fn.fit(TEXTS[:-1], LABELS[:-1], **args)  # other examples
  with pytest.raises(WorkdirMismatch, match=r"seed=\.\.\.: 0 -> 1"):
    fn.fit(TEXTS, LABELS, seed=1, **args)
  assert json.loads((tmp_path / "run" / "config.json").read_text())["data"]["raw_dir"] == data_folder  # untouched


@SLOW
def test_fit_from_a_csv_file_without_a_workdir(tiny_bert_dir, tmp_path):
  path = tmp_path / "intents.csv"
  path.write_text("text,label\n" + "".join(f"{t},{l}\n" for t, l in zip(TEXTS, LABELS)))
  model = fn.fit(path, method="baseline", **overrides("baseline", tiny_bert_dir))
  assert model.workdir.name.startswith("fewshot_nlu_baseline_") and (model.workdir / "export").is_dir()
  assert model.results["eval_split"] == "train" and model.results["num_eval"] == len(TEXTS)


# ------------------------------------------------------------------------------------------ input forms

def test_label_sets_mean_multi_label_in_every_form(tmp_path):
  lists = user_examples.read(TEXTS, LABEL_SETS)
  assert lists.multi_label and lists.labels[1] == ("bank", "chat") and lists.labels[5] == ()
  jsonl = tmp_path / "t.jsonl"
  jsonl.write_text("".join(json.dumps({"text": t, "labels": l}) + "\n" for t, l in zip(TEXTS, LABEL_SETS)))
  csv = tmp_path / "t.csv"
  csv.write_text("text,labels\n" + "".join(f"{t},{'#'.join(l)}\n" for t, l in zip(TEXTS, LABEL_SETS)))
  for path in (jsonl, csv):
    assert user_examples.read(path).labels == lists.labels
  pandas = pytest.importorskip("pandas")
  frame = pandas.DataFrame({"text": TEXTS, "labels": LABEL_SETS})
  assert user_examples.read(frame).labels == lists.labels
  with pytest.raises(DataError, match="method 'qaid' is single-label; use method='multi_convfit'"):
    fn.fit(TEXTS, LABEL_SETS, method="qaid")


# -------------------------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("texts,labels,message", [
    (["a b", "c d"], ["x"], r"examples: 2 texts but 1 labels"),
    (["a b", "  ", "e f"], ["x", "y", "x"], r"texts\[1\]: empty text"),
    (["a b", None, "e f"], ["x", "y", "x"], r"texts\[1\]: None \(a missing value\) is not a string"),
    (["a b", "c d", "e f"], ["x", "x", "x"], r"examples: only 1 intent \(x\)"),
    (["a b", "c d", "e f"], ["x", ["y"], "x"], r"labels\[1\]: \['y'\] \(list\) mixes label kinds"),
    (["a b", "c d", "e f"], [["x"], "y", ["x"]], r"labels\[1\]: 'y' \(str\) mixes label kinds"),
    (["a b", "c d", "e f"], ["x", 3, "y"], r"labels\[1\]: label 3 \(int\) is not a string"),
    (["a b", "c d", "e f"], ["x", "", "y"], r"labels\[1\]: empty label"),
    (["a b", "c d"], [["x", float("nan")], ["y"]], r"labels\[0\]: label NaN \(a missing value\) is not a string"),
    ("a b", ["x"], r"examples: got one string \('a b'\) and labels"),
    ({"a b": "x"}, ["x"], r"texts: expected a list"),
    ([], [], r"examples: no examples"),
])
def test_bad_lists_name_the_row(texts, labels, message):
  with pytest.raises(ValueError, match=message):
    fn.fit(texts, labels, method="convfit")


def test_bad_dataframes_name_the_row_and_column():
  pandas = pytest.importorskip("pandas")
  frame = pandas.DataFrame({"text": ["a b", None, "e f"], "label": ["x", "y", "x"]}, index=[10, 11, 12])
  with pytest.raises(DataError, match=r"DataFrame row 1 \(index 11\), column 'text': (None|NaN) \(a missing value\)"):
    fn.fit(frame)
  frame = pandas.DataFrame({"text": ["a b", "c d", "e f"], "label": ["x", float("nan"), "y"]})
  with pytest.raises(DataError, match=r"DataFrame row 1 \(index 1\), column 'label': label NaN"):
    fn.fit(frame)
  with pytest.raises(DataError, match=r"no column 'utterance' \(columns: \['text', 'label'\]\); pass text_column="):
    fn.fit(frame, text_column="utterance")
  with pytest.raises(DataError, match=r"no column 'label' \(or 'intent'\) or 'labels'"):
    fn.fit(pandas.DataFrame({"text": ["a b"], "category": ["x"]}))
  with pytest.raises(DataError, match=r"columns 'label' and 'intent' \(columns"):
    fn.fit(pandas.DataFrame({"text": ["a b"], "label": ["x"], "intent": ["x"]}))
  with pytest.raises(DataError, match="a DataFrame holds its own labels"):
    fn.fit(frame, ["x", "y", "z"])


@pytest.mark.parametrize("name,content,error,message", [
    ("t.csv", "text,label\na b,x\n,y\n", DataError, r"t\.csv:3: field 'text' is empty"),
    ("t.csv", "text,category\na b,x\n", DataError,
     r"t\.csv:1 \(header\): field 'label' \(or 'intent'\) or 'labels' missing"),
    ("t.jsonl", '{"text": "a b", "label": "x"}\n{"text": "c d", "label": \n', DataError, r"t\.jsonl:2: invalid JSON"),
    ("t.jsonl", '{"text": "a b", "label": "x"}\n{"text": "c d", "labels": ["y"]}\n', DataError,
     r"t\.jsonl:2: field 'labels', but line 1 uses 'label'"),
    ("t.csv", b"text,label\na b,x\nc \xff,y\n", DataError, r"t\.csv:3: not valid UTF-8"),
    ("t.txt", "a b\n", DataError, r"t\.txt: expected a \.csv or \.jsonl file"),
    ("missing.csv", None, MissingDataFile, r"missing\.csv: no such file"),
])
def test_bad_files_name_the_file_and_line(tmp_path, name, content, error, message):
  path = tmp_path / name
  if isinstance(content, bytes):
    path.write_bytes(content)
  elif content is not None:
    path.write_text(content)
  with pytest.raises(error, match=message):
    fn.fit(path)


# -------------------------------------------------------------------------------------------- overrides

@pytest.mark.parametrize("given,message", [
    ({"train": {"epochz": 3}}, r'train=\{"epochz": \.\.\.\}: method \'convfit\' has no such field'),
    ({"train.epochs": "three"}, r'train=\{"epochs": \.\.\.\}: \'three\' \(str\) does not fit the field\'s type \(int'),
    ({"data": {"raw_dir": "elsewhere"}}, r'data=\{"raw_dir": \.\.\.\}: set by fit'),
    ({"stage2": 3}, r"stage2=\.\.\.: a section"),
    ({"loss": {"scale": 2.0}}, r'loss=\{"scale": \.\.\.\}: method \'convfit\' has no such field'),
])
def test_bad_overrides_name_the_field(given, message, tmp_path):
  with pytest.raises(ConfigError, match=message):
    fn.fit(TEXTS, LABELS, method="convfit", workdir=tmp_path / "run", **given)
  assert not (tmp_path / "run").exists()  # refused before anything is written


def test_config_checks_of_main_apply(tmp_path, tiny_bert_dir):
  with pytest.raises(ConfigError, match=r'train=\{"learning_rate": \.\.\.\}: nan is not a finite number'):
    fn.fit(TEXTS, LABELS, method="convfit", workdir=tmp_path / "run",
           **{**overrides("convfit", tiny_bert_dir), "train.learning_rate": float("nan")})
  with pytest.raises(ConfigError, match=r"method: 'setfit' is not one of"):
    fn.fit(TEXTS, LABELS, method="setfit")


def test_overrides_as_sections_or_dotted_names_are_the_same():
  a, b = (api.default_config("convfit", user_examples.read(TEXTS, LABELS)) for _ in range(2))
  api.apply_overrides(a, {"train": {"epochs": 3}, "stage2": {"loss": "cos"}, "seed": 4}, "convfit")
  api.apply_overrides(b, {"train.epochs": 3, "stage2.loss": "cos", "seed": 4}, "convfit")
  assert a.to_dict() == b.to_dict() and a.train.epochs == 3 and a.seed == 4


# ----------------------------------------------------------------------------------- the same defaults

@pytest.mark.parametrize("method,module,arg,per_intent", [
    ("convfit", "convfit_banking77", "10", 10), ("convfit", "convfit_banking77", "30", 30),
    ("convfit", "convfit_banking77", "full", 100), ("qaid", "qaid_banking77", "5", 5),
    ("multi_convfit", "multi_convfit_mixatis", "low", 5), ("baseline", "intent_mneg", None, 10),
])
def test_fit_starts_from_the_configs_defaults(method, module, arg, per_intent):
  import importlib
  texts = [f"utterance {i}" for i in range(2 * per_intent)]
  train = user_examples.read(texts, ["a", "b"] * per_intent)
  ours = _flat(api.default_config(method, train).to_dict())
  shipped = importlib.import_module(f"configs.{module}")
  theirs = _flat((shipped.get_config(arg) if arg else shipped.get_config()).to_dict())
  differ = {k for k in set(ours) | set(theirs) if ours.get(k, "-") != theirs.get(k, "-")}
  # only where the data comes from, and QAID's / ConvFiT's development selection (fit's validation is the scored
  # split)
  selection = {"qaid": {"eval.dev_split", "eval.select_best", "eval.patience"},
               "convfit": {"classifier.select_split"}}.get(method, set())
  assert differ <= set(api.DATA_FIELDS) | selection


def _flat(tree, prefix=""):
  out = {}
  for key, value in tree.items():
    out.update(_flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
  return out


# ------------------------------------------------------------------------------------------------ README

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def readme_python_example() -> str:
  """The first ```python block of README's "Use it from Python" section."""
  text = README.read_text()
  section = text[text.index("## Use it from Python"):]
  start = section.index("```python\n") + len("```python\n")
  return section[start:section.index("```\n", start)]


def test_readme_python_example_runs(tiny_bert_dir, tmp_path, monkeypatch, capsys):
  """Runs README's example as written, with one change, made by wrapping ``fit``: the tiny random model
  instead of MiniLM, one training step and a single device (the ``TINY_RUN`` fields below are added to the
  example's own arguments, which stay as they are). The predictions are therefore meaningless; the test
  checks that every call of the example works and that the new intent survives save / load."""
  tiny_run = {"model.name": str(tiny_bert_dir), "model.max_length": 16, "compilation_cache_dir": "",
              "mesh.data": 1, "train.max_steps": 1, "stage2.length_groups": 1, "eval.before_training": False}
  real_fit = api.fit
  monkeypatch.setattr(api, "fit", lambda *args, **kwargs: real_fit(*args, **kwargs, **tiny_run))
  monkeypatch.chdir(tmp_path)
  namespace: dict = {}
  exec(compile(readme_python_example(), str(README), "exec"), namespace)
  printed = capsys.readouterr().out.splitlines()[-4:]  # the example's prints (TFDS's notes on preparing come first)
  assert printed[0].split()[0] in ("lost_card", "balance", "transfer", "greeting") and printed[2] == "(1, 4)"
  assert "freeze_card" in namespace["model"].labels and (tmp_path / "my_intents").is_dir()  # the loaded model


# ------------------------------------------------------------------------------------------- method record

FAKE_METHOD = '''
"""A method written for the test: it trains nothing and exports the untouched encoder's nearest examples."""
from fewshot_nlu import workdirs
from fewshot_nlu.data import splits
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.models.intent_model import IntentModel


def validate(config):
  pass


def fit_config(train):
  from fewshot_nlu.defaults import intent_mneg
  config = intent_mneg.get_config()  # less what this method never reads (main refuses an ignored field)
  del config["mesh"], config["sharding"]
  for field in ("frozen", "grad_clip_norm", "group_learning_rates", "max_steps", "trainable"):
    del config.train[field]
  return config


def run(config, workdir):
  train = splits.read_split(config, config.data.train_split)
  encoder = SentenceEncoder.from_pretrained(config.model.name, max_length=config.model.max_length)
  model = IntentModel.from_examples(encoder, train.texts, train.labels)
  with workdirs.atomic_folder(workdir / "export") as export:
    model.save(export)
  return workdirs.write_results(workdir, {"method": config.method, "num_pool": len(train.texts)})
'''


def test_a_method_added_through_the_record_alone_is_fit_and_carded(tiny_bert_dir, tmp_path, monkeypatch):
  """One row in ``methods.METHODS`` is all a new method needs: ``fit`` finds it by its fit name and starts from
  its defaults, ``main``'s runner runs it, and the model card names its paper."""
  from fewshot_nlu import methods
  (tmp_path / "fake_method_for_test.py").write_text(FAKE_METHOD)
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.setitem(methods.METHODS, "fake", methods.Method(
      "fake_method_for_test", "A fake method (Nobody et al., 2026)", "fake", "fake_method_for_test:fit_config",
      ("intent_model",)))
  monkeypatch.setattr(api, "METHODS", methods.fit_methods())
  model = fn.fit(TEXTS, LABELS, method="fake", workdir=tmp_path / "run", model={"name": str(tiny_bert_dir)},
                 compilation_cache_dir="")
  assert model.results["method"] == "fake" and model.results["num_pool"] == len(TEXTS)
  assert set(model.labels) == set(LABELS)
  assert "A fake method (Nobody et al., 2026)" in (tmp_path / "run" / "export" / "README.md").read_text()


def test_one_convfit_default_everywhere():
  """configs/default.py (the README's first command) is ConvFiT's shipped BANKING77 10-shot config, and
  ``fit(..., method="convfit")`` trains the same model on 10-shot examples: every training, Stage 2 and model
  field equal (the two differ only in where the data comes from and in the development split ``fit`` has not)."""
  from configs import convfit_banking77, default
  from fewshot_nlu import api
  from fewshot_nlu.data.user_examples import Examples
  ours, shipped = _flat(default.get_config().to_dict()), _flat(convfit_banking77.get_config("10").to_dict())
  assert ours == shipped and ours["train.frozen_prefix_layers"] == -1 and ours["method"] == "convfit"
  texts = [f"utterance {i}" for i in range(30)]
  fitted = _flat(api.default_config("convfit", Examples(tuple(texts), tuple(f"intent{i % 3}" for i in range(30)),
                                                        False, "test")).to_dict())
  training = ("train.", "stage2.", "model.", "classifier.kind", "classifier.candidates", "classifier.space",
              "classifier.linear")
  differ = {k for k in ours.keys() | fitted.keys() if k.startswith(training) and ours.get(k) != fitted.get(k)}
  assert not differ, differ
