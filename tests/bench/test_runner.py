"""``bench/runner.py``: a results table names the machines its rows were measured on, not the one rewriting it;
a row's wall counts every attempt at its run."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "bench"))  # bench scripts import their siblings
from bench import runner  # noqa: E402


def test_a_table_names_the_machines_its_rows_record():
  here = runner.machine()
  assert here.startswith("Machine: ") and runner.cpu() in here
  assert runner.machine([]) == here
  same = [{"machine": "Machine: x86_64, 2 cores, Python 3.11.7."}, {"machine": "x86_64, 2 cores, Python 3.11.7"}]
  assert runner.machine(same) == "Machine: x86_64, 2 cores, Python 3.11.7."
  mixed = [{"machine": "amd, 2 CPUs"}, {"machine": "amd, 2 CPUs"}, {"machine": "intel, 2 CPUs"}]
  assert runner.machine(mixed) == "Machines (as each row records): amd, 2 CPUs (2 rows); intel, 2 CPUs (1 row)."
  assert runner.machine([{"results": {}}]) == here  # a row without one: this machine's


def test_a_rows_wall_sums_every_attempt_at_the_run(tmp_path, monkeypatch):
  """``run_main``: a run that fails (or is killed) and is rerun gets one row whose wall counts both attempts."""
  fake = tmp_path / "fake_main.py"  # stands in for `python -m fewshot_nlu.main --workdir=W ...`
  fake.write_text("import json, pathlib, sys, time\n"
                  "workdir = pathlib.Path(next(a for a in sys.argv if a.startswith('--workdir='))[10:])\n"
                  "time.sleep(0.3)\n"
                  "if not (workdir.parent / 'second').exists():\n"
                  "  (workdir.parent / 'second').touch(); sys.exit('first attempt dies')\n"
                  "for kept in ('checkpoints/1', 'fold0/checkpoints/1', 'export'):\n"
                  "  (workdir / kept).mkdir(parents=True)\n"
                  "(workdir / 'results.json').write_text(json.dumps({'f1': 0.5}))\n")
  wrapper = tmp_path / "python"
  wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {fake} \"$@\"\n")
  wrapper.chmod(0o755)
  monkeypatch.setattr(runner.sys, "executable", str(wrapper))
  rows, workdir = tmp_path / "rows.jsonl", tmp_path / "runs" / "cell-0"
  with pytest.raises(SystemExit, match="failed .*: first attempt dies"):
    runner.run_main("cell", 0, ["--config=x.py", "--config.seed=0"], workdir, rows)
  row = runner.run_main("cell", 0, ["--config=x.py", "--config.seed=0"], workdir, rows)
  assert row["results"] == {"f1": 0.5} and row["attempts"] == 2
  assert row["wall_seconds"] >= 0.6 and row["wall_seconds"] > row["last_attempt_wall_seconds"] >= 0.3
  assert runner.load_rows(rows) == [row]
  assert (workdir / "export").is_dir() and not list(workdir.rglob("checkpoints"))  # a finished run's: deleted
  assert runner.run_main("cell", 0, ["--config=x.py"], workdir, rows) is None  # done: not run again


def test_a_failed_runs_error_is_its_exception_not_the_shutdown_noise_after_it():
  stderr = ("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: RESOURCE_EXHAUSTED: No space "
            "left on device\nException ignored in: <coroutine object write_fragment>\nTraceback (most recent call "
            "last):\nImportError: sys.meta_path is None, Python is likely shutting down\n")
  assert runner.error_line(stderr) == "ValueError: RESOURCE_EXHAUSTED: No space left on device"
  assert runner.error_line("no traceback\n") == "no traceback"
