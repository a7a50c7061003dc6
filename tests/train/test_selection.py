"""train.selection: the best-model record and the patience rule QAID and the Retriever share."""

import ml_collections
import pytest

from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.train import selection


def _config(patience: int, dev_every: int) -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.eval = ml_collections.ConfigDict({"patience": patience, "dev_every": dev_every})
  return config


@pytest.mark.parametrize("step, best_step, expected", [
    (30, None, False),  # no best yet: never stop
    (30, 10, False),    # 2 evaluations after the best
    (40, 10, True),     # 3 evaluations after the best: P = 3 exhausted
    (50, 10, True),
    (40, 40, False),    # the best is this evaluation
])
def test_patience_counts_evaluations_since_the_best_step(step, best_step, expected):
  assert selection.patience_exhausted(_config(3, 10), step, best_step) is expected


def test_patience_zero_trains_to_the_end():
  assert not selection.patience_exhausted(_config(0, 10), 10_000, 0)


def test_best_record_round_trips_and_is_none_before_the_first(tmp_path):
  assert selection.read_best(tmp_path) is None
  selection.best_dir(tmp_path).mkdir()
  selection.write_best(tmp_path, {"step": 20, "score": 0.5})
  assert selection.read_best(tmp_path) == {"step": 20, "score": 0.5}


@pytest.mark.parametrize("field", ["patience", "dev_every"])
def test_negative_counts_are_config_errors_naming_the_field(field):
  config = _config(1, 1)
  config.eval[field] = -1
  with pytest.raises(ConfigError, match=f"eval.{field}"):
    selection.validate(config)
