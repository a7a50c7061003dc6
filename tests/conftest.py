"""Test set-up: 8 fake CPU devices (set before JAX is imported) so sharded paths run on one CPU."""

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
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
