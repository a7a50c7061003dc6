"""The slot filler export (``models.slot_filler``) answers from another support set."""

import json

import pytest

from fewshot_nlu.encoders import pretrained
from fewshot_nlu.models.span_retrieval import SlotRetriever, SpanEncoder


def test_an_exported_slot_filler_answers_from_another_support_set(tiny_bert_dir, tmp_path):
  from fewshot_nlu.models.slot_filler import SlotFillerModel
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  support = [{"tokens": "set an alarm for seven am".split(), "tags": "O O O O B-time I-time".split()}]
  export = SlotFillerModel(SlotRetriever(encoder, max_words=3), support, threshold=0.9).save(tmp_path / "export")
  other = tmp_path / "other.jsonl"
  other.write_text(json.dumps({"tokens": "play some jazz".split(), "tags": "O O B-genre".split()}) + "\n")
  loaded = SlotFillerModel.load(export, support=other)
  assert loaded.labels == ["genre"] and loaded.retriever.similarity == "cosine"
  [prediction] = loaded.predict(["play some jazz"])
  assert [(s.text, s.label) for s in prediction.slots if s.label == "genre"] == [("jazz", "genre")]
  assert SlotFillerModel.load(export).labels == ["time"]  # the export itself is untouched
  with pytest.raises(ValueError, match="the support set is empty"):
    loaded.replace_support([])
