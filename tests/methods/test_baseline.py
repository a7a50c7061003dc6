"""The in-batch ranking baseline (``methods.baseline``) trains on packed batches."""

from fewshot_nlu import main
from tests import tiny
from tests.test_main import _toy_config, _toy_dataset


def test_baseline_trains_with_packed_batches(tmp_path, tiny_bert_dir):
  corpus = tiny.CORPUS
  data = _toy_dataset(tmp_path / "data", {"bank": corpus[:3], "music": corpus[3:6], "misc": corpus[6:11]},
                      {"bank": corpus[4:5], "music": corpus[11:12]})
  config = _toy_config(data, tiny_bert_dir)
  config.train.packing = True
  results = main.run(config, tmp_path / "run")
  assert results["steps"] == 2 and results["num_eval"] == 2
