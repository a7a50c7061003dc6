"""Runs that cannot lie: every number in a config finite and in range before anything runs; a diverging run stops
at once and exports nothing; exports readable by other users and written whole; one run per workdir at a time,
and one config per workdir; a checkpoint that does not restore is skipped for the previous one; user errors in
one line; ``predict`` outputs aligned with its inputs."""

import json
import math
import os
import pathlib
import re
import subprocess
import sys
import types

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from configs import convfit_banking77 as convfit_config
from configs import convfit_stage1 as stage1_config
from configs import intent_mneg as baseline_config
from configs import dse_pretrain as dse_config
from fewshot_nlu import config_checks, errors, main, predict, sharding, workdirs
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import pretrained, transformer
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.methods import baseline as intent_mneg
from fewshot_nlu.train import loop
from fewshot_nlu.train.checkpoint import Checkpointer
from fewshot_nlu.train.metrics import MetricWriter
from fewshot_nlu.train.setup import build_training
from tests import tiny
from tests.test_main import _toy_config, _toy_dataset

REPO = pathlib.Path(__file__).parents[1]
NAN, INF = float("nan"), float("inf")


def _umask() -> int:
  mask = os.umask(0o022)
  os.umask(mask)
  return mask


@pytest.fixture
def toy(tmp_path, tiny_bert_dir):
  """A valid intent_mneg config on a toy dataset (a few steps of a tiny BERT)."""
  corpus = tiny.CORPUS
  data = _toy_dataset(tmp_path / "data", {"bank": corpus[:3], "music": corpus[3:6], "misc": corpus[6:11]},
                      {"bank": corpus[4:5], "music": corpus[11:12]})
  return _toy_config(data, tiny_bert_dir)


# ------------------------------------------------------------------------------------- A: config numbers

@pytest.mark.parametrize("field,value,message", [
    ("train.learning_rate", NAN, "config.train.learning_rate: nan is not a finite number"),
    ("train.learning_rate", INF, "config.train.learning_rate: inf is not a finite number"),
    ("train.weight_decay", NAN, "config.train.weight_decay: nan is not a finite number"),
    ("train.warmup_fraction", -INF, "config.train.warmup_fraction: -inf is not a finite number"),
    ("loss.scale", NAN, "config.loss.scale: nan is not a finite number"),
    ("train.group_learning_rates", (("layer_1/.*", NAN),),
     "config.train.group_learning_rates[0][1]: nan is not a finite number"),
    ("train.max_steps", -5, "config.train.max_steps: must be a number >= 0, got -5"),
    ("train.keep_checkpoints", 0, "config.train.keep_checkpoints: must be a positive number, got 0"),
    ("train.weight_decay", -0.1, "config.train.weight_decay: must be a number >= 0, got -0.1"),
    ("train.grad_clip_norm", -1.0, "config.train.grad_clip_norm: must be a number >= 0, got -1.0"),
    ("train.learning_rate", 0.0, "config.train.learning_rate: must be a positive number, got 0.0"),
    ("train.group_learning_rates", (("layer_1/.*", 0.0),),
     "config.train.group_learning_rates[0]: the learning rate of 'layer_1/.*' must be a positive number, got 0.0"),
    ("loss.scale", 0.0, "config.loss.scale: must be a positive number, got 0.0"),
    ("loss.scale", -20.0, "config.loss.scale: must be a positive number, got -20.0"),
])
def test_bad_numbers_are_config_errors_naming_the_field(toy, tmp_path, field, value, message):
  section, _, name = field.rpartition(".")
  config_checks.get(toy, section)[name] = value
  with pytest.raises(ConfigError, match=re.escape(message)):
    main.run(toy, tmp_path / "w")
  assert not (tmp_path / "w").exists()  # refused before anything was written or compiled


