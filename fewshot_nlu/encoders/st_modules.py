"""sentence-transformers' module files, written beside our checkpoints and read from theirs.

A sentence-transformers model directory is an HF checkpoint plus a ``modules.json`` naming the modules that
turn token states into a sentence vector, in order, each with its config in its own folder:

  ``Transformer`` (path ``""``: the checkpoint in the root; ``sentence_bert_config.json``: ``max_seq_length``)
  ``Pooling``     (``1_Pooling/config.json``: mean, CLS or max over the real tokens)
  ``Dense``       (``2_Dense/config.json`` + ``model.safetensors``: ``linear.weight`` [out, in], ``linear.bias``,
                   then the activation; ConvFiT's tanh down-projection, ``encoders.projection``)
  ``Normalize``   (L2 normalisation; no files)

``write`` gives every export whose vectors are those of a ``SentenceEncoder`` these files, so that
``SentenceTransformer(export)`` computes the same vectors (``bench/st_compat.py`` checks it against the real
library). ``read`` does the reverse when a sentence-transformers directory is loaded as a base model: its
declared pooling, normalisation, Dense projection and maximum length replace our defaults
(``SentenceEncoder.from_pretrained``, ``config.model.pooling = "auto"``). Files are written in the legacy
layout (``sentence_transformers.models.*`` types, ``pooling_mode_*_tokens`` booleans), which every
sentence-transformers release from 2.x to 6.x reads; both that and the newer ``pooling_mode`` key are read.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

import numpy as np

from fewshot_nlu import workdirs
from fewshot_nlu.errors import UserError

MODULES_FILE = "modules.json"
TRANSFORMER_CONFIG = "sentence_bert_config.json"
MODEL_CONFIG = "config_sentence_transformers.json"
POOLING_DIR = "1_Pooling"
TANH = "torch.nn.modules.activation.Tanh"
# our pooling name -> the legacy boolean key of sentence-transformers' Pooling config
_POOLING_KEYS = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens",
                 "max": "pooling_mode_max_tokens", "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens"}
_NEW_POOLING_NAMES = {"cls": "cls", "mean": "mean", "max": "max", "mean_sqrt_len_tokens": "mean_sqrt_len"}
SUPPORTED_POOLING = ("mean", "cls", "max")


class SentenceModulesError(UserError, ValueError):
  """A sentence-transformers directory whose modules this project cannot reproduce."""


@dataclasses.dataclass(frozen=True)
class SentenceModules:
  """What a sentence-transformers directory declares on top of its transformer."""

  pooling: str | None  # one of SUPPORTED_POOLING (None when ``unsupported``)
  normalize: bool
  max_seq_length: int | None
  projection: dict | None  # a Dense layer with tanh, in ``encoders.projection``'s format {kernel [H, d], bias [d]}
  transformer_path: str = ""  # the folder of the HF checkpoint, relative to the directory ("" = the root)
  unsupported: str | None = None  # why this project cannot encode as the directory declares (file and what)

  def require_supported(self) -> None:
    """Raises ``SentenceModulesError`` saying why, when the declared modules cannot be reproduced."""
    if self.unsupported:
      raise SentenceModulesError(f"{self.unsupported}; choose a pooling explicitly (config.model.pooling, or "
                                 "SentenceEncoder.from_pretrained(..., pooling_mode=...)) to encode otherwise")


# ------------------------------------------------------------------------------------------------- write

def write(directory: str | pathlib.Path, *, hidden_size: int, pooling: str, normalize: bool, max_length: int,
          projection: dict | None = None) -> None:
  """Writes the module files that make ``SentenceTransformer(directory)`` encode as a ``SentenceEncoder`` with
  this pooling, projection (tanh) and normalisation does; the HF checkpoint must be in ``directory`` itself."""
  if pooling not in SUPPORTED_POOLING:
    raise ValueError(f"pooling {pooling!r} has no sentence-transformers equivalent here; one of {SUPPORTED_POOLING}")
  directory = pathlib.Path(directory)
  modules = [_module(0, "", "Transformer"), _module(1, POOLING_DIR, "Pooling")]
  (directory / POOLING_DIR).mkdir(parents=True, exist_ok=True)
  _write_json(directory / POOLING_DIR / "config.json", {
      "word_embedding_dimension": hidden_size, **{key: mode == pooling for mode, key in _POOLING_KEYS.items()}})
  if projection is not None:
    kernel = np.asarray(projection["kernel"], np.float32)
    dense = f"{len(modules)}_Dense"
    (directory / dense).mkdir(exist_ok=True)
    _write_json(directory / dense / "config.json", {"in_features": int(kernel.shape[0]),
                                                    "out_features": int(kernel.shape[1]), "bias": True,
                                                    "activation_function": TANH})
    workdirs.save_safetensors({"linear.weight": np.ascontiguousarray(kernel.T),
                               "linear.bias": np.ascontiguousarray(np.asarray(projection["bias"], np.float32))},
                              directory / dense / "model.safetensors", metadata={"format": "pt"})
    modules.append(_module(len(modules), dense, "Dense"))
  if normalize:
    modules.append(_module(len(modules), f"{len(modules)}_Normalize", "Normalize"))
  _write_json(directory / MODULES_FILE, modules)
  _write_json(directory / TRANSFORMER_CONFIG, {"max_seq_length": max_length, "do_lower_case": False})
  _write_json(directory / MODEL_CONFIG, {"prompts": {}, "default_prompt_name": None,
                                         "similarity_fn_name": "cosine"})


def _module(idx: int, path: str, kind: str) -> dict:
  return {"idx": idx, "name": str(idx), "path": path, "type": f"sentence_transformers.models.{kind}"}


def _write_json(path: pathlib.Path, value) -> None:
  path.write_text(json.dumps(value, indent=2) + "\n")


# -------------------------------------------------------------------------------------------------- read

def read(directory: str | pathlib.Path) -> SentenceModules | None:
  """The modules ``directory`` declares (None without a ``modules.json``: a plain HF checkpoint). Modules this
  project cannot reproduce (another pooling, a Dense without tanh, other module types) are recorded in
  ``unsupported`` (naming the file), for the caller to refuse unless told how to encode instead; they are never
  silently replaced by mean pooling. An unreadable ``modules.json`` is an error."""
  directory = pathlib.Path(directory)
  path = directory / MODULES_FILE
  if not path.is_file():
    return None
  entries = _read_json(path)
  if not isinstance(entries, list) or not all(isinstance(e, dict) and "type" in e for e in entries):
    raise SentenceModulesError(f"{path}: expected a list of modules, each with a 'type'")
  kinds = [str(e["type"]).rsplit(".", 1)[-1] for e in entries]
  if not kinds or kinds[0] != "Transformer":
    raise SentenceModulesError(f"{path}: modules {kinds}; the first must be the Transformer")
  transformer_path = str(entries[0].get("path", ""))
  bert_config = directory / transformer_path / TRANSFORMER_CONFIG
  max_seq_length = _read_json(bert_config).get("max_seq_length") if bert_config.is_file() else None
  normalize = kinds[-1] == "Normalize"
  if kinds[1:2] != ["Pooling"] or any(k not in ("Dense", "Normalize") for k in kinds[2:]) \
      or kinds.count("Dense") > 1 or "Normalize" in kinds[2:-1]:
    return SentenceModules(None, normalize, max_seq_length, None, transformer_path,
                           f"{path}: modules {kinds}; only Transformer, Pooling, an optional Dense and an optional "
                           "Normalize (in that order) can be reproduced by this project's encoder")
  try:
    pooling = _read_pooling(directory / str(entries[1].get("path", "")) / "config.json")
    projection = None
    if "Dense" in kinds:
      projection = _read_dense(directory / str(entries[kinds.index("Dense")].get("path", "")))
  except _Unsupported as e:
    return SentenceModules(None, normalize, max_seq_length, None, transformer_path, str(e))
  return SentenceModules(pooling, normalize, max_seq_length, projection, transformer_path)


class _Unsupported(Exception):
  """A declared module this project cannot reproduce (becomes ``SentenceModules.unsupported``)."""


def _read_json(path: pathlib.Path):
  try:
    return json.loads(path.read_text(encoding="utf-8"))
  except (OSError, ValueError) as e:
    raise SentenceModulesError(f"{path}: cannot be read as JSON ({e})") from e


def _read_pooling(path: pathlib.Path) -> str:
  config = _read_json(path)
  if "pooling_mode" in config:  # sentence-transformers >= 5
    declared = config["pooling_mode"]
    modes = [declared] if isinstance(declared, str) else list(declared)
    modes = [_NEW_POOLING_NAMES.get(m, m) for m in modes]
  else:
    modes = [mode for mode, key in _POOLING_KEYS.items() if config.get(key)]
    modes += [k for k in ("pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken") if config.get(k)]
  if len(modes) != 1 or modes[0] not in SUPPORTED_POOLING:
    raise _Unsupported(f"{path}: pooling {modes} is not supported; this project pools by exactly one of "
                               f"{SUPPORTED_POOLING}")
  return modes[0]


def _read_dense(folder: pathlib.Path) -> dict:
  config = _read_json(folder / "config.json")
  activation = config.get("activation_function", TANH)
  if activation != TANH or config.get("use_residual"):
    raise _Unsupported(f"{folder / 'config.json'}: a Dense layer with activation {activation!r}"
                               f"{' and a residual' if config.get('use_residual') else ''}; this project's "
                               "projection (encoders.projection) is linear + tanh only")
  weights = folder / "model.safetensors"
  if not weights.is_file():
    raise SentenceModulesError(f"{folder}: no model.safetensors (a pytorch_model.bin needs torch to read; convert "
                               "it once where torch is installed)")
  from safetensors.numpy import load_file
  tensors = load_file(str(weights))
  weight = tensors.get("linear.weight")
  if weight is None or weight.ndim != 2:
    raise SentenceModulesError(f"{weights}: expected a 2-d 'linear.weight', found {sorted(tensors)}")
  bias = tensors.get("linear.bias", np.zeros(weight.shape[0], np.float32))
  if bias.shape != (weight.shape[0],):
    raise SentenceModulesError(f"{weights}: linear.bias has shape {bias.shape}, expected ({weight.shape[0]},)")
  return {"kernel": np.ascontiguousarray(weight.T.astype(np.float32)), "bias": bias.astype(np.float32)}
