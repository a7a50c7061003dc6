"""Every number in a config finite and in range before anything runs (``config_checks``), for every method and
through the CLI."""

import re

import ml_collections
import pytest

from configs import convfit_banking77 as convfit_config
from configs import convfit_stage1 as stage1_config
from configs import dse_pretrain as dse_config
from fewshot_nlu import config_checks, main
from fewshot_nlu.config_checks import ConfigError
from tests.reliability_helpers import _cli, toy  # noqa: F401  (toy: fixture)

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("field,value,message", [
    ("train.learning_rate", NAN, "config.train.learning_rate: nan is not a finite number"),
    ("train.learning_rate", INF, "config.train.learning_rate: inf is not a finite number"),
    ("train.weight_decay", NAN, "config.train.weight_decay: nan is not a finite number"),
    ("train.warmup_fraction", -INF, "config.train.warmup_fraction: -inf is not a finite number"),
    ("loss.scale", NAN, "config.loss.scale: nan is not a finite number"),
    ("train.group_learning_rates", (("layer_1/.*", NAN),),
     "config.train.group_learning_rates[0][1]: nan is not a finite number"),
    ("train.max_steps", -5, "config.train.max_steps: must be a number >= 0, got -5"),
    ("train.keep_checkpoints", 0, "config.train.keep_checkpoints: must be a positive number, got 0"),
    ("train.weight_decay", -0.1, "config.train.weight_decay: must be a number >= 0, got -0.1"),
    ("train.grad_clip_norm", -1.0, "config.train.grad_clip_norm: must be a number >= 0, got -1.0"),
    ("train.learning_rate", 0.0, "config.train.learning_rate: must be a positive number, got 0.0"),
    ("train.group_learning_rates", (("layer_1/.*", 0.0),),
     "config.train.group_learning_rates[0]: the learning rate of 'layer_1/.*' must be a positive number, got 0.0"),
    ("loss.scale", 0.0, "config.loss.scale: must be a positive number, got 0.0"),
    ("loss.scale", -20.0, "config.loss.scale: must be a positive number, got -20.0"),
])
def test_bad_numbers_are_config_errors_naming_the_field(toy, tmp_path, field, value, message):
  section, _, name = field.rpartition(".")
  config_checks.get(toy, section)[name] = value
  with pytest.raises(ConfigError, match=re.escape(message)):
    main.run(toy, tmp_path / "w")
  assert not (tmp_path / "w").exists()  # refused before anything was written or compiled


def test_every_number_is_checked_wherever_it_sits():
  config = ml_collections.ConfigDict({"a": {"b": 1, "c": (0.5, ("x", 2.0)), "flag": True, "name": "nan"}})
  config_checks.require_finite_numbers(config)  # strings and bools are not numbers
  assert dict(config_checks.numeric_leaves(config)) == {"config.a.b": 1, "config.a.c[0]": 0.5,
                                                         "config.a.c[1][1]": 2.0}
  config.a.c = (0.5, ("x", NAN))
  with pytest.raises(ConfigError, match=re.escape("config.a.c[1][1]: nan is not a finite number")):
    config_checks.require_finite_numbers(config)
  for bad in (NAN, INF, True):
    with pytest.raises(ConfigError, match="must be a positive number"):
      config_checks.require_positive(ml_collections.ConfigDict({"x": bad}), "x")


@pytest.mark.parametrize("make,field,value,message", [
    (stage1_config.get_config, "loss.scale", 0.0, "config.loss.scale: must be a positive number, got 0.0"),
    (stage1_config.get_config, "train.max_steps", -1, "config.train.max_steps: must be a number >= 0, got -1"),
    (stage1_config.get_config, "loss.cache_chunks", -1, "config.loss.cache_chunks: must be a number >= 0, got -1"),
    (dse_config.get_config, "loss.temperature", 0.0, "config.loss.temperature: must be a positive number, got 0.0"),
    (dse_config.get_config, "train.max_steps", -5, "config.train.max_steps: must be a number >= 0, got -5"),
    (dse_config.get_config, "loss.temperature", INF, "config.loss.temperature: inf is not a finite number"),
    (convfit_config.get_config, "stage2.margin", 0.0, "config.stage2.margin: the OCL margin on the cosine distance "
     "1 - cos must lie in (0, 2], got 0.0"),
    (convfit_config.get_config, "stage2.margin", 2.5, "must lie in (0, 2], got 2.5"),
])
def test_other_methods_check_their_scales_and_steps(tmp_path, make, field, value, message):
  config = make()
  section, _, name = field.rpartition(".")
  config_checks.get(config, section)[name] = value
  with pytest.raises(ConfigError, match=re.escape(message)):
    main.run(config, tmp_path / "w")
  assert not (tmp_path / "w").exists()


def test_cli_nan_learning_rate_exits_2_naming_the_field(tmp_path):
  result = _cli("--config.train.learning_rate=nan", workdir=tmp_path / "w")
  assert result.returncode == 2, result.stderr
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line == "error: config.train.learning_rate: nan is not a finite number"
  assert not (tmp_path / "w").exists()