def test_every_number_is_checked_wherever_it_sits():
  config = ml_collections.ConfigDict({"a": {"b": 1, "c": (0.5, ("x", 2.0)), "flag": True, "name": "nan"}})
  config_checks.require_finite_numbers(config)  # strings and bools are not numbers
  assert dict(config_checks.numeric_leaves(config)) == {"config.a.b": 1, "config.a.c[0]": 0.5,
                                                         "config.a.c[1][1]": 2.0}
  config.a.c = (0.5, ("x", NAN))
  with pytest.raises(ConfigError, match=re.escape("config.a.c[1][1]: nan is not a finite number")):
    config_checks.require_finite_numbers(config)
  for bad in (NAN, INF, True):
    with pytest.raises(ConfigError, match="must be a positive number"):
      config_checks.require_positive(ml_collections.ConfigDict({"x": bad}), "x")


@pytest.mark.parametrize("make,field,value,message", [
    (stage1_config.get_config, "loss.scale", 0.0, "config.loss.scale: must be a positive number, got 0.0"),
    (stage1_config.get_config, "train.max_steps", -1, "config.train.max_steps: must be a number >= 0, got -1"),
    (stage1_config.get_config, "loss.cache_chunks", -1, "config.loss.cache_chunks: must be a number >= 0, got -1"),
    (dse_config.get_config, "loss.temperature", 0.0, "config.loss.temperature: must be a positive number, got 0.0"),
    (dse_config.get_config, "train.max_steps", -5, "config.train.max_steps: must be a number >= 0, got -5"),
    (dse_config.get_config, "loss.temperature", INF, "config.loss.temperature: inf is not a finite number"),
    (convfit_config.get_config, "stage2.margin", 0.0, "config.stage2.margin: the OCL margin on the cosine distance "
     "1 - cos must lie in (0, 2], got 0.0"),
    (convfit_config.get_config, "stage2.margin", 2.5, "must lie in (0, 2], got 2.5"),
])
def test_other_methods_check_their_scales_and_steps(tmp_path, make, field, value, message):
  config = make()
  section, _, name = field.rpartition(".")
  config_checks.get(config, section)[name] = value
  with pytest.raises(ConfigError, match=re.escape(message)):
    main.run(config, tmp_path / "w")
  assert not (tmp_path / "w").exists()


def test_mlp_head_weight_decay_must_not_be_negative():
  from configs import common
  config = ml_collections.ConfigDict({"classifier": {"mlp": common.mlp_classifier(weight_decay=-0.01)}})
  with pytest.raises(ConfigError, match=re.escape("config.classifier.mlp.weight_decay: must be a number >= 0")):
    mlp_head.validate_config(config, "classifier.mlp")


def _cli(*args, workdir, timeout=300):
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  return subprocess.run([sys.executable, "-m", "fewshot_nlu.main", "--config=configs/intent_mneg.py",
                         f"--workdir={workdir}", *args], cwd=REPO, env=env, capture_output=True, text=True,
                        timeout=timeout)


def test_cli_nan_learning_rate_exits_2_naming_the_field(tmp_path):
  result = _cli("--config.train.learning_rate=nan", workdir=tmp_path / "w")
  assert result.returncode == 2, result.stderr
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line == "error: config.train.learning_rate: nan is not a finite number"
  assert not (tmp_path / "w").exists()


# ------------------------------------------------------------------------------------------ B: divergence

def _loop(workdir, model, loss_fn=None, grads_fn=None, *, total_steps=4, save_every=3, log_every=3):
  """``loop.train`` of a tiny BERT on a few toy batches with the given loss / gradients."""
  config = baseline_config.get_config()
  mesh = sharding.make_mesh({"data": 2}, jax.devices()[:2])
  split = intent_mneg.IntentSplit(tiny.CORPUS[:10], [f"l{i % 4}" for i in range(10)], None)
  make_batch = intent_mneg.make_batcher(split, {f"l{i}": i for i in range(4)}, model.tokenizer, 32, seed=0)
  stream = EpochStream(10, 4, make_batch, seed=0)
  training = build_training(model.params, transformer.logical_axes(model.config), loss_fn, total_steps, mesh,
                            config, grads_fn)
  checkpointer = Checkpointer(workdir, save_every, keep=10)
  writer = MetricWriter(workdir, tensorboard=False)
  try:
    return loop.train(training=training, stream=stream, total_steps=total_steps, mesh=mesh,
                      checkpointer=checkpointer, writer=writer, log_every=log_every, divergence_hint="try less")
  finally:
    checkpointer.close()
    writer.close()


