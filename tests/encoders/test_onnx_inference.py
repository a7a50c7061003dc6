"""ONNX Runtime inference (``encoders.onnx_inference``): the graph built from the params encodes as XLA does (BERT,
RoBERTa, MPNet; mean / CLS pooling; with and without the projection and normalisation; both GELUs; adapters), and against
the float64 numpy model; a slot filler's span states and QAID's token matrices are XLA's; a loaded model runs on
it, predicts as on XLA, takes examples; what cannot run there says why."""

import dataclasses
import json
import sys

import numpy as np
import pytest
import safetensors.numpy

from fewshot_nlu import errors, models
from fewshot_nlu.encoders import onnx_inference, pretrained, projection, transformer
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.methods.qaid.model import QAIDModel
from fewshot_nlu.models.intent_model import IntentModel
from fewshot_nlu.models.span_retrieval import SpanEncoder
from tests import tiny

pytest.importorskip("onnxruntime")

# float32 in two runtimes: the same products summed in another order
TOLERANCE = {"rtol": 1e-4, "atol": 2e-5}


TEXTS = tiny.CORPUS[:5]  # several lengths; with batch_size 4, a last batch of one


def _both(encoder: SentenceEncoder, texts=TEXTS) -> tuple[np.ndarray, np.ndarray]:
  """(XLA's vectors, ONNX Runtime's) of ``texts``."""
  xla = encoder.encode(texts)
  encoder.onnx = onnx_inference.OnnxForward(encoder)
  try:
    return xla, encoder.encode(texts)
  finally:
    encoder.onnx = None


@pytest.mark.parametrize("kind, pooling, normalize, projected", [
    ("bert", "mean", True, False), ("roberta", "cls", False, True), ("mpnet", "mean", False, True),
    ("mpnet", "cls", True, False)])
def test_the_graph_encodes_as_xla(kind, pooling, normalize, projected, tiny_bert_dir, tiny_roberta_dir,
                                  tiny_mpnet_dir):
  directory = {"bert": tiny_bert_dir, "roberta": tiny_roberta_dir, "mpnet": tiny_mpnet_dir}[kind]
  head = projection.init(__import__("jax").random.key(3), tiny.HIDDEN, 24) if projected else None
  encoder = SentenceEncoder.from_pretrained(str(directory), max_length=32, batch_size=4, pooling_mode=pooling,
                                            normalize=normalize, projection=head)
  xla, onnx = _both(encoder)
  assert onnx.shape == xla.shape == (len(TEXTS), 24 if projected else tiny.HIDDEN)
  np.testing.assert_allclose(onnx, xla, **TOLERANCE)


@pytest.mark.parametrize("activation", ["gelu_new", "relu"])
def test_the_other_activations_encode_as_xla(activation, tiny_bert_dir):
  loaded = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
  encoder = SentenceEncoder(dataclasses.replace(loaded.cfg, hidden_act=activation), loaded.params, loaded.tokenizer,
                            max_length=32, batch_size=4)
  xla, onnx = _both(encoder)
  np.testing.assert_allclose(onnx, xla, **TOLERANCE)
  # the activation mattered: exact GELU's vectors are 10x farther than the two runtimes are from each other
  assert np.abs(xla - loaded.encode(TEXTS)).max() > 10 * np.abs(onnx - xla).max()


def test_an_encoder_with_adapters_encodes_as_xla(tiny_bert_dir):
  loaded = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32, batch_size=4)
  params = transformer.init_params(loaded.cfg, __import__("jax").random.key(2), adapter_size=4)
  adapter = {name: {"adapter": __import__("jax").tree.map(lambda w: 50 * w, layer["adapter"])}
             for name, layer in params.items() if name.startswith("layer_")}  # large enough to matter
  encoder = loaded.with_adapter(adapter)
  xla, onnx = _both(encoder)
  np.testing.assert_allclose(onnx, xla, **TOLERANCE)
  assert np.abs(xla - loaded.encode(TEXTS)).max() > 10 * np.abs(onnx - xla).max()  # the adapters mattered


@pytest.mark.parametrize("kind", ["bert", "mpnet"])
def test_the_graph_is_the_numpy_model_pooled(kind, tiny_bert_dir, tiny_mpnet_dir):
  directory = {"bert": tiny_bert_dir, "mpnet": tiny_mpnet_dir}[kind]
  encoder = SentenceEncoder.from_pretrained(str(directory), max_length=32, normalize=False)
  forward = onnx_inference.OnnxForward(encoder)
  ids = encoder.tokenizer.encode(tiny.CORPUS[:4], 32)
  length = max(map(len, ids))
  input_ids = np.full((4, length), encoder.tokenizer.pad_id, np.int64)
  mask = np.zeros((4, length), np.int64)
  for i, row in enumerate(ids):
    input_ids[i, : len(row)], mask[i, : len(row)] = row, 1
  hidden = tiny.reference_forward(safetensors.numpy.load_file(str(directory / "model.safetensors")),
                                  json.loads((directory / "config.json").read_text()), input_ids, mask)
  expected = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
  np.testing.assert_allclose(forward(input_ids, mask), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("style", ["bert", "roberta"])
def test_the_host_position_ids_are_the_encoders(style, tiny_bert_dir):
  cfg = dataclasses.replace(SentenceEncoder.from_pretrained(str(tiny_bert_dir)).cfg, position_style=style,
                            pad_token_id=1 if style == "roberta" else 0)
  mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], np.int32)
  np.testing.assert_array_equal(onnx_inference.position_ids(mask, cfg), np.asarray(transformer.position_ids(mask, cfg)))


