"""models/registry.py: any export loads by its kind, and loading one stays light."""

from __future__ import annotations


# --------------------------------------------------------------------------- loading stays light

def test_loading_and_using_an_export_never_imports_tensorflow_datasets(tiny_bert_dir, tmp_path):
  """A served or loaded model reads its own folder: TFDS (and TensorFlow under it) belong to training runs.
  Checked in a fresh process, for an intent model and a slot filler with unlabelled spans (saved and loaded
  with its none margin)."""
  import subprocess
  import sys
  from fewshot_nlu.encoders import pretrained
  from fewshot_nlu.encoders.sentence import SentenceEncoder
  from fewshot_nlu.models.intent_model import IntentModel
  from fewshot_nlu.models.slot_filler import SlotFillerModel
  from fewshot_nlu.models.span_retrieval import SlotRetriever, SpanEncoder

  intents = IntentModel.from_examples(SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=16),
                                      ["hi", "hello", "bye", "see you"], ["greet", "greet", "bye", "bye"])
  intents.save(tmp_path / "intents")
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  spans = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  support = [{"tokens": "set an alarm for seven am".split(), "tags": "O O O O B-time I-time".split()}]
  SlotFillerModel(SlotRetriever(spans, max_words=3, none_margin=0.05), support, threshold=0.5).save(tmp_path / "slots")
  script = f"""
import sys
import fewshot_nlu as fn
for name in ("intents", "slots"):
  model = fn.load({str(tmp_path)!r} + "/" + name)
  model.predict(["set an alarm for nine"])
slots = fn.load({str(tmp_path)!r} + "/slots")
assert slots.retriever.none_margin == 0.05 and slots.retriever.none_index is not None, slots.retriever.none_margin
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow_datasets", "tensorflow"))
print("LOADED", loaded)
"""
  out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  assert "LOADED []" in out.stdout, out.stdout
