"""The entry point: config errors before any compile, a refused run reported in one line with status 2, and
end-to-end runs (tiny model; real MiniLM)."""

import json
import os
import re
import pathlib
import subprocess
import sys
import types

import pytest

from fewshot_nlu import errors, main, predict, workdirs
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.encoders import pretrained
from fewshot_nlu.train import loop
from tests import report_checks, tiny
from tests.conftest import SHARED_DATA

from configs import intent_mneg as baseline_config

REPO = pathlib.Path(__file__).parents[1]


def _cli(*args, workdir):
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  return subprocess.run([sys.executable, "-m", "fewshot_nlu.main", "--config=configs/intent_mneg.py",
                         f"--workdir={workdir}", *args], cwd=REPO, env=env, capture_output=True, text=True,
                        timeout=300)


def test_cli_unknown_field(tmp_path):
  result = _cli("--config.train.bogus_field=1", workdir=tmp_path / "w")
  assert result.returncode != 0 and "bogus_field" in result.stderr


def test_cli_wrong_type(tmp_path):
  result = _cli("--config.train.batch_size=lots", workdir=tmp_path / "w")
  assert result.returncode != 0 and "batch_size" in result.stderr


def test_cli_missing_data_dir(tmp_path):
  result = _cli("--config.data.dir=/no/such/dir", workdir=tmp_path / "w")
  assert result.returncode == 2
  assert "error: config.data.dir: directory '/no/such/dir' does not exist" in result.stderr
  assert not (tmp_path / "w").exists()  # failed before anything was written or compiled


def _toy_dataset(root: pathlib.Path, train: dict[str, list[str]], test: dict[str, list[str]]):
  for split, data in (("train", train), ("test", test)):
    (root / "TOY" / split).mkdir(parents=True)
    pairs = [(t, label) for label, texts in data.items() for t in texts]
    (root / "TOY" / split / "seq.in").write_text("".join(t + "\n" for t, _ in pairs))
    (root / "TOY" / split / "label").write_text("".join(l + "\n" for _, l in pairs))
  return root


def _toy_config(data_dir, model):
  config = baseline_config.get_config()
  config.data.builder = "intent_folder"
  config.data.raw_dir = str(data_dir / "TOY")
  config.data.tfds_dir = str(data_dir / "tfds")
  config.data.train_split = "train"
  config.data.eval_split = "test"
  config.model.name = str(model)
  config.train.batch_size = 8
  config.train.save_every = 2
  config.train.log_every = 1
  config.compilation_cache_dir = ""
  config.eval.before_training = False
  return config


@pytest.mark.parametrize("field,value,message", [
    ("train.batch_size", 0, "config.train.batch_size: must be a positive number"),
    ("train.decay", "exponential", "config.train.decay: 'exponential' is not one of"),
    ("data.eval_split", "dev", "config.data.eval_split: 'dev' is not a split of intent_folder; available: ['test', 'train']"),
    ("data.builder", "imagenet", "config.data.builder: 'imagenet' is not one of"),
    ("method", "magic", "config.method: 'magic' is not one of"),
])
def test_config_errors_name_the_field(tmp_path, tiny_bert_dir, field, value, message):
  config = _toy_config(_toy_dataset(tmp_path / "data", {"a": ["x"]}, {"a": ["y"]}), tiny_bert_dir)
  section, _, name = field.rpartition(".")
  (config[section] if section else config)[name] = value
  with pytest.raises(ConfigError, match=re.escape(message)):
    main.run(config, tmp_path / "w")


