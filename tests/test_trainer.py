"""Schedules, freezing, stream state, and kill-and-resume equality of the training loop."""

import json

import jax
import numpy as np
import optax
import pytest

from configs import intent_mneg as baseline_config
from fewshot_nlu import sharding
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import pretrained, transformer
from fewshot_nlu.methods import baseline as intent_mneg
from fewshot_nlu.train import loop, optimizer
from fewshot_nlu.train.checkpoint import Checkpointer
from fewshot_nlu.train.metrics import MetricWriter
from fewshot_nlu.train.setup import build_training
from tests import tiny


def test_schedules():
  linear = optimizer.make_schedule(1.0, 100, 0.1, "linear")
  assert linear(0) == 0 and np.isclose(linear(5), 0.5) and np.isclose(linear(10), 1.0)
  assert np.isclose(linear(55), 0.5) and np.isclose(linear(100), 0.0)
  cosine = optimizer.make_schedule(1.0, 100, 0.1, "cosine")
  assert np.isclose(cosine(10), 1.0) and np.isclose(cosine(55), 0.5, atol=1e-6) and cosine(100) < 1e-6
  assert np.isclose(optimizer.make_schedule(2.0, 10, 0.0, "constant")(7), 2.0)
  with pytest.raises(ValueError, match="decay"):
    optimizer.make_schedule(1.0, 10, 0.1, "exponential")


def test_weight_decay_mask_and_freeze_labels():
  cfg = transformer.EncoderConfig.from_hf(tiny.hf_config("bert", 50))
  params = transformer.init_params(cfg, jax.random.key(0))
  mask = optimizer.weight_decay_mask(params)
  assert mask["layer_0"]["intermediate"]["kernel"] and not mask["layer_0"]["intermediate"]["bias"]
  assert not mask["layer_0"]["output_norm"]["scale"] and not mask["embeddings"]["LayerNorm"]["scale"]
  labels = optimizer.freeze_labels(params, trainable=["layer_1/.*"], frozen=[".*/bias"])
  assert labels["layer_1"]["output"]["kernel"] == "train" and labels["layer_1"]["output"]["bias"] == "freeze"
  assert labels["layer_0"]["output"]["kernel"] == "freeze"
  with pytest.raises(ValueError, match="no parameter matches"):
    optimizer.freeze_labels(params, trainable=["adapter/.*"])


def test_frozen_params_stay_bit_identical():
  cfg = transformer.EncoderConfig.from_hf(tiny.hf_config("bert", 50))
  params = transformer.init_params(cfg, jax.random.key(0))
  tx, _ = optimizer.make_optimizer(params, learning_rate=1e-2, total_steps=5, weight_decay=0.1,
                                   grad_clip_norm=1.0, frozen=["embeddings/.*", "layer_0/.*"])
  opt_state = tx.init(params)
  grads = jax.tree.map(np.ones_like, params)
  new = params
  for _ in range(3):
    updates, opt_state = tx.update(grads, opt_state, new)
    new = optax.apply_updates(new, updates)
  jax.tree.map(np.testing.assert_array_equal, new["embeddings"], params["embeddings"])
  jax.tree.map(np.testing.assert_array_equal, new["layer_0"], params["layer_0"])
  assert not np.array_equal(new["layer_1"]["output"]["kernel"], params["layer_1"]["output"]["kernel"])


def test_group_learning_rates_scale_each_group_and_keep_frozen_params():
  """Adam's first step moves every param by ~its learning rate (sign of the gradient): the head group by 3e-2,
  the rest by 3e-4, frozen params not at all; clipping spans all groups together."""
  params = {"encoder": {"w": np.ones((3,), np.float32), "b": np.ones((2,), np.float32)},
            "head": {"w": np.ones((4,), np.float32)}}
  tx, _ = optimizer.make_optimizer(params, learning_rate=3e-4, total_steps=10, warmup_fraction=0.0,
                                   decay="constant", weight_decay=0.0, grad_clip_norm=1.0,
                                   frozen=["encoder/b"], group_learning_rates=[("head/.*", 3e-2)])
  grads = jax.tree.map(lambda x: np.full_like(x, 5.0), params)
  updates, _ = tx.update(grads, tx.init(params), params)
  np.testing.assert_allclose(updates["head"]["w"], -3e-2, rtol=1e-3)
  np.testing.assert_allclose(updates["encoder"]["w"], -3e-4, rtol=1e-3)
  np.testing.assert_array_equal(updates["encoder"]["b"], 0.0)
  with pytest.raises(ValueError, match="matches no trainable"):
    optimizer.make_optimizer(params, learning_rate=1e-3, total_steps=5, group_learning_rates=[("nope/.*", 1.0)])


