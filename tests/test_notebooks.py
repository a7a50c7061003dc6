"""The Colab notebooks in notebooks/: committed without outputs, each with a ``parameters`` cell, and executed
end to end (nbclient, a fresh ipykernel on this interpreter) with TINY settings injected papermill-style."""

from __future__ import annotations

import ast
import os
import pathlib
import re
import sys
import time

import nbformat
import pytest

from tests.conftest import SHARED_DATA

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
EXPECTED = {"quickstart_intents", "slot_filling_retriever", "multilabel_adapters"}
CELL_TIMEOUT_S = 900  # per cell; a TINY notebook takes 1-3 minutes on a 2-core CPU


def _read(path: pathlib.Path) -> nbformat.NotebookNode:
  return nbformat.read(path, as_version=nbformat.NO_CONVERT)


def _parameters_index(nb: nbformat.NotebookNode) -> int:
  tagged = [i for i, cell in enumerate(nb.cells) if "parameters" in cell.get("metadata", {}).get("tags", [])]
  assert len(tagged) == 1, f"expected one cell tagged 'parameters', found {len(tagged)}"
  return tagged[0]


def test_the_notebooks_exist():
  assert EXPECTED <= {p.stem for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stripped_and_parametrised(path):
  nb = _read(path)
  nbformat.validate(nb)
  for i, cell in enumerate(nb.cells):
    if cell.cell_type == "code":
      assert cell.outputs == [], f"{path.name}: cell {i} has outputs (commit notebooks stripped)"
      assert cell.execution_count is None, f"{path.name}: cell {i} has an execution count"
      ast.parse(cell.source)
  assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
  params = nb.cells[_parameters_index(nb)]
  assert params.cell_type == "code"
  assigned = {t.id for node in ast.parse(params.source).body if isinstance(node, ast.Assign) for t in node.targets
              if isinstance(t, ast.Name)}
  assert {"TINY", "WORKDIR", "REPO_URL"} <= assigned
  assert re.search(r"^TINY = False\b", params.source, re.M), "the committed default must be the full run"
  # Colab cannot run `!pip` under nbclient and the notebook must not depend on IPython magics
  assert not any(line.lstrip().startswith(("!", "%")) for c in nb.cells if c.cell_type == "code"
                 for line in c.source.splitlines())


def _kernel_env() -> dict[str, str]:
  """This process's environment for the kernel: CPU JAX on one device (conftest's fake 8-device flag
  dropped: the notebooks target real hardware, and one device compiles faster), the shared data."""
  env = dict(os.environ)
  env["JAX_PLATFORMS"] = "cpu"
  flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", env.get("XLA_FLAGS", "")).strip()
  if flags:
    env["XLA_FLAGS"] = flags
  else:
    env.pop("XLA_FLAGS", None)
  env["FEWSHOT_NLU_DATA"] = str(SHARED_DATA)
  env.setdefault("TOKENIZERS_PARALLELISM", "false")
  env.pop("MPLBACKEND", None)
  return env


def _kernel_manager():
  """A kernel manager for ipykernel's own python3 spec with no kernelspec directories searched, so the kernel
  runs on this interpreter (``sys.executable``) whatever kernelspecs the machine has installed."""
  from jupyter_client.kernelspec import KernelSpecManager
  from jupyter_client.manager import AsyncKernelManager
  return AsyncKernelManager(kernel_name="python3", kernel_spec_manager=KernelSpecManager(kernel_dirs=[]))


@pytest.mark.integration
@pytest.mark.skipif(not SHARED_DATA.exists(), reason=f"{SHARED_DATA} not present")
@pytest.mark.parametrize("path", [  # the default run executes the quickstart; the others: pytest -m slow
    pytest.param(p, id=p.stem, marks=() if p.stem == "quickstart_intents" else pytest.mark.slow) for p in NOTEBOOKS])
def test_notebook_executes_with_tiny_parameters(path, tmp_path, record_property):
  from nbclient import NotebookClient
  nb = _read(path)
  workdir = tmp_path / "work"
  injected = nbformat.v4.new_code_cell(
      "# Injected by tests/test_notebooks.py\n"
      "import sys\n"
      f"assert sys.prefix == {sys.prefix!r}, f'the kernel runs {{sys.executable}}, not the test interpreter'\n"
      "TINY = True\n"
      f"WORKDIR = {str(workdir)!r}\n",
      metadata={"tags": ["injected-parameters"]})
  injected.pop("id", None)  # nbformat < 4.5 cells carry no id
  if nb.nbformat_minor >= 5:
    injected["id"] = "injected-parameters"
  nb.cells.insert(_parameters_index(nb) + 1, injected)

  client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", km=_kernel_manager(),
                          resources={"metadata": {"path": str(REPO_ROOT)}})
  start = time.perf_counter()
  try:
    client.execute(env=_kernel_env())  # raises CellExecutionError (with the traceback) on any cell error
  finally:
    nbformat.write(nb, tmp_path / path.name)  # the executed notebook, outputs included, for inspection
  seconds = time.perf_counter() - start
  record_property("seconds", round(seconds, 1))
  print(f"{path.name}: executed in {seconds:.0f} s ({tmp_path / path.name})")

  assert (workdir / "results.json").exists() or any(workdir.glob("*/results.json"))
  errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
  assert not errors
