"""``bench/runner.py``: a results table names the machines its rows were measured on, not the one rewriting it."""

import pathlib
import sys

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
