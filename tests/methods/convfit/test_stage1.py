"""ConvFiT Stage 1 end to end on a tiny model: plain and gradient-cached runs agree; the pod-scale config
(configs/convfit_stage1_reddit.py) on 8 fake CPU devices (Reddit JSON lines, mesh data 2 x fsdp 4, bf16, async
checkpoints) resumes an interrupted run to the same parameters, and refuses remote paths it cannot use."""

import json
import logging

import jax
import numpy as np
import pytest

from configs import convfit_stage1 as stage1_config
from configs import convfit_stage1_reddit
from fewshot_nlu import main, sharding
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.encoders import pretrained
from fewshot_nlu.methods.convfit import stage2 as convfit
from fewshot_nlu.train import loop
from tests import tiny


def _reddit_folder(root):
  root.mkdir(parents=True)
  c = tiny.CORPUS
  lines = [{"context": c[i], "response": c[(i + 1) % len(c)]} for i in range(len(c))]
  (root / "train-00000-of-00001.json").write_text("".join(json.dumps(l) + "\n" for l in lines))
  return root


def _stage1_run(tmp_path, tiny_bert_dir, cache_chunks):
  config = stage1_config.get_config()
  config.model.name = str(tiny_bert_dir)
  config.data.builder, config.data.builder_config = "reddit_conversational", ""
  config.data.raw_dir = str(tmp_path / "reddit")
  config.data.tfds_dir = str(tmp_path / "tfds")
  config.data.eval_split = ""
  config.train.batch_size, config.train.max_steps, config.train.log_every = 8, 1, 1
  config.loss.cache_chunks = cache_chunks
  config.mesh.data = 1
  config.compilation_cache_dir = ""
  workdir = tmp_path / f"run{cache_chunks}"
  results = main.run(config, workdir)
  loss = json.loads((workdir / "metrics.jsonl").read_text().splitlines()[0])["train/loss"]
  return results, loss, pretrained.load_pretrained(str(workdir / "export"))


def test_stage1_end_to_end_plain_and_gradient_cached_agree(tmp_path):
  # without dropout, so the plain and the chunked forward passes see the same network
  (tmp_path / "tiny").mkdir()
  tiny_bert_dir = tiny.write_checkpoint(tmp_path / "tiny", "bert")
  hf = json.loads((tiny_bert_dir / "config.json").read_text())
  hf.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  (tiny_bert_dir / "config.json").write_text(json.dumps(hf))
  _reddit_folder(tmp_path / "reddit")
  results, loss, plain = _stage1_run(tmp_path, tiny_bert_dir, 0)
  assert results["steps"] == 1 and results["pairs"] == 12
  assert convfit.is_stage1_model(plain.directory)
  _, cached_loss, cached = _stage1_run(tmp_path, tiny_bert_dir, 2)
  np.testing.assert_allclose(cached_loss, loss, rtol=1e-5, atol=1e-6)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5), cached.params, plain.params)


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


def test_remote_paths_are_refused_where_they_cannot_be_used(tiny_bert_dir, reddit_dir, tmp_path):
  config = pod_config(tiny_bert_dir, reddit_dir, tmp_path)
  config.data.raw_dir = "gs://bucket/reddit"
  with pytest.raises(ConfigError, match="data.raw_dir.*remote URL.*setup_workers.sh"):
    main.run(config, tmp_path / "w")
