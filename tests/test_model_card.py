"""Model cards (README.md) of exports: from the export alone when a model is saved, and with the run's method,
data, results and command once a training run finishes."""

import json

from fewshot_nlu import model_card
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.methods import METHODS
from fewshot_nlu.models.intent_model import IntentModel
from tests import tiny

from configs import intent_mneg as baseline_config


def _saved_intent_model(tiny_bert_dir, directory):
  encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=16)
  model = IntentModel.from_examples(encoder, tiny.CORPUS[:4], ["bank", "weather", "food", "music"])
  return model.save(directory)


def test_saved_model_has_a_card_from_the_export_alone(tiny_bert_dir, tmp_path):
  export = _saved_intent_model(tiny_bert_dir, tmp_path / "export")
  card = (export / "README.md").read_text()
  assert card.startswith("# Intent classifier\n")
  assert "**Model kind:** `intent_model`" in card
  assert "no training run is recorded" in card
  assert f"models.load({str(export)!r})" in card and "python -m fewshot_nlu.predict --model" in card
  first = " ".join(tiny.CORPUS[0].split())  # the card's example is the model's own first example, not a bank's
  assert f"print(model.predict([{json.dumps(first)}]))" in card and "I lost my card" not in card.split("## Use it in")[0]
  assert f"SentenceTransformer({str(export)!r})" in card  # it holds modules.json
  assert "- `modules.json`" in card and "- `index/`" in card and "README.md`" not in card


def test_run_card_has_method_data_results_and_command(tiny_bert_dir, tmp_path):
  export = _saved_intent_model(tiny_bert_dir, tmp_path / "run" / "export")
  results = {"accuracy": 0.8125, "steps": 4, "method": "convfit", "timings": {"train_seconds": 1.5},
             "dev_curve": [{"step": 1}]}
  (tmp_path / "run" / "results.json").write_text(json.dumps(results))
  config = baseline_config.get_config()
  config.method, config.model.name = "convfit", "minilm-l6"
  config.data.builder, config.data.train_split, config.data.eval_split = "banking77", "train_10", "test"
  command = "python -m fewshot_nlu.main --config=configs/convfit_banking77.py:10 --workdir=runs/x"
  paper = METHODS["convfit"].paper  # the runner passes the method record's paper (model_card imports no method)
  assert model_card.write_run_cards(tmp_path / "run", config=config, command=command, paper=paper) == [export]
  card = (export / "README.md").read_text()
  assert card.startswith("# Intent classifier (convfit)\n")
  assert "ConvFiT Stage 2 (Vulić et al., 2021" in card
  assert "**Base model:** `minilm-l6`." in card
  assert "**Data:** `banking77`, trained on `train_10`, evaluated on `test`." in card
  assert "| accuracy | 0.8125 |" in card and "| steps | 4 |" in card and "| timings.train_seconds | 1.5 |" in card
  assert "| method |" not in card and "dev_curve" not in card  # shown elsewhere / not a scalar
  assert f"```bash\n{command}\n```" in card


def test_encoder_export_without_module_files_says_why_not(tiny_bert_dir, tmp_path):
  fold = tmp_path / "run" / "fold0" / "export"
  fold.mkdir(parents=True)
  (fold / "slot_filler.json").write_text(json.dumps({"kind": "slot_filler"}))
  (tmp_path / "run" / "fold0" / "results.json").write_text(json.dumps({"f1": 61.3}))
  config = baseline_config.get_config()
  config.method = "retriever"
  model_card.write_run_cards(tmp_path / "run", config=config, results={"average_f1": 60.0})
  card = (fold / "README.md").read_text()
  assert "# Slot filler (retriever)" in card and "| f1 | 61.3 |" in card and "average_f1" not in card
  assert "Not applicable: the slot filler retrieves span vectors" in card
  assert "fewshot_nlu.main.run" in card  # no command: run from Python


def test_card_names_a_folder_being_written_atomically_by_its_final_name(tiny_bert_dir, tmp_path):
  from fewshot_nlu import workdirs
  with workdirs.atomic_folder(tmp_path / "export") as partial:
    _saved_intent_model(tiny_bert_dir, partial)
  card = (tmp_path / "export" / "README.md").read_text()
  assert "models.load('export')" in card and ".partial" not in card
