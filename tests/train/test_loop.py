"""The training loop (``train.loop``): kill-and-resume equality, a diverging run stops at once and exports nothing,
the parameters' finiteness check."""

import json
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import intent_mneg as baseline_config
from fewshot_nlu import main, sharding
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import pretrained, transformer
from fewshot_nlu.methods import baseline as intent_mneg
from fewshot_nlu.train import loop
from fewshot_nlu.train.checkpoint import Checkpointer
from fewshot_nlu.train.metrics import MetricWriter
from fewshot_nlu.train.setup import build_training
from tests import tiny
from tests.reliability_helpers import toy  # noqa: F401  (toy: fixture)
from tests.train.helpers import _loop


def test_a_nan_loss_stops_at_the_first_bad_step_before_any_checkpoint(tiny_model, tmp_path):
  def loss_fn(params, batch, rng):
    weight = params["embeddings"]["word_embeddings"]["embedding"]
    return jnp.sum(weight) * 0.0 + jnp.log(-1.0), {}  # NaN from the first step on (gradients stay 0)

  with pytest.raises(loop.TrainingDiverged,
                     match=re.escape("training diverged at step 1: loss is nan; try less")):
    _loop(tmp_path, tiny_model, loss_fn)  # steps 1-3 are fetched at step 3: the first bad one is named
  assert (Checkpointer(tmp_path, 3).latest_step() or 0) < 3  # the step-3 save was never made
  [line] = (tmp_path / "metrics.jsonl").read_text().splitlines()  # the bad metrics are logged, then the stop
  assert not math.isfinite(json.loads(line)["train/loss"])


def test_non_finite_parameters_stop_the_run_at_a_save_between_log_steps(tiny_model, tmp_path):
  def grads_fn(params, batch, rng):  # a finite loss, NaN gradients: the parameters become NaN
    return jnp.float32(1.0), {}, jax.tree.map(lambda p: jnp.full_like(p, jnp.nan), params)

  with pytest.raises(loop.TrainingDiverged,
                     match=re.escape("training diverged at step 1: the parameters are not finite (NaN / inf); "
                                     "try less")):
    _loop(tmp_path, tiny_model, grads_fn=grads_fn, save_every=1, log_every=100)
  assert Checkpointer(tmp_path, 1).latest_step() is None


def test_params_check():
  mesh = sharding.make_mesh({"data": 2}, jax.devices()[:2])
  all_finite = loop.make_params_check(mesh)
  params = {"a": jnp.ones((4, 2)), "b": {"c": jnp.zeros(3), "n": jnp.arange(3)}}
  assert bool(all_finite(params))
  assert not bool(all_finite({**params, "a": params["a"].at[1, 1].set(jnp.inf)}))
  assert not bool(all_finite({**params, "b": {"c": jnp.array([0.0, jnp.nan, 1.0]), "n": jnp.arange(3)}}))


def test_a_diverging_run_raises_and_exports_nothing(toy, tmp_path):
  toy.train.epochs = 4
  toy.train.learning_rate = 1e9  # loss NaN within a few steps (tiny BERT, toy data)
  with pytest.raises(loop.TrainingDiverged, match=r"training diverged at step \d+: .*; lower "
                     r"config\.train\.learning_rate \(now 1e\+09\)"):
    main.run(toy, tmp_path / "run")
  assert not (tmp_path / "run" / "export").exists() and not (tmp_path / "run" / "results.json").exists()


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
