"""Export kinds (``model_kinds.KINDS``) -> model classes, resolved lazily: ``load(directory)`` reads any exported model.

Every model records its ``kind`` in its metadata JSON. An export is recognised by that file's name (each kind
has its own), and the ``kind`` inside decides the class; exports written before kinds were recorded are
read by the file name alone. The classes are imported only when an export of their kind is loaded, so the
core never imports a method's package at import time.
"""

from __future__ import annotations

import importlib
import logging
import pathlib

from fewshot_nlu.model_kinds import KINDS, Kind  # noqa: F401  (the table; Kind for callers)
from fewshot_nlu.models import protocol


def model_class(kind: str):
  """The class of ``kind``, imported now."""
  if kind not in KINDS:
    raise ValueError(f"unknown model kind {kind!r}; known kinds: {sorted(KINDS)}")
  return getattr(importlib.import_module(KINDS[kind].module), KINDS[kind].cls)


def kind_of(directory: str | pathlib.Path) -> str:
  """The kind of the model exported in ``directory`` (from its metadata JSON)."""
  directory = pathlib.Path(directory)
  if not directory.is_dir():
    raise FileNotFoundError(f"{directory}: no such directory")
  found = [(name, kind) for name, kind in KINDS.items() if (directory / kind.meta_file).is_file()]
  if len(found) > 1:
    raise ValueError(f"{directory}: metadata of several models ({', '.join(k.meta_file for _, k in found)}); "
                     "an export folder holds one model")
  if not found:
    if (directory / "config.json").is_file():
      raise ValueError(f"{directory}: an encoder export (config.json, no model metadata): it holds no labelled "
                       "examples or classifier to predict with; use it as --config.model.name of a method run")
    raise FileNotFoundError(f"{directory}: no model metadata ({', '.join(k.meta_file for k in KINDS.values())}); "
                            "is this the export/ folder of a training run?")
  default, kind = found[0]
  recorded = protocol.read_meta(directory, kind.meta_file, "an export folder").get("kind", default)
  if recorded != default:
    raise ValueError(f"{directory}/{kind.meta_file}: kind {recorded!r}, but that file belongs to kind {default!r}")
  return recorded


def load(directory: str | pathlib.Path, *, quantize: str | None = None, runtime: str | None = None, **kwargs):
  """The model exported in ``directory``, as its own class (``kwargs`` go to that class's ``load``);
  ``quantize="int8"``: its encoders' dense layers as int8 products, for inference (``encoders.quantize``);
  ``runtime="onnxruntime"``: its encoders run by ONNX Runtime, for inference on a CPU
  (``encoders.onnx_inference``; one log line per encoder left on XLA)."""
  from fewshot_nlu.encoders import onnx_inference
  from fewshot_nlu.encoders import quantize as quantization
  quantization.check_quantization(quantize)
  onnx_inference.check_runtime(runtime)
  if quantize and runtime == "onnxruntime":
    raise ValueError(f"quantize={quantize!r} and runtime='onnxruntime': int8 products run on XLA; choose one")
  model = model_class(kind_of(directory)).load(directory, **kwargs)
  quantization.quantize_encoders(model, quantize)
  if runtime == "onnxruntime":
    for line in onnx_inference.use_onnxruntime(model):
      logging.getLogger(__name__).warning("runtime='onnxruntime': %s", line)
  return model