@pytest.mark.parametrize("with_metric", [False, True])
def test_span_states_on_onnxruntime_are_xlas(with_metric, tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=32, batch_size=4)
  if with_metric:  # the uncached path projects the states through the metric's halves
    width = 2 * tiny.HIDDEN
    encoder = encoder.with_metric(np.random.default_rng(0).normal(size=(width, width)).astype(np.float32))
  words = [text.split() for text in TEXTS]
  spans = [[(0, 1), (1, len(w))] for w in words]
  xla = encoder.encode(words, spans, cache=False)
  assert onnx_inference.use_onnxruntime(encoder) == [] and encoder.onnx is not None
  for a, b in zip(xla, encoder.encode(words, spans, cache=False)):
    np.testing.assert_allclose(b, a, **TOLERANCE)


@pytest.mark.parametrize("similarity", ["late_interaction", "cosine"])
def test_qaid_token_matrices_on_onnxruntime_are_xlas(similarity, tiny_bert_dir):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  head = projection.init(__import__("jax").random.key(1), tiny.HIDDEN, 16)
  qaid = QAIDModel(model.config, model.params, model.tokenizer, head, batch_size=4, similarity=similarity)
  xla = qaid.represent(TEXTS, 32)
  onnx_inference.use_onnxruntime(qaid)
  onnx = qaid.represent(TEXTS, 32)
  np.testing.assert_array_equal(onnx[1], xla[1])
  np.testing.assert_allclose(onnx[0], xla[0], **TOLERANCE)


def test_a_loaded_model_predicts_on_onnxruntime_as_on_xla(tiny_bert_dir, tmp_path):
  encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32, batch_size=4)
  labels = ["bank", "weather", "food", "music", "bank", "bank"]
  IntentModel.from_examples(encoder, tiny.CORPUS[:6], labels).save(tmp_path / "export")
  on_xla = models.load(tmp_path / "export")
  on_onnx = models.load(tmp_path / "export", runtime="onnxruntime")
  assert isinstance(on_onnx.encoder.onnx, onnx_inference.OnnxForward) and on_xla.encoder.onnx is None
  a, b = on_xla.predict(tiny.CORPUS), on_onnx.predict(tiny.CORPUS)
  assert [p.label for p in a] == [p.label for p in b]
  np.testing.assert_allclose([p.score for p in b], [p.score for p in a], **TOLERANCE)
  on_onnx.add_examples([tiny.CORPUS[6]], ["alarm"])  # live additions are encoded on onnxruntime
  assert on_onnx.predict([tiny.CORPUS[6]])[0].label == "alarm"
  with pytest.raises(ValueError, match="choose one"):
    models.load(tmp_path / "export", quantize="int8", runtime="onnxruntime")
  with pytest.raises(ValueError, match="known runtimes"):
    models.load(tmp_path / "export", runtime="tensorrt")


def test_without_the_packages_the_error_names_the_extra(tiny_bert_dir, monkeypatch):
  monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed
  encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
  with pytest.raises(errors.MissingExtra, match=r"pip install 'fewshot_nlu\[onnxruntime\]'") as raised:
    onnx_inference.use_onnxruntime(encoder)
  assert errors.one_line(raised.value).startswith("error: runtime='onnxruntime' needs")


def test_what_cannot_run_there_stays_on_xla_and_says_why(tiny_bert_dir):
  encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32)
  by_max = SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32, pooling_mode="max")

  class Holder:  # stands for a model holding two encoders
    pass

  Holder.__module__ = "fewshot_nlu.tests"
  holder = Holder()
  holder.parts = [encoder, by_max, encoder.with_max_length(16)]
  assert onnx_inference.use_onnxruntime(holder) == ["SentenceEncoder stays on XLA (its max pooling)"]
  assert by_max.onnx is None and encoder.onnx is holder.parts[2].onnx is not None  # one session, shared
  assert encoder.with_adapter(None).onnx is None  # other params: back on XLA
  spinning = lambda e: e.onnx.session.get_session_options().get_session_config_entry(  # noqa: E731
      "session.intra_op.allow_spinning")
  assert spinning(encoder) == "1"  # the model's one session: its threads spin between ops
  two = Holder()
  two.parts = [SentenceEncoder.from_pretrained(str(tiny_bert_dir), max_length=32) for _ in range(2)]
  assert onnx_inference.use_onnxruntime(two) == [] and two.parts[0].onnx is not two.parts[1].onnx
  assert spinning(two.parts[0]) == spinning(two.parts[1]) == "0"  # two sessions' threads would fight for the cores
  only_max = Holder()
  only_max.encoder = by_max
  with pytest.raises(ValueError, match="no encoder of this Holder can run there: SentenceEncoder stays on XLA"):
    onnx_inference.use_onnxruntime(only_max)
