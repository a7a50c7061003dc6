"""The Retriever's SNIPS slot-filling protocol (``methods.retriever.slots``) end to end on toy episodes with a
tiny model."""

import json

import jax
import numpy as np
import pytest

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


@pytest.mark.parametrize("mode", ["metric", "encoder"])
def test_each_episodes_support_is_learnt_and_the_export_holds_what_learnt_test_episode_0(tiny_bert_dir, tmp_path,
                                                                                         mode):
  """``retriever.support_steps`` (the ``tuned`` / ``tuned_encoder`` variants): the step count is chosen on the
  development episodes, and the export holds the encoder as test episode 0's support set left it — a span metric
  beside untouched layers (``metric``) or changed layers and no metric (``encoder``)."""
  from fewshot_nlu import main as main_lib
  from fewshot_nlu.encoders import pretrained
  from fewshot_nlu.models.slot_filler import SlotFillerModel
  raw = write_toy_snips(tmp_path / "raw")
  config = _config()
  config.model.name, config.model.max_length = str(tiny_bert_dir), 32
  config.data.raw_dir, config.data.tfds_dir = str(raw), str(tmp_path / "tfds")
  config.data.folds = (3,)
  config.retriever.encoder_layers = 0
  config.retriever.train = False  # the untouched encoder: what the support learning changes is all there is
  config.retriever.support_steps, config.retriever.support_mode = (2,), mode
  config.train.frozen_prefix_layers = 0  # the encoder's layers learn (its embeddings frozen)
  config.compilation_cache_dir = ""
  config.mesh.data = 1
  main_lib.run(config, tmp_path / "run")
  fold = json.loads((tmp_path / "run" / "fold3" / "results.json").read_text())
  assert fold["support_steps"] == 2 and set(fold["dev_f1_by_steps"]) == {"2"}
  export = SlotFillerModel.load(tmp_path / "run" / "fold3" / "export")
  assert "learnt that support set for 2 steps" in export.notes["encoder"]
  untouched = pretrained.load_pretrained(str(tiny_bert_dir)).params
  changed = [np.abs(np.asarray(a) - np.asarray(b)).max() > 0 for a, b in
             zip(jax.tree_util.tree_leaves(export.retriever.encoder.params), jax.tree_util.tree_leaves(untouched))]
  if mode == "metric":
    assert export.retriever.encoder.metric is not None and not any(changed)
  else:
    assert export.retriever.encoder.metric is None and any(changed)
  assert export.predict(["play jazz please"])  # it answers
