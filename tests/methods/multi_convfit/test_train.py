"""Multi-ConvFiT end to end on a toy multi-label folder with the tiny BERT (adapters, full fine-tuning, no
Stage 2), its config errors, and the NLU++ / MixATIS regimes."""

import json

import numpy as np
import pytest

from configs import multi_convfit_base
from fewshot_nlu import main, predict
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.methods.multi_convfit import train as multi_convfit
from fewshot_nlu.methods.multi_convfit.model import MultiLabelModel
from tests import report_checks

TOY = {
    "train": [("i want to transfer money", "transfer"), ("transfer money to my savings account", "transfer"),
              ("cancel my order", "cancel"), ("cancel my order and reset my pin", "cancel#pin"),
              ("how do i reset my pin", "pin"), ("reset my pin please", "pin"),
              ("transfer money and cancel my order", "transfer#cancel"), ("is there a fee for top ups", "fee"),
              ("is there a fee to transfer money", "fee#transfer"), ("my card has not arrived yet", "card"),
              ("my card has not arrived yet cancel my order", "card#cancel"), ("a fee for top ups", "fee")],
    "test": [("transfer money please", "transfer"), ("cancel my order", "cancel"),
             ("reset my pin and cancel my order", "pin#cancel"), ("is there a fee", "fee"),
             ("my card has not arrived", "card")],
}


@pytest.fixture
def toy_multilabel(tmp_path):
  return write_toy_multilabel(tmp_path / "MULTI")


def write_toy_multilabel(root):
  """``TOY`` as a joint-NLU folder (seq.in, all-O seq.out, '#'-joined labels per split) at ``root``."""
  for split, rows in TOY.items():
    (root / split).mkdir(parents=True)
    (root / split / "seq.in").write_text("".join(t + "\n" for t, _ in rows))
    (root / split / "seq.out").write_text("".join(" ".join("O" for _ in t.split()) + "\n" for t, _ in rows))
    (root / split / "label").write_text("".join(l + "\n" for _, l in rows))
  return root


def _config(data, model, mode, **overrides):
  config = multi_convfit_base.get_config("joint_nlu_folder", "", f"low,{mode}")
  config.data.raw_dir = str(data)
  config.data.tfds_dir = str(data.parent / "tfds")
  config.data.train_split, config.data.eval_split = "train", "test"
  config.model.name = str(model)
  config.model.max_length = 32
  config.train.batch_size = 8
  config.train.epochs = 2
  config.train.log_every = 1
  config.compilation_cache_dir = ""
  config.stage2.length_groups = 1
  config.stage2.fast_epochs_factor = 1
  config.classifier.mlp.epochs = 20
  config.classifier.calibration_folds = 3
  for key, value in overrides.items():
    target = config
    *parents, leaf = key.split(".")
    for p in parents:
      target = target[p]
    target[leaf] = value
  return config


