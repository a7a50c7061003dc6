"""kill -9 at random points of a CLI run, then the same command again: the rerun finishes with the model an
uninterrupted run makes (bit-identical weights), and metrics.jsonl holds each step once.

Slow (several CLI runs of a tiny model): ``pytest -m slow tests/test_kill_resume.py``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import safetensors.numpy

from tests import tiny
from tests.reliability_helpers import REPO
from tests.test_main import _toy_dataset

pytestmark = pytest.mark.slow
KILLS = 4


def _command(data, model, workdir):
  fields = {"data.builder": "intent_folder", "data.raw_dir": data / "TOY", "data.tfds_dir": data / "tfds",
            "data.train_split": "train", "data.eval_split": "test", "model.name": model,
            "train.batch_size": 8, "train.epochs": 6, "train.save_every": 2, "train.log_every": 1,
            "compilation_cache_dir": "", "eval.before_training": False}
  return [sys.executable, "-m", "fewshot_nlu.main", "--config=configs/intent_mneg.py", f"--workdir={workdir}",
          *(f"--config.{k}={v}" for k, v in fields.items())]


def _run(command, kill_after=None):
  """Runs ``command``; with ``kill_after`` seconds, SIGKILLs it then (if still running). Returns its status."""
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
  try:
    _, err = process.communicate(timeout=kill_after if kill_after is not None else 600)
  except subprocess.TimeoutExpired:
    process.send_signal(signal.SIGKILL)
    process.communicate()
    return None
  assert process.returncode == 0, err
  return process.returncode


def _weights(workdir):
  return safetensors.numpy.load_file(str(workdir / "export" / "model.safetensors"))


def test_kill_9_at_random_points_then_rerun_gives_the_uninterrupted_model(tmp_path, tiny_bert_dir):
  corpus = tiny.CORPUS
  data = _toy_dataset(tmp_path / "data", {"bank": corpus[:4], "music": corpus[4:8], "misc": corpus[8:12]},
                      {"bank": corpus[4:5], "music": corpus[11:12]})
  start = time.perf_counter()
  _run(_command(data, tiny_bert_dir, tmp_path / "reference"))
  duration = time.perf_counter() - start
  workdir = tmp_path / "killed"
  rng = random.Random(0)
  delays = [rng.uniform(0.2, 1.0) * duration for _ in range(KILLS)]
  finished_early = [_run(_command(data, tiny_bert_dir, workdir), kill_after=d) is not None for d in delays]
  _run(_command(data, tiny_bert_dir, workdir))
  reference, resumed = _weights(tmp_path / "reference"), _weights(workdir)
  assert reference.keys() == resumed.keys()
  for name in reference:
    np.testing.assert_array_equal(reference[name], resumed[name], err_msg=f"{name} (kills after {delays} s, "
                                  f"finished before the kill: {finished_early})")
  steps = [json.loads(line)["step"] for line in (workdir / "metrics.jsonl").read_text().splitlines()
           if "train/loss" in json.loads(line)]
  assert steps == sorted(set(steps)) == list(range(1, steps[-1] + 1))
  assert json.loads((workdir / "results.json").read_text())["accuracy"] == json.loads(
      (tmp_path / "reference" / "results.json").read_text())["accuracy"]
