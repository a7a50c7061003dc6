"""Several real JAX processes on CPU (``jax.distributed`` with a localhost coordinator, gloo collectives): every
training method builds the single-process run's global batches on every process, ends at the single-process
run's parameters (to float tolerance: the cross-process all-reduce sums in another order), and a run interrupted
and resumed on 2 processes ends bit-identical to an uninterrupted one. 4 CPU devices in all, however many
processes (tests/multiprocess_worker.py runs one process)."""

import json
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file

from tests import test_main, tiny
from tests.methods.convfit.test_stage1 import write_toy_reddit
from tests.methods.dse.test_train import _toy_data
from tests.methods.multi_convfit.test_train import write_toy_multilabel
from tests.methods.retriever.helpers import write_toy_snips

REPO = pathlib.Path(__file__).parents[1]
# The default run covers the three ways batches are built (in-batch rows, per-label batches, the Retriever's
# folds with development selection); the other methods run with ``pytest -m slow`` (each group is launched once,
# on its first test).
GROUPS = {"default": ("intent_mneg", "convfit", "retriever"),
          "slow": ("intent_mneg_packed", "multi_convfit", "qaid", "dse", "convfit_stage1")}
METHODS = [pytest.param(m, id=m) for m in GROUPS["default"]] + [pytest.param(m, id=m, marks=pytest.mark.slow)
                                                                  for m in GROUPS["slow"]]


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory, tiny_bert_dir):
  return toy_methods(tmp_path_factory.mktemp("multiprocess_data"), tiny_bert_dir)


def toy_methods(root: pathlib.Path, tiny_bert_dir) -> dict[str, tuple[str, str]]:
  """{method: arguments of its ``multiprocess_configs`` maker} over toy data for every method, under ``root``."""
  c = tiny.CORPUS
  intents = test_main._toy_dataset(root / "intents", {"bank": c[0:3], "music": c[3:6], "misc": c[6:9],
                                                      "chat": c[9:12]}, {"bank": c[4:5], "music": c[11:12]})
  multi = write_toy_multilabel(root / "MULTI")
  dialogues = _toy_data(root / "dialogues")
  reddit = root / "reddit"
  reddit.mkdir()
  write_toy_reddit(reddit)
  snips = write_toy_snips(root / "snips")
  model = str(tiny_bert_dir)
  arguments = {"intents": (str(intents), model), "multi": (str(multi), model), "dialogues": (str(dialogues), model),
               "reddit": (str(reddit), model), "snips": (str(snips), model)}
  return {"intent_mneg": arguments["intents"], "intent_mneg_packed": arguments["intents"],
          "convfit": arguments["intents"], "multi_convfit": arguments["multi"], "qaid": arguments["dialogues"],
          "dse": arguments["dialogues"], "convfit_stage1": arguments["reddit"], "retriever": arguments["snips"]}


def _launch(runs: pathlib.Path, tag: str, processes: int, methods: dict, interrupt_at: dict | None = None) -> None:
  spec = {"processes": processes, "port": _free_port(), "runs": str(runs), "tag": tag,
          "methods": {name: {"make": name, "args": list(args)} for name, args in methods.items()},
          "interrupt_at": interrupt_at or {}}
  path = runs / f"{tag}.json"
  path.write_text(json.dumps(spec))
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  workers = [subprocess.Popen([sys.executable, "-m", "tests.multiprocess_worker", str(path), str(i)], cwd=REPO,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(processes)]
  outputs = []
  try:
    for worker in workers:
      outputs.append(worker.communicate(timeout=600)[0])
  finally:
    for worker in workers:
      worker.kill()
  for i, (worker, output) in enumerate(zip(workers, outputs)):
    assert worker.returncode == 0, f"process {i} of {tag} failed:\n{output[-6000:]}"


def _exported(workdir: pathlib.Path) -> dict[str, np.ndarray]:
  """Every tensor a run exported (``export/``, a Retriever fold's ``fold<k>/export`` and ``best/``)."""
  tensors = {}
  for path in sorted(workdir.rglob("*.safetensors")):
    tensors.update({f"{path.relative_to(workdir)}:{k}": v for k, v in load_file(path).items()})
  assert tensors, f"{workdir} holds no exported safetensors"
  return tensors


def _batches(runs: pathlib.Path, tag: str, method: str, process: int) -> list[str]:
  return json.loads((runs / tag / f"{method}.batches-p{process}.json").read_text())


@pytest.fixture(scope="module")
def launched(tmp_path_factory, toy_data):
  """``launched(group)``: the runs folder where every method of ``GROUPS[group]`` ran on 1 and on 2 processes."""
  done = {}

  def runs_of(group: str) -> pathlib.Path:
    if group not in done:
      runs = tmp_path_factory.mktemp(f"multiprocess_runs_{group}")
      methods = {m: toy_data[m] for m in GROUPS[group]}
      _launch(runs, "single", 1, methods)
      _launch(runs, "pair", 2, methods)
      done[group] = runs
    return done[group]

  return runs_of


@pytest.fixture(scope="module")
def single_and_pair(launched):
  return launched("default")


@pytest.mark.parametrize("method", METHODS)
def test_two_processes_build_the_single_process_batches_and_reach_its_parameters(launched, method):
  runs = launched(next(g for g, methods in GROUPS.items() if method in methods))
  single = _batches(runs, "single", method, 0)
  assert single and _batches(runs, "pair", method, 0) == single and _batches(runs, "pair", method, 1) == single
  one, two = _exported(runs / "single" / method), _exported(runs / "pair" / method)
  assert one.keys() == two.keys()
  for name in one:
    np.testing.assert_allclose(two[name], one[name], rtol=2e-3, atol=2e-4, err_msg=name)


def test_an_interrupted_two_process_run_resumes_bit_identical(single_and_pair, toy_data):
  runs = single_and_pair
  _launch(runs, "pair-resumed", 2, {"intent_mneg": toy_data["intent_mneg"]}, interrupt_at={"intent_mneg": 3})
  assert _batches(runs, "pair-resumed", "intent_mneg", 1) == _batches(runs, "pair", "intent_mneg", 1)
  resumed, straight = _exported(runs / "pair-resumed" / "intent_mneg"), _exported(runs / "pair" / "intent_mneg")
  for name in straight:
    np.testing.assert_array_equal(resumed[name], straight[name], err_msg=name)


@pytest.mark.slow
def test_four_processes_build_the_single_process_batches(single_and_pair, toy_data):
  runs = single_and_pair
  _launch(runs, "four", 4, {"intent_mneg": toy_data["intent_mneg"]})
  for process in range(4):
    assert _batches(runs, "four", "intent_mneg", process) == _batches(runs, "single", "intent_mneg", 0)
  one, four = _exported(runs / "single" / "intent_mneg"), _exported(runs / "four" / "intent_mneg")
  for name in one:
    np.testing.assert_allclose(four[name], one[name], rtol=2e-3, atol=2e-4, err_msg=name)