@pytest.fixture(scope="module")
def tiny_model(tiny_bert_dir):
  return pretrained.load_pretrained(str(tiny_bert_dir))


def test_a_nan_loss_stops_at_the_first_bad_step_before_any_checkpoint(tiny_model, tmp_path):
  def loss_fn(params, batch, rng):
    weight = params["embeddings"]["word_embeddings"]["embedding"]
    return jnp.sum(weight) * 0.0 + jnp.log(-1.0), {}  # NaN from the first step on (gradients stay 0)

  with pytest.raises(loop.TrainingDiverged,
                     match=re.escape("training diverged at step 1: loss is nan; try less")):
    _loop(tmp_path, tiny_model, loss_fn)  # steps 1-3 are fetched at step 3: the first bad one is named
  assert (Checkpointer(tmp_path, 3).latest_step() or 0) < 3  # the step-3 save was never made
  [line] = (tmp_path / "metrics.jsonl").read_text().splitlines()  # the bad metrics are logged, then the stop
  assert not math.isfinite(json.loads(line)["train/loss"])


def test_non_finite_parameters_stop_the_run_at_a_save_between_log_steps(tiny_model, tmp_path):
  def grads_fn(params, batch, rng):  # a finite loss, NaN gradients: the parameters become NaN
    return jnp.float32(1.0), {}, jax.tree.map(lambda p: jnp.full_like(p, jnp.nan), params)

  with pytest.raises(loop.TrainingDiverged,
                     match=re.escape("training diverged at step 1: the parameters are not finite (NaN / inf); "
                                     "try less")):
    _loop(tmp_path, tiny_model, grads_fn=grads_fn, save_every=1, log_every=100)
  assert Checkpointer(tmp_path, 1).latest_step() is None


def test_params_check():
  mesh = sharding.make_mesh({"data": 2}, jax.devices()[:2])
  all_finite = loop.make_params_check(mesh)
  params = {"a": jnp.ones((4, 2)), "b": {"c": jnp.zeros(3), "n": jnp.arange(3)}}
  assert bool(all_finite(params))
  assert not bool(all_finite({**params, "a": params["a"].at[1, 1].set(jnp.inf)}))
  assert not bool(all_finite({**params, "b": {"c": jnp.array([0.0, jnp.nan, 1.0]), "n": jnp.arange(3)}}))


def test_a_diverging_run_raises_and_exports_nothing(toy, tmp_path):
  toy.train.epochs = 4
  toy.train.learning_rate = 1e9  # loss NaN within a few steps (tiny BERT, toy data)
  with pytest.raises(loop.TrainingDiverged, match=r"training diverged at step \d+: .*; lower "
                     r"config\.train\.learning_rate \(now 1e\+09\)"):
    main.run(toy, tmp_path / "run")
  assert not (tmp_path / "run" / "export").exists() and not (tmp_path / "run" / "results.json").exists()


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


# -------------------------------------------------------------------------------------------- C: file modes

@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002], ids=oct)
def test_safetensors_files_get_the_umask_mode(tmp_path, umask):
  previous = os.umask(umask)
  try:
    workdirs.save_safetensors({"x": np.zeros(3, np.float32)}, tmp_path / "x.safetensors")
    assert workdirs._umask() == umask
  finally:
    os.umask(previous)
  assert (tmp_path / "x.safetensors").stat().st_mode & 0o777 == 0o666 & ~umask


def test_every_safetensors_save_goes_through_the_helper():
  package = REPO / "fewshot_nlu"
  callers = [str(p.relative_to(REPO)) for p in package.rglob("*.py") if "save_file" in p.read_text()]
  assert callers == ["fewshot_nlu/workdirs.py"]


def test_a_finished_run_exports_readable_files_and_releases_its_lock(toy, tmp_path):
  toy.train.epochs = 1
  workdir = tmp_path / "run"
  main.run(toy, workdir)
  files = [p for p in (workdir / "export").rglob("*") if p.is_file()]
  assert any(p.suffix == ".safetensors" for p in files)
  assert {str(p.relative_to(workdir)): oct(p.stat().st_mode & 0o777) for p in files} == {
      str(p.relative_to(workdir)): oct(0o666 & ~_umask()) for p in files}
  with workdirs.lock(workdir):  # released when the run ended
    pass


