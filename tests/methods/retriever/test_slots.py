"""The Retriever's SNIPS slot-filling protocol (``methods.retriever.slots``) end to end on toy episodes with a
tiny model."""

import json

from tests.methods.retriever.helpers import _config, write_toy_snips


def test_snips_protocol_end_to_end(tiny_bert_dir, tmp_path, capsys):
  from fewshot_nlu import main as main_lib
  raw = write_toy_snips(tmp_path / "raw")
  config = _config()
  config.model.name = str(tiny_bert_dir)
  config.model.max_length = 32
  config.data.raw_dir, config.data.tfds_dir = str(raw), str(tmp_path / "tfds")
  config.data.folds = (2,)
  config.retriever.encoder_layers = 0  # the tiny model has 2 layers (the default cuts MiniLM at 3)
  config.train.epochs, config.train.max_steps, config.eval.dev_every, config.train.save_every = 5, 3, 2, 2
  config.compilation_cache_dir = ""
  config.mesh.data = 2
  results = main_lib.run(config, tmp_path / "run")
  assert set(results["f1"]) == {"Domain2test"}
  fold = json.loads((tmp_path / "run" / "fold2" / "results.json").read_text())
  assert fold["training"]["best_step"] in (2, 3) and fold["training"]["steps"] == 3
  assert fold["training"]["global_batch"] == 4 * 3  # B = 4 spans x 3 slot labels, a multiple of 2 devices
  assert fold["threshold"] in config.retriever.thresholds
  assert (tmp_path / "run" / "fold2" / "best" / "best.json").exists()
  lines = (tmp_path / "run" / "fold2" / "predictions.tsv").read_text().splitlines()
  assert len(lines) == 1 + 2 * 3  # header + 2 episodes x 3 queries
  assert "Domain2test" in (tmp_path / "run" / "results.md").read_text()
  assert "| Average F1 |" in capsys.readouterr().out
  # a restart keeps the finished fold instead of redoing it
  again = main_lib.run(config, tmp_path / "run")
  assert again["f1"] == results["f1"]
