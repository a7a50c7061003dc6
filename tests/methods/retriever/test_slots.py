"""The Retriever's SNIPS slot-filling protocol (``methods.retriever.slots``) end to end on toy episodes with a
tiny model."""

import json

import jax
import numpy as np
import pytest

from tests.methods.retriever.helpers import _config, write_toy_snips


def _toy_fold_config(tiny_bert_dir, tmp_path, fold: int, devices: int):
  """The SNIPS config on the toy episodes (written under ``tmp_path``), the tiny model, one ``fold``."""
  config = _config()
  config.model.name, config.model.max_length = str(tiny_bert_dir), 32
  config.data.raw_dir, config.data.tfds_dir = str(write_toy_snips(tmp_path / "raw")), str(tmp_path / "tfds")
  config.data.folds = (fold,)
  config.retriever.encoder_layers = 0  # the tiny model has 2 layers (the default cuts MiniLM at 3)
  config.compilation_cache_dir = ""
  config.mesh.data = devices
  return config


def test_snips_protocol_end_to_end(tiny_bert_dir, tmp_path, capsys):
  from fewshot_nlu import main as main_lib
  config = _toy_fold_config(tiny_bert_dir, tmp_path, fold=2, devices=2)
  config.train.epochs, config.train.max_steps, config.eval.dev_every, config.train.save_every = 5, 3, 2, 2
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
  config = _toy_fold_config(tiny_bert_dir, tmp_path, fold=3, devices=1)
  config.retriever.train = False  # the untouched encoder: what the support learning changes is all there is
  config.retriever.support_steps, config.retriever.support_mode = (2,), mode
  config.retriever.support_frozen_layers = 0  # the encoder's layers learn (its embeddings frozen)
  main_lib.run(config, tmp_path / "run")
  fold = json.loads((tmp_path / "run" / "fold3" / "results.json").read_text())
  assert fold["support_steps"] == 2 and set(fold["dev_f1_by_steps"]) == {"2"}
  for part in ("dev", "test"):  # every episode journalled as it finished (what a restart would read back)
    assert len((tmp_path / "run" / "fold3" / f"{part}_episodes.jsonl").read_text().splitlines()) == 2
  export = SlotFillerModel.load(tmp_path / "run" / "fold3" / "export")
  assert "learnt that support set for 2 steps" in export.notes["encoder"]
  untouched = pretrained.load_pretrained(str(tiny_bert_dir)).params
  assert jax.tree_util.tree_structure(export.retriever.encoder.params) == jax.tree_util.tree_structure(untouched)
  changed = [np.abs(np.asarray(a) - np.asarray(b)).max() > 0 for a, b in
             zip(jax.tree_util.tree_leaves(export.retriever.encoder.params), jax.tree_util.tree_leaves(untouched))]
  if mode == "metric":
    assert export.retriever.encoder.metric is not None and not any(changed)
  else:
    assert export.retriever.encoder.metric is None and any(changed)
  assert export.predict(["play jazz please"])  # it answers


def test_an_interrupted_learnt_support_evaluation_resumes_from_its_journal(tiny_bert_dir, tmp_path, monkeypatch):
  """``tuned_episode_f1(journal=...)``: finished episodes are read back (not learnt again) with their F1 and
  predictions; an episode whose record a kill cut short, or recorded under other steps, is learnt again."""
  from fewshot_nlu.encoders import pretrained
  from fewshot_nlu.methods import span_training
  from fewshot_nlu.methods.retriever import slots
  from fewshot_nlu.models.span_retrieval import SlotRetriever, SpanEncoder
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=8)

  def utterance(value, label):
    return {"tokens": ["play", value, "now"], "tags": ["O", f"B-{label}", "O"]}

  episodes = [{"support": [utterance("jazz", "genre"), utterance("rock", "genre"), utterance("adele", "artist"),
                           utterance("queen", "artist")],
               "query": [utterance(v, "genre"), utterance("abba", "artist")]} for v in ("pop", "blues", "soul")]
  tuning = span_training.SupportTuning(steps=2, mode="metric", learning_rate=1e-2)

  def run(steps=(0, 2), **kwargs):
    return slots.tuned_episode_f1(encoder, episodes, steps, (0.3, 0.6), slots._decoding(_config()),
                                  lambda e: SlotRetriever(e, max_words=3), tuning, seed=0, **kwargs)

  journal = tmp_path / "episodes.jsonl"
  first_predictions, second_predictions = [], []
  scores = run(journal=journal, predictions=first_predictions)
  assert [row[0] for row in first_predictions] == [0, 0, 1, 1, 2, 2]  # each query under its own episode
  lines = journal.read_text().splitlines(keepends=True)
  assert len(lines) == 3
  journal.write_text("".join(lines[:2]) + lines[2][:20])  # the last record cut short by a kill
  learnt = []
  original = span_training.learn_support
  monkeypatch.setattr(span_training, "learn_support", lambda *a, **k: learnt.append(1) or original(*a, **k))
  again = run(journal=journal, predictions=second_predictions)
  np.testing.assert_allclose(again, scores, rtol=1e-6, atol=1e-6)
  assert len(learnt) == 1 and second_predictions == first_predictions
  assert len(journal.read_text().splitlines()) == 3
  learnt.clear()
  run((0, 1), journal=journal)  # another step grid: nothing in the journal is its
  assert len(learnt) == 3