# ------------------------------------------------------------------------------------------- D: workdir lock

HOLDER = """
import sys, time
from fewshot_nlu import workdirs
with workdirs.lock(sys.argv[1]):
  print("locked", flush=True)
  time.sleep(600)
"""


@pytest.fixture
def holder(tmp_path):
  """A second process holding ``tmp_path / "run"``'s lock until killed."""
  workdir = tmp_path / "run"
  process = subprocess.Popen([sys.executable, "-c", HOLDER, str(workdir)], cwd=REPO, stdout=subprocess.PIPE,
                             text=True)
  try:
    assert process.stdout.readline().strip() == "locked"
    yield workdir, process
  finally:
    process.kill()
    process.wait()


def test_a_held_workdir_is_refused_naming_the_holder_and_a_dead_holder_is_taken_over(holder):
  workdir, process = holder
  with pytest.raises(workdirs.WorkdirBusy, match=re.escape(f"--workdir={workdir} is in use by another run "
                                                           f"(pid {process.pid}")):
    with workdirs.lock(workdir):
      pass
  process.kill()
  process.wait()
  with workdirs.lock(workdir):  # the dead process's lock is gone: taken over at once
    assert (workdir / ".lock").read_text() == f"{os.getpid()}\n"


def test_cli_refuses_a_held_workdir_with_status_2(holder, toy):
  workdir, process = holder
  fields = ("data.builder", "data.raw_dir", "data.tfds_dir", "data.train_split", "model.name", "train.batch_size")
  overrides = [f"--config.{field}={config_checks.get(toy, field)}" for field in fields]
  result = _cli(*overrides, "--config.compilation_cache_dir=", workdir=workdir)
  assert result.returncode == 2, result.stderr
  assert result.stderr.strip().splitlines()[-1] == (
      f"error: --workdir={workdir} is in use by another run (pid {process.pid}, holding {workdir}/.lock); "
      "wait for it to finish or use another --workdir")
  assert sorted(p.name for p in workdir.iterdir()) == [".lock"]  # nothing of the refused run was written


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


def test_a_full_disk_is_one_line_even_when_wrapped():
  import errno
  try:
    try:
      raise OSError(errno.ENOSPC, "No space left on device", "/runs/x/checkpoints/4/state")
    except OSError as e:
      raise RuntimeError("orbax: save failed") from e
  except RuntimeError as wrapped:
    assert errors.one_line(wrapped).startswith("error: /runs/x/checkpoints/4/state: no space left on device; free")
  assert errors.one_line(RuntimeError("a bug")) is None


def test_a_bad_data_file_is_a_data_error_naming_file_and_line(tmp_path, tiny_bert_dir):
  corpus = tiny.CORPUS
  data = _toy_dataset(tmp_path / "data", {"bank": corpus[:3], "music": corpus[3:6]}, {"bank": corpus[4:5]})
  seq_in = data / "TOY" / "train" / "seq.in"
  lines = seq_in.read_text().splitlines()
  lines[1] = ""
  seq_in.write_text("".join(line + "\n" for line in lines))
  with pytest.raises(errors.DataError) as info:
    main.run(_toy_config(data, tiny_bert_dir), tmp_path / "run")
  assert errors.one_line(info.value) == f"error: {seq_in}:2: empty line (every line must hold one example)"


# ------------------------------------------------------------------------------------- E: workdir identity

def _claimable(tmp_path) -> ml_collections.ConfigDict:
  """A config with a user's data folder, for ``workdirs.claim`` alone (nothing is trained)."""
  folder = tmp_path / "data"
  folder.mkdir(exist_ok=True)
  (folder / "seq.in").write_text("hello\n")
  return ml_collections.ConfigDict({"method": "intent_mneg", "seed": 0, "data": {"raw_dir": str(folder),
                                    "eval_split": "test"}, "train": {"learning_rate": 2e-5, "log_every": 5},
                                    "eval": {"batch_size": 32}, "compilation_cache_dir": ""})


