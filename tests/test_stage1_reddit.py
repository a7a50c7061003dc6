"""The pod-scale Stage 1 config (configs/convfit_stage1_reddit.py) on 8 fake CPU devices with a tiny BERT: the
same code path and config shape (Reddit JSON lines, mesh data 2 x fsdp 4, bf16, async checkpoints, global
batch over all devices), small sizes. An interrupted run resumes to the same parameters as an uninterrupted
one; per-process data shares; remote-workdir file handling."""

from __future__ import annotations

import json
import logging

import jax
import numpy as np
import pytest

from configs import convfit_stage1_reddit
from fewshot_nlu import main, sharding, workdirs
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.encoders import pretrained
from fewshot_nlu.train import loop
from fewshot_nlu.train.metrics import MetricWriter
from tests import tiny

STEPS = 4


@pytest.fixture(scope="module")
def reddit_dir(tmp_path_factory):
  return write_toy_reddit(tmp_path_factory.mktemp("reddit"))


def write_toy_reddit(root):
  """Reddit JSON lines of tiny.CORPUS pairs: 96 train, 100 test, in ``root``."""
  c = tiny.CORPUS
  pairs = [(c[i], c[j]) for i in range(len(c)) for j in range(len(c)) if i != j]  # 132 pairs
  for name, rows in (("train-00000-of-00001.json", pairs[:96]), ("test-00000-of-00001.json", pairs[:100])):
    (root / name).write_text("".join(json.dumps({"context": a, "response": b}) + "\n" for a, b in rows))
  return root


def pod_config(tiny_bert_dir, reddit_dir, tmp_path):
  config = convfit_stage1_reddit.get_config()
  assert (config.model.dtype, config.mesh.fsdp, config.data.builder) == ("bfloat16", 4, "reddit_conversational")
  config.model.name = str(tiny_bert_dir)
  config.data.raw_dir = str(reddit_dir)
  config.data.tfds_dir = str(tmp_path / "tfds")
  config.train.batch_size = 16  # 2 rows per device; the [16, 16] score matrix spans all 8 devices
  config.train.max_steps, config.train.save_every, config.train.log_every = STEPS, 2, 1
  config.eval.max_pairs, config.eval.batch_size = 100, 32
  config.compilation_cache_dir = ""
  return config


def test_pod_config_runs_sharded_and_resumes_to_the_same_parameters(tiny_bert_dir, reddit_dir, tmp_path,
                                                                     monkeypatch, caplog):
  assert jax.device_count() == 8
  config = pod_config(tiny_bert_dir, reddit_dir, tmp_path)
  with caplog.at_level(logging.INFO, logger="fewshot_nlu"):
    straight = main.run(config, tmp_path / "straight")
  assert straight["steps"] == STEPS and straight["pairs"] == 96 and straight["num_eval"] == 100
  assert any(r.getMessage().startswith("sharded ") and "'fsdp'" in r.getMessage() for r in caplog.records), \
      "no parameter was sharded over the fsdp axis"

  calls = {"n": 0}
  real_global_batch = sharding.global_batch

  def interrupt_third_batch(batch, mesh):
    calls["n"] += 1
    if calls["n"] == 3:
      raise KeyboardInterrupt("simulated preemption")
    return real_global_batch(batch, mesh)

  monkeypatch.setattr(loop.sharding, "global_batch", interrupt_third_batch)
  with pytest.raises(KeyboardInterrupt):
    main.run(config, tmp_path / "resumed")
  monkeypatch.setattr(loop.sharding, "global_batch", real_global_batch)
  saved = [int(p.name) for p in (tmp_path / "resumed" / "checkpoints").iterdir() if p.name.isdigit()]
  assert max(saved) == 2  # the interrupt hit while fetching step 3's batch

  resumed = main.run(config, tmp_path / "resumed")
  assert resumed["steps"] == STEPS
  steps_logged = [json.loads(line)["step"] for line in
                  (tmp_path / "resumed" / "metrics.jsonl").read_text().splitlines() if "train/loss" in line]
  assert steps_logged == list(range(1, STEPS + 1))
  a = pretrained.load_pretrained(str(tmp_path / "straight" / "export")).params
  b = pretrained.load_pretrained(str(tmp_path / "resumed" / "export")).params
  jax.tree.map(np.testing.assert_array_equal, a, b)
  base = pretrained.load_pretrained(str(tiny_bert_dir)).params
  assert not np.array_equal(a["layer_0"]["attention"]["query"]["kernel"],
                            base["layer_0"]["attention"]["query"]["kernel"])


def test_remote_workdir_files_are_written_through_epath(tmp_path, monkeypatch):
  # gs:// cannot be reached here; a local target taken down the remote branch checks the copy and rewrite logic
  monkeypatch.setattr(workdirs, "is_remote", lambda path: True)
  target = workdirs.as_path(tmp_path / "remote" / "export")
  with workdirs.atomic_folder(target) as local:
    assert local != tmp_path / "remote" / "export"
    (local / "sub").mkdir()
    (local / "sub" / "a.txt").write_text("x")
    (local / "b.bin").write_bytes(b"\0\1")
  assert (tmp_path / "remote" / "export" / "sub" / "a.txt").read_text() == "x"
  assert (tmp_path / "remote" / "export" / "b.bin").read_bytes() == b"\0\1"

  writer = MetricWriter(tmp_path / "remote", tensorboard=False)
  for step in (1, 2, 3):
    writer.write(step, {"loss": step})
  writer.truncate_after(2)
  writer.write(3, {"loss": 30})
  writer.close()
  lines = [json.loads(line) for line in (tmp_path / "remote" / "metrics.jsonl").read_text().splitlines()]
  assert [(line["step"], line["loss"]) for line in lines] == [(1, 1), (2, 2), (3, 30)]


def test_remote_paths_are_refused_where_they_cannot_be_used(tiny_bert_dir, reddit_dir, tmp_path):
  config = pod_config(tiny_bert_dir, reddit_dir, tmp_path)
  config.data.raw_dir = "gs://bucket/reddit"
  with pytest.raises(ConfigError, match="data.raw_dir.*remote URL.*setup_workers.sh"):
    main.run(config, tmp_path / "w")