@pytest.mark.parametrize("mode,overrides", [
    ("adapter", {}),
    ("adapter", {"stage2.loss": "smax"}),  # SMAX's W trains beside the adapters
    ("fft", {"stage2.sampling": "paper", "classifier.calibrate": True}),
    ("none", {}),
])
def test_multi_convfit_end_to_end(tmp_path, tiny_bert_dir, toy_multilabel, mode, overrides):
  config = _config(toy_multilabel, tiny_bert_dir, mode, **overrides)
  results = main.run(config, tmp_path / "run")
  assert results["num_train"] == 12 and results["num_eval"] == 5 and results["num_labels"] == 5
  rows = (tmp_path / "run" / "predictions.tsv").read_text().splitlines()
  assert rows[0].startswith("text\tgold\tpredicted\texact") and len(rows) == 6
  # The reported metrics are those of the predictions file: micro P / R / F1 over (example, intent) decisions.
  pairs = [[set(filter(None, c.split("+"))) for c in r.split("\t")[1:3]] for r in rows[1:]]
  tp = sum(len(g & p) for g, p in pairs)
  n_predicted, n_gold = sum(len(p) for _, p in pairs), sum(len(g) for g, _ in pairs)
  precision, recall = (tp / n_predicted if n_predicted else 0.0), tp / n_gold
  assert results["precision"] == pytest.approx(precision) and results["recall"] == pytest.approx(recall)
  assert results["f1"] == pytest.approx(2 * tp / (n_predicted + n_gold))
  assert [r.split("\t")[3] for r in rows[1:]] == [str(g == p) for g, p in pairs]
  assert results["exact_match"] == results["accuracy"] == pytest.approx(sum(g == p for g, p in pairs) / 5)
  report = report_checks.assert_report_matches_predictions(tmp_path / "run", multilabel=True)
  assert ("specialised encoder" in report) == (mode != "none")
  export = tmp_path / "run" / "export"
  meta = json.loads((export / "multilabel_model.json").read_text())
  texts = [t for t, _ in TOY["test"]]
  if mode == "adapter":
    assert results["base_unchanged"] is True and results["adapter_bytes"] > 0
    assert (export / "adapter" / "adapter.safetensors").exists() and not (export / "model.safetensors").exists()
    base = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
    loaded = MultiLabelModel.load(export, base=base)
    assert loaded.encoder.params["embeddings"]["word_embeddings"]["embedding"] is \
        base.params["embeddings"]["word_embeddings"]["embedding"]
    assert not np.allclose(loaded.encoder.encode(texts), base.encode(texts), atol=1e-6)  # the adapter trained
  else:
    assert (export / "model.safetensors").exists() and results["adapter_bytes"] == 0
    loaded = MultiLabelModel.load(export)
  assert meta["labels"] == ["cancel", "card", "fee", "pin", "transfer"]
  if overrides.get("classifier.calibrate"):
    assert len(meta["thresholds"]) == 5
  predicted = [p.labels for p in loaded.predict(texts)]
  written = [tuple(filter(None, r.split("\t")[2].split("+"))) for r in rows[1:]]
  assert predicted == written
  # the predict CLI answers from the export (an adapter export goes on its recorded base model)
  assert predict.main(["--model", str(export), "--output", str(tmp_path / "p.jsonl"), *texts]) == 0
  assert [tuple(json.loads(l)["labels"]) for l in (tmp_path / "p.jsonl").read_text().splitlines()] == written


@pytest.mark.parametrize("field,value,message", [
    ("stage2.mode", "lora", "config.stage2.mode: 'lora' is not one of"),
    ("data.regime", "medium", "config.data.regime: 'medium' is not one of"),
    ("data.eval_split", "", "config.data.train_split / eval_split: set both"),
    ("classifier.threshold", 1.5, "config.classifier.threshold"),
])
def test_config_errors_name_the_field(tmp_path, tiny_bert_dir, toy_multilabel, field, value, message):
  config = _config(toy_multilabel, tiny_bert_dir, "fft", **{field: value})
  if field == "data.regime":
    config.data.builder, config.data.builder_config = "nlupp", "banking"
    config.data.raw_dir, config.data.train_split, config.data.eval_split = "", "", ""
  with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
    multi_convfit.validate(config)


def test_nlupp_protocol_and_mixatis_regimes():
  config = multi_convfit_base.get_config("nlupp", "banking", "low,adapter")
  config.data.fold = 3
  train, test = multi_convfit.resolve_splits(config)
  assert train == ["fold6", "fold7"] and len(test) == 18 and "fold6" not in test
  config.data.regime = "high"
  train, test = multi_convfit.resolve_splits(config)
  assert test == ["fold6", "fold7"] and len(train) == 18
  assert config.train.learning_rate == 2e-3 and config.stage2.mode == "adapter"
  mix = multi_convfit_base.get_config("mixatis", "", "high")
  assert multi_convfit.resolve_splits(mix) == (["train"], ["test"]) and mix.train.epochs == 3
  with pytest.raises(ValueError, match="unknown"):
    multi_convfit_base.get_config("mixatis", "", "huge")
