"""Test set-up: 8 fake CPU devices (set before JAX is imported) so sharded paths run on one CPU."""

import os

# A collective across the 8 in-process devices waits for all 8 threads; on 2 cores shared with another test
# worker (4 JAX processes in test_multiprocess) a thread can be starved past XLA's default termination timeout,
# which aborts the process (seen once in CI: a sharded Stage 1 step). Waiting longer is the right behaviour here.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8"
                           " --xla_cpu_collective_call_terminate_timeout_seconds=600").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# CPU programs run one at a time in tests: with asynchronous dispatch, two sharded programs in flight over the 8
# in-process devices were seen to stop, idle, inside their collectives (fresh-clone CI on 2 cores, at random:
# tests/test_sharding.py, the sharded Stage 1 resume test); the cause in XLA's CPU runtime is not pinned down
import jax  # noqa: E402  (after the flags above)
jax.config.update("jax_cpu_enable_async_dispatch", False)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pathlib  # noqa: E402

import pytest  # noqa: E402

from tests import tiny  # noqa: E402

SHARED_DATA = pathlib.Path(os.environ.get("FEWSHOT_NLU_DATA",
                                          pathlib.Path(__file__).parents[2] / "shared" / "data"))


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
  return tiny.write_checkpoint(tmp_path_factory.mktemp("tiny_bert"), "bert")


@pytest.fixture(scope="session")
def tiny_roberta_dir(tmp_path_factory):
  return tiny.write_checkpoint(tmp_path_factory.mktemp("tiny_roberta"), "roberta")


@pytest.fixture(scope="session")
def tiny_mpnet_dir(tmp_path_factory):
  return tiny.write_checkpoint(tmp_path_factory.mktemp("tiny_mpnet"), "mpnet")
