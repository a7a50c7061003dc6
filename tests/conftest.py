"""Test set-up: 8 fake CPU devices (set before JAX is imported) so sharded paths run on one CPU."""

import os

# A collective across the 8 in-process devices waits for all 8 threads; on 2 cores shared with another test
# worker (4 JAX processes in test_multiprocess) a thread can be starved past XLA's default termination timeout,
# which aborts the process (seen once in CI: a sharded Stage 1 step). Waiting longer is the right behaviour here.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8"
                           " --xla_cpu_collective_call_terminate_timeout_seconds=600").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Run on an accelerator (JAX_PLATFORMS=cuda / tpu), float32 matrix products default to TF32 (GPU) or bfloat16
# passes (TPU): ~1e-3 off the numpy references and the single-device results the tests hold code to. The tests
# check the maths, so they ask for full float32 there (seen on an H100: 20 reference tests off by 1e-5..1e-2
# without it). On CPU it changes nothing.
if os.environ["JAX_PLATFORMS"] != "cpu":
  os.environ.setdefault("JAX_DEFAULT_MATMUL_PRECISION", "highest")
else:
  # The tests' programs are tiny and mostly run a few times each, so XLA's optimisation passes cost more than they
  # save: without them (LLVM at -O0) a sharded step test took 26 s instead of 54 s here, a tiny ConvFiT run 71 s
  # instead of 82 s. Same maths; the tests' tolerances are set for float32 reduction order on another machine.
  # Programs the tests launch as processes inherit it; the in-process tests marked `integration` (the real
  # MiniLM, where the programs do real work) switch it back off (`_optimise_real_models`).
  os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
# No test reads or writes the user's persistent compilation cache (~/.cache/fewshot_nlu/jax by default): a fit or
# a server in a test worker switched it on for the whole process, so the tests of one run loaded programs an
# earlier run had compiled (suspected, not shown, in CI runs that stalled inside a sharded collective)
os.environ["FEWSHOT_NLU_JAX_CACHE"] = ""
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pathlib  # noqa: E402

import jax  # noqa: E402
import pytest  # noqa: E402

from tests import tiny  # noqa: E402

SHARED_DATA = pathlib.Path(os.environ.get("FEWSHOT_NLU_DATA",
                                          pathlib.Path(__file__).parents[2] / "shared" / "data"))


@pytest.fixture(autouse=True)
def _optimise_real_models(request):
  """XLA's optimisations back on for a test on the real MiniLM (see JAX_DISABLE_MOST_OPTIMIZATIONS above): its
  programs run long enough to repay them (a joint-NLU fit took 287 s without, 170 s with)."""
  if request.node.get_closest_marker("integration") is None:
    yield
    return
  before = jax.config.read("jax_disable_most_optimizations")
  jax.config.update("jax_disable_most_optimizations", False)
  try:
    yield
  finally:
    jax.config.update("jax_disable_most_optimizations", before)


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
  return tiny.write_checkpoint(tmp_path_factory.mktemp("tiny_bert"), "bert")


@pytest.fixture(scope="session")
def tiny_roberta_dir(tmp_path_factory):
  return tiny.write_checkpoint(tmp_path_factory.mktemp("tiny_roberta"), "roberta")


@pytest.fixture(scope="session")
def tiny_mpnet_dir(tmp_path_factory):
  return tiny.write_checkpoint(tmp_path_factory.mktemp("tiny_mpnet"), "mpnet")
