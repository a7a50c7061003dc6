"""Checkpoints (``train.checkpoint``): a checkpoint that does not restore is skipped for the previous one; none
that restores is one user error."""

import pathlib

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from configs import intent_mneg as baseline_config
from fewshot_nlu import errors
from fewshot_nlu.methods import baseline as intent_mneg
from fewshot_nlu.train import checkpoint
from tests.train.helpers import _loop


def _corrupt(step_dir: pathlib.Path, how: str) -> None:
  if how == "truncated state":
    biggest = max((p for p in (step_dir / "state").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    biggest.write_bytes(biggest.read_bytes()[: biggest.stat().st_size // 2])
  else:  # empty data metadata
    files = [p for p in (step_dir / "data").rglob("*") if p.is_file()]
    assert files
    for p in files:
      p.write_text("")


def _mneg(model):
  return intent_mneg.make_loss_fn(model.config, baseline_config.get_config())


@pytest.mark.parametrize("how", ["truncated state", pytest.param("empty data", marks=pytest.mark.slow)])
def test_a_corrupt_latest_checkpoint_is_skipped_for_the_previous_one(tiny_model, tmp_path, how, caplog):
  first = _loop(tmp_path / "a", tiny_model, _mneg(tiny_model), total_steps=4, save_every=2)
  _corrupt(tmp_path / "a" / "checkpoints" / "4", how)
  with caplog.at_level("WARNING"):
    resumed = _loop(tmp_path / "a", tiny_model, _mneg(tiny_model), total_steps=4, save_every=2)
  assert "checkpoint of step 4" in caplog.text and "does not restore" in caplog.text
  assert [p.name.split("-")[0] for p in (tmp_path / "a" / "checkpoints.skipped").iterdir()] == ["4"]
  for a, b in zip(jax.tree.leaves(first.params), jax.tree.leaves(resumed.params)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # step 2 + the same two batches again


def test_no_checkpoint_that_restores_is_one_user_error(tiny_model, tmp_path):
  _loop(tmp_path / "a", tiny_model, _mneg(tiny_model), total_steps=2, save_every=2)
  steps = [p for p in (tmp_path / "a" / "checkpoints").iterdir() if p.name.isdigit()]
  assert steps
  for step_dir in steps:
    _corrupt(step_dir, "truncated state")
  with pytest.raises(Exception) as info:
    _loop(tmp_path / "a", tiny_model, _mneg(tiny_model), total_steps=4, save_every=2)
  message = errors.one_line(info.value)
  assert message and message.startswith("error: no checkpoint under ") and "step 2 (" in message
  assert message.endswith("rerun with --overwrite to start afresh")


def test_one_process_writes_replicated_arrays_whole_quietly_and_restores_them(tmp_path, caplog):
  """Orbax's jax.Array handler is registered once, without its override warning, with its replica-parallel split
  off in one process; an array replicated over the 8 host devices comes back equal, with its sharding."""
  mesh = jax.sharding.Mesh(np.array(jax.devices()), ("data",))
  replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  state = {"w": jax.device_put(np.arange(24, dtype=np.float32).reshape(6, 4), replicated)}
  with caplog.at_level("WARNING"):
    for name in ("a", "b"):
      saver = checkpoint.Checkpointer(tmp_path / name, save_every=1)
      assert saver.save(1, state, {"position": 3})
      saver.wait()
  assert "Type handler registry" not in caplog.text
  handler = ocp.type_handlers.get_type_handler(jax.Array)
  assert handler is checkpoint._ARRAY_HANDLERS[False] and not handler._use_replica_parallel
  abstract = {"w": jax.ShapeDtypeStruct((6, 4), np.float32, sharding=replicated)}
  restored, data = checkpoint.Checkpointer(tmp_path / "b", save_every=1).restore(abstract, 1)
  np.testing.assert_array_equal(np.asarray(restored["w"]), np.asarray(state["w"]))
  assert restored["w"].sharding == replicated and data == {"position": 3}