def test_a_rerun_with_another_config_is_refused_naming_the_fields(tmp_path):
  config, workdir = _claimable(tmp_path), tmp_path / "run"
  workdirs.claim(workdir, config)
  recorded = (workdir / workdirs.IDENTITY_FILE).read_text()
  config.train.learning_rate, config.seed = 1e-4, 3
  with pytest.raises(workdirs.WorkdirMismatch, match=re.escape(
      f"--workdir={workdir} holds a run of another config, so resuming it would report one model under another's "
      "config: config.seed: 0 -> 3; config.train.learning_rate: 2e-05 -> 0.0001; use a new --workdir, or add "
      "--overwrite to delete that run and start afresh")):
    workdirs.claim(workdir, config)
  assert (workdir / workdirs.IDENTITY_FILE).read_text() == recorded


def test_evaluation_logging_and_layout_fields_may_change_on_resume(tmp_path):
  config, workdir = _claimable(tmp_path), tmp_path / "run"
  workdirs.claim(workdir, config)
  config.eval.batch_size, config.train.log_every, config.compilation_cache_dir = 8, 1, "/tmp/cache"
  workdirs.claim(workdir, config)


def test_edited_data_files_are_refused(tmp_path):
  config, workdir = _claimable(tmp_path), tmp_path / "run"
  workdirs.claim(workdir, config)
  (tmp_path / "data" / "seq.in").write_text("hello there\n")
  with pytest.raises(workdirs.WorkdirMismatch, match=re.escape(
      f"the files of config.data.raw_dir={tmp_path / 'data'} changed since the run began")):
    workdirs.claim(workdir, config)


def test_a_run_of_an_older_version_is_checked_against_its_config_json(tmp_path):
  config, workdir = _claimable(tmp_path), tmp_path / "run"
  workdir.mkdir()
  (workdir / "config.json").write_text(config.to_json_best_effort())
  workdirs.claim(workdir, config)  # the same config: resumed
  (workdir / workdirs.IDENTITY_FILE).unlink()
  config.train.learning_rate = 1.0
  with pytest.raises(workdirs.WorkdirMismatch, match="config.train.learning_rate: 2e-05 -> 1.0"):
    workdirs.claim(workdir, config)


def test_overwrite_deletes_only_a_run(tmp_path):
  config, workdir = _claimable(tmp_path), tmp_path / "run"
  workdirs.claim(workdir, config)
  (workdir / "checkpoints" / "10").mkdir(parents=True)
  (workdir / workdirs.LOCK_FILE).write_text("1\n")
  config.train.learning_rate = 1e-4
  workdirs.claim(workdir, config, overwrite=True)
  assert sorted(p.name for p in workdir.iterdir()) == [workdirs.LOCK_FILE, workdirs.IDENTITY_FILE]
  assert json.loads((workdir / workdirs.IDENTITY_FILE).read_text())["fields"]["train.learning_rate"] == 1e-4
  other = tmp_path / "notes"
  other.mkdir()
  (other / "thesis.tex").write_text("mine")
  with pytest.raises(workdirs.WorkdirMismatch, match="--overwrite deletes only a folder holding a run"):
    workdirs.claim(other, config, overwrite=True)
  assert (other / "thesis.tex").read_text() == "mine"


def test_an_unreadable_record_is_refused_and_overwrite_recovers_it(tmp_path):
  config, workdir = _claimable(tmp_path), tmp_path / "run"
  workdirs.claim(workdir, config)
  (workdir / workdirs.IDENTITY_FILE).write_text('{"fields": {"seed"')  # cut short by hand
  with pytest.raises(workdirs.WorkdirMismatch, match=re.escape(f"{workdir / workdirs.IDENTITY_FILE} is unreadable")):
    workdirs.claim(workdir, config)
  workdirs.claim(workdir, config, overwrite=True)
  assert json.loads((workdir / workdirs.IDENTITY_FILE).read_text())["fields"]["seed"] == 0


