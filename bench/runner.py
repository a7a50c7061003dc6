"""What the method benchmarks share: run ``python -m fewshot_nlu.main`` once per configuration in its own
process (resumable: a run whose ``results.json`` exists is not repeated), append one JSON row per run (its
exact command, results, wall time, machine) to a results file, and summarise rows as mean ± std."""

from __future__ import annotations

import collections
import json
import os
import pathlib
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Sequence

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
# The encoders a method benchmark runs (``--model``): MiniLM-L6 ships; MPNet-base is the papers' model size
# (bench/models.py). Each script keeps its own overrides per encoder; rows of a non-default encoder carry its name.
ENCODERS = {"minilm-l6": "MiniLM-L6", "mpnet-base": "MPNet-base"}
DEFAULT_ENCODER = "minilm-l6"


def encoder_row_name(name: str, model: str) -> str:
  """A row's name for ``model``: the default encoder's rows keep the bare name, another's end in ``-<model>``."""
  return name if model == DEFAULT_ENCODER else f"{name}-{model}"


def rerun_command(script: str) -> str:
  """The command that repeats this invocation of ``bench/<script>`` and writes its results file."""
  args = [a for a in sys.argv[1:] if a != "--write"]
  return " ".join(["python", f"bench/{pathlib.Path(script).name}", *args, "--write"])


def cpu() -> str:
  """This machine's CPU for a results row: architecture, cores, model name and widest vector extension (timings
  differ 2-3x between the machines these benchmarks have run on: latency_notes.md)."""
  try:
    info = pathlib.Path("/proc/cpuinfo").read_text()
  except OSError:
    return f"{platform.machine()}, {os.cpu_count()} CPUs"
  fields: dict[str, str] = {}
  for line in info.splitlines():  # the first CPU's fields
    key, _, value = line.partition(":")
    fields.setdefault(key.strip(), value.strip())
  model, flags = fields.get("model name", ""), set(fields.get("flags", "").split())
  vector = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else ""
  return ", ".join(x for x in (platform.machine(), f"{os.cpu_count()} CPUs", model, vector) if x)


def machine(rows: Sequence[dict] | None = None) -> str:
  """A table's machine line: this machine, or with ``rows`` the machines their ``machine`` fields record (a table
  rewritten on another machine must not claim its rows were measured there); rows without one count as this
  machine's."""
  here = f"{cpu()}, Python {platform.python_version()}"
  if rows is None:
    return f"Machine: {here}."
  recorded = collections.Counter((r.get("machine") or here).removeprefix("Machine: ").rstrip(".") for r in rows)
  if len(recorded) <= 1:
    return f"Machine: {next(iter(recorded), here)}."
  counted = [f"{m} ({n} row{'s' * (n != 1)})" for m, n in recorded.most_common()]
  return "Machines (as each row records): " + "; ".join(counted) + "."

