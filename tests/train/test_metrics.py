"""metrics.jsonl (``train.metrics``): a line cut short by a kill is dropped on resume, and a resumed run logs
each step once."""

import json

import jax.numpy as jnp

from fewshot_nlu.train.metrics import MetricWriter
from tests.train.helpers import _loop


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
