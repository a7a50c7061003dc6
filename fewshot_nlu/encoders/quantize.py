"""int8 weights for inference: the encoder's dense layers as 8-bit integer products (``quantize="int8"``).

At batch 1 a MiniLM forward is bound by reading its weights (10.6M parameters in the layers, 42 MB in float32,
more than this CPU's 32 MB L3: bench/results/latency_notes.md), not by arithmetic. Stored as int8 they are a
quarter of that. The scheme is vector-wise absmax quantisation (LLM.int8(), Dettmers et al., 2022, §3.1,
without its outlier decomposition; the dynamic int8 quantisation PyTorch and ONNX Runtime apply to BERT-family
encoders on CPU):

  * each dense kernel ``W`` [in, out] keeps ``W_int8 = round(W / s_w)`` with one scale per output column,
    ``s_w = max_i |W[i, :]| / 127`` (computed once, when a model is loaded with ``quantize="int8"``);
  * each row ``x`` (a token's activations) is quantised when the layer runs, ``s_x = max |x| / 127``,
    ``x_int8 = round(x / s_x)``;
  * ``y = (x_int8 @ W_int8) * s_x * s_w + b``, the product accumulated in int32 (at most 127^2 x 4,096 for a
    layer 4,096 wide: far below 2^31).

Only the six products of each layer (attention query / key / value / output, feed-forward in / out) are
quantised; embeddings, LayerNorms, biases, attention probabilities, adapters and heads stay float32. The encoder
(``transformer.encoder_for``) recognises quantised params by their ``kernel_int8`` leaves. Quantised params are
for inference: they are not saved (``pretrained.save_pretrained`` refuses them) nor trained.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fewshot_nlu.encoders import QUANTIZATIONS

INT8_MAX = 127
# The dense layers of ``transformer.TransformerLayer`` that run as int8 products, as paths inside ``layer_<i>``.
QUANTIZED_DENSES = (("attention", "query"), ("attention", "key"), ("attention", "value"), ("attention", "output"),
                    ("intermediate",), ("output",))


def check_quantization(quantize: str | None) -> None:
  if quantize is not None and quantize not in QUANTIZATIONS:
    raise ValueError(f"quantize={quantize!r}: known quantizations {QUANTIZATIONS} (or None for float32)")


def quantize_kernel(kernel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """``(W_int8 [in, out], s_w [out])`` of a float kernel, one absmax scale per output column (a zero column
  gets scale 1 and zeros)."""
  kernel = np.asarray(kernel, np.float32)
  scale = np.abs(kernel).max(axis=0) / INT8_MAX
  scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
  return np.clip(np.rint(kernel / scale), -INT8_MAX, INT8_MAX).astype(np.int8), scale


def int8_matmul(x: jax.Array, kernel_int8: jax.Array, kernel_scale: jax.Array) -> jax.Array:
  """``x @ W`` (no bias) from the int8 kernel: rows of ``x`` [..., in] quantised by their own absmax, the product
  accumulated in int32 and scaled back to float32 [..., out] (the module docstring's scheme)."""
  x = x.astype(jnp.float32)
  row_scale = jnp.max(jnp.abs(x), axis=-1, keepdims=True) / INT8_MAX
  row_scale = jnp.where(row_scale > 0, row_scale, 1.0)
  x_int8 = jnp.clip(jnp.round(x / row_scale), -INT8_MAX, INT8_MAX).astype(jnp.int8)
  product = jax.lax.dot_general(x_int8, kernel_int8, (((x.ndim - 1,), (0,)), ((), ())),
                                preferred_element_type=jnp.int32)
  return product.astype(jnp.float32) * row_scale * kernel_scale


def is_int8(params: Any) -> bool:
  """Whether ``params`` (an encoder's) hold int8 dense kernels."""
  try:
    return "kernel_int8" in params["layer_0"]["attention"]["query"]
  except (KeyError, TypeError):
    return False


def int8_params(params: Any) -> dict:
  """``params`` with every layer's six dense kernels (``QUANTIZED_DENSES``) as ``kernel_int8`` + ``kernel_scale``;
  everything else is the same arrays (not copied). Already quantised params are returned as they are."""
  if is_int8(params):
    return params
  params = dict(params)
  layers = sorted(name for name in params if name.startswith("layer_"))
  if not layers:
    raise ValueError("no layer_<i> in these params: not a transformer encoder's params")
  for name in layers:
    layer = params[name] = _copy_dicts(params[name])
    for path in QUANTIZED_DENSES:
      dense = layer
      for key in path:
        dense = dense[key]
      kernel_int8, kernel_scale = quantize_kernel(jax.device_get(dense.pop("kernel")))
      dense["kernel_int8"], dense["kernel_scale"] = kernel_int8, kernel_scale
  return params


def _copy_dicts(tree: Any) -> Any:
  return {k: _copy_dicts(v) for k, v in tree.items()} if isinstance(tree, dict) else tree


def encoders_held(model: Any):
  """Every encoder object ``model`` holds (a loaded model of any kind: an intent model's sentence encoder, QAID's,
  a slot filler's span encoder, both parts of a joint NLU model), each once: fewshot_nlu objects with an encoder
  config ``cfg`` and ``params``, found through attributes, dicts, lists and tuples."""
  from fewshot_nlu.encoders import transformer
  seen: set[int] = set()

  def visit(obj: Any):
    if isinstance(obj, dict):
      for value in obj.values():
        yield from visit(value)
      return
    if isinstance(obj, (list, tuple)):
      for value in obj:
        yield from visit(value)
      return
    if id(obj) in seen or not type(obj).__module__.startswith("fewshot_nlu") or not hasattr(obj, "__dict__"):
      return
    seen.add(id(obj))
    if isinstance(getattr(obj, "cfg", None), transformer.EncoderConfig) and isinstance(getattr(obj, "params", None),
                                                                                       dict):
      yield obj
    for value in list(vars(obj).values()):
      yield from visit(value)

  yield from visit(model)


def quantize_encoders(model: Any, quantize: str | None) -> int:
  """Quantises, in place, the params of every encoder ``model`` holds (``encoders_held``). Encoders sharing one
  params tree keep sharing its quantised copy. Returns how many encoder objects changed; ``quantize=None``
  changes nothing."""
  check_quantization(quantize)
  if quantize is None:
    return 0
  quantised: dict[int, Any] = {}
  changed = 0
  for obj in list(encoders_held(model)):
    key = id(obj.params)
    if key not in quantised:
      quantised[key] = jax.device_put(int8_params(obj.params))
    obj.params = quantised[key]
    changed += 1
  if not changed:
    raise ValueError(f"quantize={quantize!r}: found no encoder in this {type(model).__name__}")
  return changed