def test_end_to_end_tiny_and_resume_is_a_no_op(tmp_path, tiny_bert_dir):
  corpus = tiny.CORPUS
  data = _toy_dataset(tmp_path / "data", {"bank": corpus[:3], "music": corpus[3:6], "misc": corpus[6:11]},
                      {"bank": corpus[4:5], "music": corpus[11:12]})
  config = _toy_config(data, tiny_bert_dir)
  config.train.epochs = 2
  workdir = tmp_path / "run"
  results = main.run(config, workdir)
  assert results["steps"] == 4 and results["num_eval"] == 2 and results["num_pool"] == 11
  rows = [r.split("\t") for r in (workdir / "predictions.tsv").read_text().splitlines()]
  assert rows[0][:4] == ["text", "gold", "predicted", "score"] and len(rows) == 1 + 2
  # The reported accuracy is the predictions file's; the first test utterance is also a training utterance,
  # labelled differently on purpose: 1-NN must find that copy (cosine 1) and predict its training label.
  assert results["accuracy"] == sum(r[1] == r[2] for r in rows[1:]) / 2
  assert rows[1][:4] == [corpus[4], "bank", "music", "1.0000"], rows[1]
  report_checks.assert_report_matches_predictions(workdir)
  assert json.loads((workdir / "results.json").read_text()) == results
  assert json.loads((workdir / "config.json").read_text())["train"]["epochs"] == 2
  lines = [json.loads(l) for l in (workdir / "metrics.jsonl").read_text().splitlines()]
  assert [l["step"] for l in lines if "train/loss" in l] == [1, 2, 3, 4]
  assert any((workdir / "tensorboard").iterdir())
  exported = pretrained.load_pretrained(str(workdir / "export"))
  assert exported.config == pretrained.load_pretrained(str(tiny_bert_dir)).config
  assert json.loads((workdir / "export" / "labels.json").read_text()) == ["bank", "misc", "music"]
  # sentence-transformers' module files and the run's model card
  modules = json.loads((workdir / "export" / "modules.json").read_text())
  assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling", "Normalize"]
  card = (workdir / "export" / "README.md").read_text()
  assert card.startswith("# Intent classifier (intent_mneg)") and f"| accuracy | {results['accuracy']:.4g} |" in card
  assert "fewshot_nlu.main.run" in card and "SentenceTransformer(" in card
  # the export is also the 1-NN classifier itself: the predict CLI answers from it
  assert predict.main(["--model", str(workdir / "export"), "--output", str(tmp_path / "p.jsonl"), corpus[3]]) == 0
  [row] = [json.loads(l) for l in (tmp_path / "p.jsonl").read_text().splitlines()]
  assert row["label"] == "music" and row["neighbours"][0]["text"] == corpus[3]
  again = main.run(config, workdir)  # everything already trained: restores the final checkpoint
  assert again == results


@pytest.mark.integration
def test_end_to_end_real_minilm_on_banking77_subset(tmp_path):
  """The shipped MiniLM, 8 BANKING77 intents (10-shot train, their full test rows), one epoch."""
  source = SHARED_DATA / "BANKING77"
  if not source.exists():
    pytest.skip(f"{source} not present (set FEWSHOT_NLU_DATA)")
  def read(split):
    texts = (source / split / "seq.in").read_text().splitlines()
    labels = (source / split / "label").read_text().splitlines()
    keep = sorted(set(labels))[:8]
    out = {}
    for t, l in zip(texts, labels):
      if l in keep:
        out.setdefault(l, []).append(t)
    return out
  data = _toy_dataset(tmp_path / "data", read("train_10"), read("test"))
  config = _toy_config(data, "minilm-l6")
  config.train.batch_size = 16
  config.mesh.data = 1  # the sharded path is covered by test_sharding; one device keeps this quick
  results = main.run(config, tmp_path / "run")
  assert results["num_pool"] == 80 and results["num_eval"] == 8 * 40
  assert results["accuracy"] > 0.6, results  # chance is 0.125; untouched MiniLM is ~0.9 here


@pytest.mark.parametrize("error", [loop.TrainingDiverged("training diverged at step 3: loss is nan; lower it"),
                                   workdirs.WorkdirBusy("--workdir=w is in use by another run (pid 1)"),
                                   workdirs.WorkdirMismatch("--workdir=w holds a run of another config"),
                                   errors.DataError("d/train/seq.in:3: empty line"),
                                   ConfigError("config.x: bad")])
def test_main_reports_a_refused_run_in_one_line_with_status_2(monkeypatch, capsys, error):
  def run(config, workdir, overwrite, command=None, explicit=None):
    raise error
  monkeypatch.setattr(main, "run", run)
  monkeypatch.setattr(main, "FLAGS", types.SimpleNamespace(config=None, workdir="w", overwrite=False, verbose=False))
  monkeypatch.setattr(main, "explicit_fields", lambda: [])
  with pytest.raises(SystemExit) as exit_info:
    main.main(["main"])
  assert exit_info.value.code == 2
  assert capsys.readouterr().err == f"error: {error}\n"


def test_verbose_shows_the_traceback_and_a_bug_keeps_its_traceback(monkeypatch):
  def run(config, workdir, overwrite, command=None, explicit=None):
    raise error
  monkeypatch.setattr(main, "run", run)
  for error, verbose in ((ConfigError("config.x: bad"), True), (KeyError("a bug"), False)):
    monkeypatch.setattr(main, "explicit_fields", lambda: [])
    monkeypatch.setattr(main, "FLAGS", types.SimpleNamespace(config=None, workdir="w", overwrite=False,
                                                             verbose=verbose))
    with pytest.raises(type(error)):
      main.main(["main"])


def test_the_terminal_shows_the_headline_results_and_leaves_tables_to_the_file():
  from fewshot_nlu.main import summary
  results = {"accuracy": 0.9, "labels": ["a", "b"], "per_class": [{"a": 1}], "many": list(range(11)),
             "slots": {"threshold": 0.5, "cv_by_entity": {"size": {"f1": 80.0}}, "how": "4-fold"},
             "tables": {"fold1": {"f1": 1.0}}}
  assert summary(results) == {"accuracy": 0.9, "labels": ["a", "b"], "slots": {"threshold": 0.5, "how": "4-fold"}}
