"""Encoders' forwards run by ONNX Runtime (``runtime="onnxruntime"``): inference on a CPU, faster than XLA's at
one or a few utterances.

At batch 1 the MiniLM forward is a chain of dense products over ~18 rows, and XLA's CPU dot reaches ~0.4 of this
CPU's matmul peak there (bench/results/latency_notes.md); ONNX Runtime's products (MLAS) and fused kernels run the
same model in ~0.6 of XLA's time at batch 1 and level at batch 64 (bench/results/latency.md). Training, sharding
and every other path stay JAX: this module only re-expresses a trained encoder as an ONNX graph, built here from
its params with ``onnx.helper`` (no torch), and runs it in an ``onnxruntime.InferenceSession``:
  * a ``SentenceEncoder``: its pooled vectors (pooling, projection and normalisation in the graph), what
    ``sentence.encode_batch`` returns;
  * a slot filler's ``SpanEncoder`` and QAID's model: the token states [B, L, H] the transformer returns
    (``span_retrieval.token_states`` / ``qaid.model.represent_batch`` take it from there).

The graph is the transformer written out op by op, the same equations as ``transformer`` (post-LayerNorm BERT /
RoBERTa / MPNet blocks, exact-erf GELU), with the parts that depend only on the padded batch's shape and mask
computed on the host and fed in:
  * ``position_ids`` [B, L]: ``transformer.position_ids`` (BERT: 0..L-1; RoBERTa / MPNet: counted over real
    tokens from the padding index);
  * ``attention_bias`` [B, 1 | heads, 1 | L, L]: float32's lowest value on padded keys (where XLA masks them out),
    plus MPNet's relative position bias [heads, L, L] (``transformer.bias_from_table``);
  * ``pool_weights`` [B, L] (pooled vectors only): mean pooling's 1 / (real tokens) on each real token, or CLS
    pooling's 1 on the first.
Bottleneck adapters (Multi-ConvFiT's C-ADAPT) are in the graph; max pooling and int8 params are not: such encoders
stay on XLA (``use_onnxruntime`` says so). Results equal XLA's to float32 rounding (tests/encoders/test_onnx_inference.py).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np

from fewshot_nlu import errors
from fewshot_nlu.encoders import RUNTIMES, quantize, transformer

OPSET = 17  # LayerNormalization
INSTALL = "pip install 'fewshot_nlu[onnxruntime]' (or: pip install onnx onnxruntime)"


def check_runtime(runtime: str | None) -> None:
  if runtime is not None and runtime not in RUNTIMES:
    raise ValueError(f"runtime={runtime!r}: known runtimes {RUNTIMES} (or None: XLA)")


def _onnx():
  try:
    import onnx
    import onnxruntime
  except ImportError as e:
    raise errors.MissingExtra(f"runtime='onnxruntime' needs the onnx and onnxruntime packages: {INSTALL}") from e
  return onnx, onnxruntime


def unsupported(encoder) -> str | None:
  """Why ``encoder`` (an object holding ``cfg`` and ``params``) cannot run on ONNX Runtime, or None when it can."""
  if not hasattr(encoder, "onnx"):
    return "not an encoder that runs on onnxruntime"
  if _pooled(encoder) and encoder.pooling_mode not in ("mean", "cls"):
    return f"its {encoder.pooling_mode} pooling"
  if quantize.is_int8(encoder.params):
    return "its int8 params (quantize='int8' runs on XLA)"
  return None


class _Graph:
  """Nodes and initializers of one ONNX graph, with unique names."""

  def __init__(self, helper, numpy_helper):
    self.helper, self.numpy_helper = helper, numpy_helper
    self.nodes, self.initializers, self._count = [], [], 0

  def name(self, stem: str) -> str:
    self._count += 1
    return f"{stem}_{self._count}"

  def const(self, value, stem: str = "c") -> str:
    name = self.name(stem)
    self.initializers.append(self.numpy_helper.from_array(np.ascontiguousarray(value), name))
    return name

  def op(self, op_type: str, *inputs: str, **attributes) -> str:
    out = self.name(op_type.lower())
    self.nodes.append(self.helper.make_node(op_type, list(inputs), [out], **attributes))
    return out

  def dense(self, x: str, params: dict) -> str:
    return self.op("Add", self.op("MatMul", x, self.const(np.asarray(params["kernel"], np.float32))),
                   self.const(np.asarray(params["bias"], np.float32)))

  def layer_norm(self, x: str, params: dict, eps: float) -> str:
    # read by a loop variable, not as params["scale"]: config_fields counts a literal chain ending in "scale" as
    # reading every config field so named (loss.scale), which would hide that field when a method ignores it
    scale, bias = (self.const(np.asarray(params[name], np.float32)) for name in ("scale", "bias"))
    return self.op("LayerNormalization", x, scale, bias, axis=-1, epsilon=eps)

  def activation(self, x: str, name: str) -> str:
    if name == "relu":
      return self.op("Relu", x)
    half = self.const(np.float32(0.5))
    if name == "gelu":  # 0.5 x (1 + erf(x / sqrt 2))
      inner = self.op("Erf", self.op("Mul", x, self.const(np.float32(1 / math.sqrt(2)))))
    else:  # gelu_new / gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
      cubic = self.op("Mul", self.op("Mul", self.op("Mul", x, x), x), self.const(np.float32(0.044715)))
      inner = self.op("Tanh", self.op("Mul", self.op("Add", x, cubic), self.const(np.float32(math.sqrt(2 / math.pi)))))
    return self.op("Mul", self.op("Mul", x, half), self.op("Add", inner, self.const(np.float32(1.0))))


def _pooled(encoder) -> bool:
  """Whether ``encoder`` returns pooled vectors (a ``SentenceEncoder``) rather than token states."""
  from fewshot_nlu.encoders.sentence import SentenceEncoder
  return isinstance(encoder, SentenceEncoder)


def encoder_graph(cfg: transformer.EncoderConfig, params: Any, *, pooling: str | None = None,
                  normalize: bool = False, projection: dict | None = None):
  """The ``onnx.ModelProto`` of the transformer with these params (module docstring): inputs ``input_ids`` [B, L]
  int64, ``position_ids`` [B, L] int64, ``attention_bias`` [B, h, q, L] float32; with ``pooling`` (``mean`` /
  ``cls``) also ``pool_weights`` [B, L] float32 and the output ``vectors`` [B, D] float32 of
  ``sentence.encode_batch`` (then ``projection`` and ``normalize``), else the output ``hidden`` [B, L, H]."""
  _onnx()
  from onnx import TensorProto, helper, numpy_helper
  if pooling not in (None, "mean", "cls"):  # the host's pool_weights express these two only
    raise ValueError(f"pooling={pooling!r}: the ONNX graph pools by the mean or the first token")
  params = jax.device_get(params)
  g = _Graph(helper, numpy_helper)
  hidden, heads = cfg.hidden_size, cfg.num_heads
  head_dim = hidden // heads
  embeddings = params["embeddings"]
  x = g.op("Add", g.op("Gather", g.const(np.asarray(embeddings["word_embeddings"]["embedding"], np.float32)),
                       "input_ids"),
           g.op("Gather", g.const(np.asarray(embeddings["position_embeddings"]["embedding"], np.float32)),
                "position_ids"))
  if cfg.type_vocab_size:  # token type 0 everywhere, as the encoder is applied
    x = g.op("Add", x, g.const(np.asarray(embeddings["token_type_embeddings"]["embedding"][0], np.float32)))
  x = g.layer_norm(x, embeddings["LayerNorm"], cfg.layer_norm_eps)
  split = g.const(np.array([0, 0, heads, head_dim], np.int64))
  joined = g.const(np.array([0, 0, hidden], np.int64))
  scale = g.const(np.float32(1 / math.sqrt(head_dim)))
  for i in range(cfg.num_layers):
    layer = params[f"layer_{i}"]
    attention = layer["attention"]
    heads_of = lambda name, perm: g.op("Transpose", g.op("Reshape", g.dense(x, attention[name]), split), perm=perm)
    q, k, v = heads_of("query", [0, 2, 1, 3]), heads_of("key", [0, 2, 3, 1]), heads_of("value", [0, 2, 1, 3])
    logits = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), "attention_bias")
    context = g.op("MatMul", g.op("Softmax", logits, axis=-1), v)
    context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), joined)
    x = g.layer_norm(g.op("Add", x, g.dense(context, attention["output"])), layer["attention_norm"],
                     cfg.layer_norm_eps)
    h = g.dense(g.activation(g.dense(x, layer["intermediate"]), cfg.hidden_act), layer["output"])
    if "adapter" in layer:  # LN(x + h + up(relu(down(LN(x + h))))), transformer.TransformerLayer
      residual = g.op("Add", x, h)
      adapter = layer["adapter"]
      bottleneck = g.dense(g.op("Relu", g.dense(g.layer_norm(residual, layer["output_norm"], cfg.layer_norm_eps),
                                                adapter["down"])), adapter["up"])
      h = g.op("Add", h, bottleneck)
    x = g.layer_norm(g.op("Add", x, h), layer["output_norm"], cfg.layer_norm_eps)
  inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "length"]),
            helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "length"]),
            helper.make_tensor_value_info("attention_bias", TensorProto.FLOAT, ["batch", "heads", "queries", "length"])]
  if pooling is None:
    g.nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    outputs = [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "length", hidden])]
    graph = helper.make_graph(g.nodes, "token_states", inputs, outputs, g.initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="fewshot_nlu")
  pooled = g.op("Squeeze", g.op("MatMul", g.op("Unsqueeze", "pool_weights", g.const(np.array([1], np.int64))), x),
                g.const(np.array([1], np.int64)))
  if projection is not None:
    pooled = g.op("Tanh", g.dense(pooled, jax.device_get(projection)))
  if normalize:  # x / max(||x||, 1e-12), pooling.l2_normalize
    norm = g.op("ReduceL2", pooled, axes=[-1], keepdims=1)
    pooled = g.op("Div", pooled, g.op("Max", norm, g.const(np.float32(1e-12))))
  g.nodes.append(helper.make_node("Identity", [pooled], ["vectors"]))
  dim = hidden if projection is None else int(np.shape(projection["kernel"])[1])
  inputs.append(helper.make_tensor_value_info("pool_weights", TensorProto.FLOAT, ["batch", "length"]))
  outputs = [helper.make_tensor_value_info("vectors", TensorProto.FLOAT, ["batch", dim])]
  graph = helper.make_graph(g.nodes, "sentence_encoder", inputs, outputs, g.initializers)
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="fewshot_nlu")


def position_ids(attention_mask: np.ndarray, cfg: transformer.EncoderConfig) -> np.ndarray:
  """``transformer.position_ids`` in numpy (no JAX dispatch on the host's hot path), int64."""
  if cfg.position_style == "roberta":
    mask = attention_mask.astype(np.int64)
    return np.cumsum(mask, axis=-1) * mask + cfg.pad_token_id
  return np.broadcast_to(np.arange(attention_mask.shape[-1], dtype=np.int64), attention_mask.shape).copy()


class OnnxForward:
  """``(input_ids, attention_mask) ->`` a padded batch's outputs through ONNX Runtime: a ``SentenceEncoder``'s
  [B, D] vectors (what ``sentence.encode_batch`` returns), or another encoder's [B, L, H] token states (what the
  transformer returns). Holds the session and, per padded length, MPNet's relative position bias."""

  def __init__(self, encoder, threads: int = 0, spin: bool = True):
    reason = unsupported(encoder)
    if reason:
      raise ValueError(f"this encoder cannot run on onnxruntime: {reason}")
    _, onnxruntime = _onnx()
    self.cfg = encoder.cfg
    self.pooling = encoder.pooling_mode if _pooled(encoder) else None
    self.output = "hidden" if self.pooling is None else "vectors"
    pooled = {} if self.pooling is None else {"pooling": self.pooling, "normalize": encoder.normalize,
                                              "projection": encoder.projection}
    model = encoder_graph(encoder.cfg, encoder.params, **pooled)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads  # 0: ONNX Runtime's default, one per physical core
    # Spinning (ONNX Runtime's default) keeps the worker threads polling between ops: the lowest latency on a CPU
    # the session has to itself (2.5 ms for the 16-word utterance here, 3.2-3.3 without), but 2-3x slower where
    # other work shares the cores (7-9 ms against 3.7-3.8 without), another session's threads included
    # (``use_onnxruntime``): bench/results/latency_notes.md.
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    self.session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                                providers=["CPUExecutionProvider"])
    self._table = (np.asarray(jax.device_get(encoder.params["relative_attention_bias"]["embedding"]), np.float32)
                   if self.cfg.relative_attention_num_buckets else None)
    self._relative: dict[int, np.ndarray] = {}

  def feeds(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> dict[str, np.ndarray]:
    """The graph's inputs for one padded batch (module docstring)."""
    mask = np.asarray(attention_mask)
    real = mask.astype(np.float32)
    bias = np.where(mask[:, None, None, :] == 0, np.finfo(np.float32).min, 0).astype(np.float32)
    length = mask.shape[1]
    if self._table is not None:
      if length not in self._relative:
        self._relative[length] = np.asarray(transformer.bias_from_table(self._table, length), np.float32)
      bias = bias + self._relative[length]
    feeds = {"input_ids": np.asarray(input_ids, np.int64), "position_ids": position_ids(mask, self.cfg),
             "attention_bias": bias}
    if self.pooling == "mean":
      feeds["pool_weights"] = real / np.maximum(real.sum(axis=1, keepdims=True), 1e-9)
    elif self.pooling == "cls":
      feeds["pool_weights"] = np.zeros_like(real)
      feeds["pool_weights"][:, 0] = 1.0
    return feeds

  def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    return self.session.run([self.output], self.feeds(input_ids, attention_mask))[0]


def use_onnxruntime(model: Any, threads: int = 0, spin: bool | None = None) -> list[str]:
  """Runs, from now on, every encoder ``model`` holds (a loaded model of any kind: ``quantize.encoders_held``) on
  ONNX Runtime, one session per distinct graph (``threads`` / ``spin``: ``OnnxForward``'s). ``spin=None``: the
  threads spin where the model has one session, not where it has several (a joint model's intent and slot
  encoders: two spinning pools on the same cores made its parse no faster than XLA's, 32 ms against 31, and 22
  without spinning; bench/results/latency_notes.md). Returns a line per encoder left on XLA, saying why (max
  pooling, int8 params); raises where none could be moved."""
  stayed, moved = [], []  # moved: (encoder, the key of the session it runs on)
  for obj in quantize.encoders_held(model):
    reason = unsupported(obj)
    if reason:
      stayed.append(f"{type(obj).__name__} stays on XLA ({reason})")
      continue
    moved.append((obj, (id(obj.params), id(obj.projection), obj.pooling_mode, obj.normalize) if _pooled(obj)
                  else (id(obj.params),)))
  if not moved:
    raise ValueError(f"runtime='onnxruntime': no encoder of this {type(model).__name__} can run there: "
                     + "; ".join(stayed or ["it holds no encoder"]))
  sessions = {}
  spin = len({key for _, key in moved}) == 1 if spin is None else spin
  for obj, key in moved:
    if key not in sessions:
      sessions[key] = OnnxForward(obj, threads, spin)
    obj.onnx = sessions[key]
  return stayed