def test_rerun_on_other_data_is_refused_and_the_first_model_survives(toy, tmp_path):
  """The issue's case: the same command on another folder of the same size used to resume the old model."""
  workdir = tmp_path / "run"
  main.run(toy, workdir)
  before = {p.name: p.read_bytes() for p in workdir.iterdir() if p.is_file()}
  other = tmp_path / "other"
  import shutil
  shutil.copytree(toy.data.raw_dir, other)
  toy.data.raw_dir = str(other)
  with pytest.raises(workdirs.WorkdirMismatch, match=re.escape("config.data.raw_dir: ")):
    main.run(toy, workdir)
  assert {p.name: p.read_bytes() for p in workdir.iterdir() if p.is_file()} == before
  results = main.run(toy, workdir, overwrite=True)  # starts afresh
  assert results["steps"] > 0 and json.loads((workdir / "config.json").read_text())["data"]["raw_dir"] == str(other)


# ----------------------------------------------------------------------------------- F: checkpoint fallback

def _corrupt(step_dir: pathlib.Path, how: str) -> None:
  if how == "truncated state":
    biggest = max((p for p in (step_dir / "state").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    biggest.write_bytes(biggest.read_bytes()[: biggest.stat().st_size // 2])
  else:  # empty data metadata
    files = [p for p in (step_dir / "data").rglob("*") if p.is_file()]
    assert files
    for p in files:
      p.write_text("")


def _mneg(model):
  return intent_mneg.make_loss_fn(model.config, baseline_config.get_config())


@pytest.mark.parametrize("how", ["truncated state", pytest.param("empty data", marks=pytest.mark.slow)])
def test_a_corrupt_latest_checkpoint_is_skipped_for_the_previous_one(tiny_model, tmp_path, how, caplog):
  first = _loop(tmp_path / "a", tiny_model, _mneg(tiny_model), total_steps=4, save_every=2)
  _corrupt(tmp_path / "a" / "checkpoints" / "4", how)
  with caplog.at_level("WARNING"):
    resumed = _loop(tmp_path / "a", tiny_model, _mneg(tiny_model), total_steps=4, save_every=2)
  assert "checkpoint of step 4" in caplog.text and "does not restore" in caplog.text
  assert [p.name.split("-")[0] for p in (tmp_path / "a" / "checkpoints.skipped").iterdir()] == ["4"]
  for a, b in zip(jax.tree.leaves(first.params), jax.tree.leaves(resumed.params)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # step 2 + the same two batches again


def test_no_checkpoint_that_restores_is_one_user_error(tiny_model, tmp_path):
  _loop(tmp_path / "a", tiny_model, _mneg(tiny_model), total_steps=2, save_every=2)
  steps = [p for p in (tmp_path / "a" / "checkpoints").iterdir() if p.name.isdigit()]
  assert steps
  for step_dir in steps:
    _corrupt(step_dir, "truncated state")
  with pytest.raises(Exception) as info:
    _loop(tmp_path / "a", tiny_model, _mneg(tiny_model), total_steps=4, save_every=2)
  message = errors.one_line(info.value)
  assert message and message.startswith("error: no checkpoint under ") and "step 2 (" in message
  assert message.endswith("rerun with --overwrite to start afresh")


# -------------------------------------------------------------------------------------- G: whole exports

def test_an_export_appears_whole_or_not_at_all(tmp_path):
  target = tmp_path / "export"
  target.mkdir()
  (tmp_path / ".export.partial-killed").mkdir()  # a process killed mid-export
  (target / "old.txt").write_text("old")
  with pytest.raises(RuntimeError):
    with workdirs.atomic_folder(target) as folder:
      (folder / "new.txt").write_text("half")
      raise RuntimeError("killed mid-export")
  assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
  assert sorted(p.name for p in target.iterdir()) == ["old.txt"]
  with workdirs.atomic_folder(target) as folder:
    (folder / "new.txt").write_text("whole")
  assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
  assert sorted(p.name for p in target.iterdir()) == ["new.txt"]
  assert target.stat().st_mode & 0o777 == 0o777 & ~_umask()


# --------------------------------------------------------------------------------- H: aligned predictions

def test_predict_keeps_inputs_and_outputs_aligned_and_checks_paths_first(toy, tmp_path, capsys):
  main.run(toy, tmp_path / "run")  # the baseline's export
  export = str(tmp_path / "run" / "export")
  queries = tmp_path / "queries.txt"
  queries.write_text("my card is lost\n\n   \nplay some music\n")
  out = tmp_path / "out.jsonl"
  assert predict.main(["--model", export, "--input", str(queries), "--output", str(out)]) == 0
  rows = [json.loads(line) for line in out.read_text().splitlines()]
  assert [r["text"] for r in rows] == ["my card is lost", "", "", "play some music"]
  assert [r.get("empty", False) for r in rows] == [False, True, True, False]
  assert "label" in rows[0] and "label" in rows[3]
  assert predict.main(["--model", "/no/such/model", "--output", str(tmp_path / "no" / "out.jsonl"), "x"]) == 2
  assert capsys.readouterr().err.strip().splitlines()[-1] == (
      f"error: --output {tmp_path / 'no' / 'out.jsonl'}: folder {tmp_path / 'no'} does not exist")
  assert predict.main(["--model", export, "fine", ""]) == 2
  assert capsys.readouterr().err.strip() == "error: utterance 2 on the command line is empty; give words to classify"


def test_a_metrics_line_cut_short_by_a_kill_is_dropped_on_resume(tmp_path):
  writer = MetricWriter(tmp_path, tensorboard=False)
  for step in (1, 2, 3):
    writer.write(step, {"loss": step})
  writer.close()
  path = tmp_path / "metrics.jsonl"
  path.write_text(path.read_text() + '{"step": 4, "lo')  # kill -9 in the middle of a write
  writer = MetricWriter(tmp_path, tensorboard=False)
  writer.truncate_after(2)
  writer.write(3, {"loss": 30.0})
  writer.close()
  assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2, 3]


def _steps_and_names(path):
  return [(r["step"], sorted(k for k in r if k not in ("step", "time")))
          for r in map(json.loads, path.read_text().splitlines())]


def test_a_run_killed_before_its_first_checkpoint_leaves_no_duplicate_metrics(tmp_path, tiny_model):
  def loss_fn(params, batch, rng):
    return jnp.mean(params["embeddings"]["word_embeddings"]["embedding"] ** 2), {}

  earlier = MetricWriter(tmp_path, tensorboard=False)  # an attempt killed at step 3, before any checkpoint
  earlier.write(0, {"accuracy": 0.1}, prefix="dev/")
  earlier.write(3, {"loss": 9.0}, prefix="train/")
  earlier.close()
  with open(tmp_path / "metrics.jsonl", "a") as f:
    f.write('{"step": 4, "tr')  # cut short by the kill
  _loop(tmp_path, tiny_model, loss_fn, total_steps=4, save_every=3, log_every=3)
  assert _steps_and_names(tmp_path / "metrics.jsonl") == [
      (3, ["train/grad_norm", "train/learning_rate", "train/loss"]),
      (4, ["train/grad_norm", "train/learning_rate", "train/loss"])]


def test_a_line_measured_again_after_a_resume_replaces_the_earlier_one(tmp_path):
  writer = MetricWriter(tmp_path, tensorboard=False)
  writer.write(0, {"accuracy": 0.5}, prefix="dev/")
  writer.write(2, {"loss": 2.0})
  writer.write(4, {"loss": 4.0})
  writer.close()
  resumed = MetricWriter(tmp_path, tensorboard=False)
  resumed.write(0, {"accuracy": 0.5}, prefix="dev/")  # a method re-measuring step 0 before the loop resumes
  resumed.truncate_after(2)  # the newest checkpoint that restores is step 2
  resumed.write(4, {"loss": 4.5})
  resumed.write(4, {"accuracy": 0.7}, prefix="eval/")
  resumed.close()
  rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert [(r["step"], r.get("loss")) for r in rows] == [(2, 2.0), (0, None), (4, 4.5), (4, None)]
  assert sum("dev/accuracy" in r for r in rows) == 1
