"""Shared by the tests of runs that cannot lie (test_config_checks, test_workdirs, test_predict, train/test_loop,
test_kill_resume): the repository root, the CLI of the baseline config, and ``toy``, a valid intent_mneg config on
a toy dataset."""

import os
import pathlib
import subprocess
import sys

import pytest

from tests import tiny
from tests.test_main import _toy_config, _toy_dataset

REPO = pathlib.Path(__file__).parents[1]


@pytest.fixture
def toy(tmp_path, tiny_bert_dir):
  """A valid intent_mneg config on a toy dataset (a few steps of a tiny BERT)."""
  corpus = tiny.CORPUS
  data = _toy_dataset(tmp_path / "data", {"bank": corpus[:3], "music": corpus[3:6], "misc": corpus[6:11]},
                      {"bank": corpus[4:5], "music": corpus[11:12]})
  return _toy_config(data, tiny_bert_dir)


def _cli(*args, workdir, timeout=300):
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  return subprocess.run([sys.executable, "-m", "fewshot_nlu.main", "--config=configs/intent_mneg.py",
                         f"--workdir={workdir}", *args], cwd=REPO, env=env, capture_output=True, text=True,
                        timeout=timeout)
