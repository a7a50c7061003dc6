"""``save_rows`` writes an export's grown examples atomically: a failure (or a kill) part-way leaves the old
export loadable and unchanged. (A kill -9 during a live server's persist: test_serve.)"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fewshot_nlu import models, workdirs
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.index import Index
from fewshot_nlu.models import protocol
from fewshot_nlu.models.intent_model import IntentModel
from tests import tiny

TEXTS = tiny.CORPUS[:4]
LABELS = ["bank", "weather", "food", "music"]


@pytest.fixture(scope="module")
def export(tiny_bert_dir, tmp_path_factory):
  encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
  return IntentModel.from_examples(encoder, TEXTS, LABELS).save(tmp_path_factory.mktemp("m") / "export")


def test_replace_file_and_write_jsonl_leave_the_old_file_on_failure(tmp_path):
  path = tmp_path / "rows.jsonl"
  protocol.write_jsonl(path, [{"a": 1}])
  with pytest.raises(TypeError):
    protocol.write_jsonl(path, [{"a": 2}, {"b": object()}])  # fails on the second row
  assert protocol.read_jsonl(path) == [{"a": 1}]
  assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]  # no temporary file left behind
  workdirs.replace_file(path, "new\n")
  assert path.read_text() == "new\n"


def test_intent_model_save_rows_switches_index_folders_atomically(export, monkeypatch):
  model = models.load(export)
  model.add_examples([tiny.CORPUS[6]], ["alarm"])
  model.save_rows(export)
  meta = json.loads((export / "intent_model.json").read_text())
  assert meta["index"] == "index.1" and not (export / "index").exists() and meta["labels"][-1] == "alarm"
  grown = models.load(export)
  assert len(grown) == 5 and grown.predict([tiny.CORPUS[6]])[0].label == "alarm"

  grown.add_examples([tiny.CORPUS[7]], ["cancel"])
  real_save = Index.save

  def dies_half_way(self, directory):
    np.save(directory / "vectors.npy", self.vectors)  # the first file of the new index, then the "kill"
    raise KeyboardInterrupt

  monkeypatch.setattr(Index, "save", dies_half_way)
  with pytest.raises(KeyboardInterrupt):
    grown.save_rows(export)
  old = models.load(export)
  assert len(old) == 5 and old.labels == grown.labels[:-1]
  assert json.loads((export / "intent_model.json").read_text())["index"] == "index.1"

  (export / "index.2").mkdir()  # as if killed after the new folder was in place but before the switch
  monkeypatch.setattr(Index, "save", real_save)
  grown.save_rows(export)
  assert sorted(p.name for p in export.iterdir() if p.name.startswith(("index", ".index"))) == ["index.2"]
  assert len(models.load(export)) == 6


def test_a_bad_index_name_in_the_metadata_is_refused(export, tmp_path):
  meta_path = export / "intent_model.json"
  meta = json.loads(meta_path.read_text())
  meta_path.write_text(json.dumps({**meta, "index": "../elsewhere"}))
  try:
    with pytest.raises(ValueError, match="is no index folder of an export"):
      models.load(export)
  finally:
    meta_path.write_text(json.dumps(meta))