class _ScriptedRetriever:
  """Answers each held-out utterance with the candidates scripted for it (what ``support_threshold`` asks)."""

  def __init__(self, scripted: dict):
    self.scripted, self.supports = scripted, []

  def set_support(self, utterances):
    self.supports.append(len(utterances))

  def candidates(self, word_lists):
    return [[(c, {}) for c in self.scripted[" ".join(words)]] for words in word_lists]


def test_an_episodes_threshold_is_its_supports_best_left_one_out_and_the_lower_median_of_ties():
  """Each support utterance decoded from the others at every threshold, pooled: its gold span scores 0.8 and a
  wrong span 0.5, so 0.4 keeps both (F1 2/3) and 0.6 / 0.7 / 0.95 (lowered to 0.8 by the dynamic threshold) keep
  the gold alone (F1 1): the lower median of the tied, 0.7. An utterance whose others hold no label is skipped."""
  from fewshot_nlu.methods.retriever import slots
  from fewshot_nlu.models.span_decoding import Candidate

  def utterance(words, tags):
    return {"tokens": words.split(), "tags": tags.split()}

  support = [utterance("play jazz now", "O B-genre O"), utterance("play rock now", "O B-genre O"),
             utterance("hello there", "O O")]
  scripted = {"play jazz now": [Candidate(1, 2, "genre", 0.8), Candidate(2, 3, "genre", 0.5)],
              "play rock now": [Candidate(1, 2, "genre", 0.8), Candidate(0, 1, "genre", 0.5)],
              "hello there": []}
  retriever = _ScriptedRetriever(scripted)
  threshold = slots.support_threshold(retriever, support, (0.4, 0.6, 0.7, 0.95), slots._decoding(_config()))
  assert threshold == 0.7
  assert retriever.supports == [2, 2, 2]  # every utterance left out once, each time from the other two
  alone = _ScriptedRetriever(scripted)
  slots.support_threshold(alone, support[:1] + support[2:], (0.4, 0.6), slots._decoding(_config()))
  assert alone.supports == [1]  # leaving out the only labelled utterance leaves nothing to retrieve from


def test_support_thresholds_end_to_end_and_refused_with_learnt_supports(tiny_bert_dir, tmp_path):
  """``retriever.episode_threshold = "support"`` (``support_threshold_frz``): every test episode decoded at its
  own support's threshold (recorded), the export at test episode 0's; with learnt support sets it is refused."""
  from fewshot_nlu import config_checks
  from fewshot_nlu import main as main_lib
  from fewshot_nlu.methods.retriever import slots
  from fewshot_nlu.models.slot_filler import SlotFillerModel
  config = _toy_fold_config(tiny_bert_dir, tmp_path, fold=3, devices=1)
  config.retriever.train, config.retriever.episode_threshold = False, "support"
  main_lib.run(config, tmp_path / "run")
  fold = json.loads((tmp_path / "run" / "fold3" / "results.json").read_text())
  grid = config.retriever.thresholds
  assert fold["threshold"] in grid and "dev_f1" in fold
  assert min(grid) <= fold["test_thresholds"]["min"] <= fold["test_thresholds"]["median"] <= max(grid)
  export = SlotFillerModel.load(tmp_path / "run" / "fold3" / "export")
  assert export.threshold == fold["threshold"] and "leave-one-out" in export.notes["threshold"]
  lines = (tmp_path / "run" / "fold3" / "predictions.tsv").read_text().splitlines()
  assert len(lines) == 1 + 2 * 3 and [line.split("\t")[0] for line in lines[1:]] == ["0"] * 3 + ["1"] * 3
  config.retriever.support_steps = (0, 2)
  with pytest.raises(config_checks.ConfigError, match="'support' only with retrieval alone"):
    slots.validate(config)