def run_main(name: str, seed: int, config_args: list[str], workdir: pathlib.Path, rows_file: pathlib.Path,
             amend: Callable[[dict], None] | None = None) -> dict | None:
  """Runs ``fewshot_nlu.main`` with ``config_args`` into ``workdir``; returns the appended row (None when the
  run had already finished). ``amend`` adds to the run's results (read from ``results.json``) before the row is
  written. Raises SystemExit with the run's stderr tail if it fails. The row's ``wall_seconds`` sums every
  attempt at the run (a killed or failed one resumes from its checkpoints when rerun): each attempt's wall is
  kept, every 10 s, in ``.<workdir name>.wall.json`` beside the workdir; a resumed row also says how many
  attempts and the last one's wall. A finished run's ``checkpoints`` folders (its own, a fold's) are deleted:
  only an unfinished run resumes from them, and an MPNet-base run's are 1-2 GB (18 of them filled a disk)."""
  if (workdir / "results.json").exists():
    return None
  cmd = [sys.executable, "-m", "fewshot_nlu.main", *config_args[:1], f"--workdir={workdir}", *config_args[1:]]
  print("$", " ".join(cmd[1:]), flush=True)
  # the wall of every attempt at this run (a killed one resumes from its checkpoints), kept beside its workdir
  ledger = workdir.parent / f".{workdir.name}.wall.json"
  before = json.loads(ledger.read_text()) if ledger.exists() else {"seconds": 0.0, "attempts": 0}
  ledger.parent.mkdir(parents=True, exist_ok=True)
  start = time.perf_counter()
  with tempfile.TemporaryFile("w+") as stderr:
    proc = subprocess.Popen(cmd, cwd=REPO, env=dict(os.environ, TOKENIZERS_PARALLELISM="false"),
                            stdout=subprocess.DEVNULL, stderr=stderr, text=True)
    while proc.poll() is None:
      ledger.write_text(json.dumps({"seconds": before["seconds"] + time.perf_counter() - start,
                                    "attempts": before["attempts"] + 1}))
      try:
        proc.wait(timeout=10)
      except subprocess.TimeoutExpired:
        pass
    stderr.seek(0)
    errors = stderr.read()
  this = time.perf_counter() - start
  wall = before["seconds"] + this
  ledger.write_text(json.dumps({"seconds": wall, "attempts": before["attempts"] + 1}))
  if proc.returncode:
    print(errors[-3000:], file=sys.stderr)
    raise SystemExit(f"{name} seed {seed} failed (exit {proc.returncode}): {error_line(errors)}")
  for folder in sorted(workdir.rglob("checkpoints"), reverse=True):
    shutil.rmtree(folder, ignore_errors=True)
  result = json.loads((workdir / "results.json").read_text())
  if amend:
    amend(result)
  row = {"name": name, "seed": seed, "wall_seconds": round(wall, 1),
         "command": "python -m fewshot_nlu.main " + " ".join(config_args),
         "results": result, "machine": cpu()}
  if before["attempts"]:  # resumed: the wall above sums every attempt's
    row["attempts"], row["last_attempt_wall_seconds"] = before["attempts"] + 1, round(this, 1)
  rows_file.parent.mkdir(parents=True, exist_ok=True)
  with open(rows_file, "a", encoding="utf-8") as f:
    f.write(json.dumps(row) + "\n")
  return row


def error_line(stderr: str) -> str:
  """The last exception line of a failed run's stderr (``ValueError: ...``), skipping what an interpreter shutting
  down prints after it (orbax's writer threads raise ``ImportError: sys.meta_path is None`` then, burying the
  cause under tracebacks); the last line when there is none."""
  lines = [l.strip() for l in stderr.splitlines() if l.strip()]
  errors = [l for l in lines if re.match(r"^[\w.]+(Error|Exception|Exit|Interrupt)\b", l)
            and "sys.meta_path is None" not in l]
  return (errors or lines or ["no output"])[-1][:500]


def load_rows(rows_file: pathlib.Path) -> list[dict]:
  return [json.loads(l) for l in rows_file.read_text().splitlines() if l.strip()] if rows_file.exists() else []


def mean_std(values: list[float], scale: float = 100.0) -> str:
  if not values:
    return "–"
  mean = scale * statistics.mean(values)
  return f"{mean:.2f} ± {scale * statistics.stdev(values):.2f}" if len(values) > 1 else f"{mean:.2f}"


def finish_table(lines: list[str], rows: list[dict], stem: str) -> None:
  """Appends the reproducing commands (seed as SEED, a row of one fold's run with its fold as FOLD, with a
  workdir) and ``<stem>_notes.md``, and writes ``bench/results/<stem>.md``."""
  lines += ["", "## Commands", ""]
  seen = set()
  for r in rows:
    cmd = re.sub(r"--config\.data\.folds=\d+,", "--config.data.folds=FOLD,", r["command"])
    cmd = (cmd.replace(f"--config.seed={r['seed']}", "--config.seed=SEED")
           .replace("fewshot_nlu.main ", f"fewshot_nlu.main --workdir=runs/{r['name']}-SEED ", 1))
    if cmd not in seen:
      seen.add(cmd)
      lines.append(f"- `{r['name']}`: `{cmd}`")
  notes = RESULTS / f"{stem}_notes.md"
  if notes.exists():
    lines += ["", notes.read_text().strip()]
  (RESULTS / f"{stem}.md").write_text("\n".join(lines) + "\n")