def test_stream_is_deterministic_and_resumable():
  make = lambda idx, epoch, b: {"idx": np.pad(idx, (0, b - len(idx)), constant_values=-1)}
  a = EpochStream(10, 4, make, seed=3)
  seen = [next(a)["idx"] for _ in range(7)]  # 3 steps per epoch: crosses two epoch boundaries
  assert sorted(np.concatenate(seen[:3])[np.concatenate(seen[:3]) >= 0]) == list(range(10))
  b = EpochStream(10, 4, make, seed=3)
  b.set_state(json.loads(json.dumps(EpochStream(10, 4, make, seed=3).get_state())))
  for _ in range(4):
    next(b)
  c = EpochStream(10, 4, make, seed=3)
  c.set_state(b.get_state())
  np.testing.assert_array_equal(next(c)["idx"], seen[4])
  with pytest.raises(ValueError, match="batch_size"):
    EpochStream(10, 5, make, seed=3).set_state(a.get_state())


class _Interrupting(EpochStream):
  """Raises ``error`` when batch number ``at`` (0-based, counted in this process) is requested."""

  def __init__(self, *args, at=None, error=None, **kwargs):
    super().__init__(*args, **kwargs)
    self.at, self.error, self.calls = at, error, 0

  def __next__(self):
    if self.calls == self.at:
      raise self.error
    self.calls += 1
    return super().__next__()


def _train(workdir, model, total_steps=6, save_every=3, at=None, error=None, log_every=1):
  config = baseline_config.get_config()
  config.train.learning_rate = 1e-3
  mesh = sharding.make_mesh({"data": 2}, jax.devices()[:2])
  split = intent_mneg.IntentSplit(tiny.CORPUS[:10], [f"l{i % 4}" for i in range(10)], None)
  make_batch = intent_mneg.make_batcher(split, {f"l{i}": i for i in range(4)}, model.tokenizer, 32, seed=0)
  stream = _Interrupting(10, 4, make_batch, seed=0, at=at, error=error)  # 3 steps / epoch
  training = build_training(model.params, transformer.logical_axes(model.config),
                            intent_mneg.make_loss_fn(model.config, config), total_steps, mesh, config)
  checkpointer = Checkpointer(workdir, save_every, keep=10)
  writer = MetricWriter(workdir, tensorboard=False)
  try:
    state = loop.train(training=training, stream=stream, total_steps=total_steps, mesh=mesh,
                       checkpointer=checkpointer, writer=writer, log_every=log_every)
  finally:
    checkpointer.close()
    writer.close()
  return jax.device_get(state.params), checkpointer


@pytest.fixture(scope="module")
def uninterrupted(tiny_bert_dir, tmp_path_factory):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  workdir = tmp_path_factory.mktemp("uninterrupted")
  params, _ = _train(workdir, model)
  return model, params, workdir


def _assert_same(a, b):
  jax.tree.map(np.testing.assert_array_equal, a, b)


def test_interrupt_saves_and_resume_matches(uninterrupted, tmp_path):
  model, expected, reference_dir = uninterrupted
  with pytest.raises(KeyboardInterrupt):  # 4 steps done; step 4 is neither a save nor a log step
    _train(tmp_path, model, at=4, error=KeyboardInterrupt(), log_every=3)
  assert Checkpointer(tmp_path, 3).latest_step() == 4
  params, _ = _train(tmp_path, model, log_every=3)
  _assert_same(params, expected)
  # Metrics: logged every 3 steps, plus the steps pending at the interrupt; none repeated or lost.
  lines = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert [l["step"] for l in lines] == [3, 4, 6]
  ref = [json.loads(l)["train/loss"] for l in (reference_dir / "metrics.jsonl").read_text().splitlines()]
  np.testing.assert_allclose([l["train/loss"] for l in lines],
                             [np.mean(ref[0:3]), ref[3], np.mean(ref[4:6])], rtol=1e-5, atol=1e-6)


def test_hard_crash_resumes_from_last_periodic_checkpoint(uninterrupted, tmp_path):
  model, expected, _ = uninterrupted
  with pytest.raises(RuntimeError, match="simulated"):
    _train(tmp_path, model, at=5, error=RuntimeError("simulated kill"))  # no save on a crash
  assert Checkpointer(tmp_path, 3).latest_step() == 3
  params, _ = _train(tmp_path, model)
  _assert_same(params, expected)
  steps = [json.loads(l)["step"] for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert steps == list(range(1, 7))  # steps 4-5 of the crashed run were dropped, then redone


def test_train_returns_the_steps_trained_when_a_callback_stops_early(tiny_bert_dir, tmp_path):
  from fewshot_nlu.train import run as train_run
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  config = baseline_config.get_config()
  mesh = sharding.make_mesh({"data": 2}, jax.devices()[:2])
  split = intent_mneg.IntentSplit(tiny.CORPUS[:10], [f"l{i % 4}" for i in range(10)], None)
  stream = EpochStream(10, 4, intent_mneg.make_batcher(split, {f"l{i}": i for i in range(4)}, model.tokenizer, 32,
                                                       seed=0), seed=0)
  seen = []

  def stop_at_four(step, state):
    seen.append(step)
    return step == 4

  _, steps = train_run.train(config, tmp_path, model.params, transformer.logical_axes(model.config),
                             intent_mneg.make_loss_fn(model.config, config), stream, mesh,
                             MetricWriter(tmp_path, tensorboard=False), total_steps=6, callback=stop_at_four,
                             callback_every=2)
  assert seen == [2, 4] and steps == 4
