"""Contrastive specialisation of a sentence encoder over utterance pairs: ConvFiT's Stage 2 (§2.2), reused by
Multi-ConvFiT (§2.1, where a pair is positive when the label sets intersect).

The encoder (dropout on) mean-pools and, when ``stage2.projection_dim`` > 0, applies ConvFiT's d_o tanh
down-projection (``encoders.projection``); a pair loss (``losses.pairs``: OCL / COS / SMAX) pulls positive pairs
together. Two ways to sample pairs (``stage2.sampling``): ``paper`` streams batches of the pair lists of §2.2
(``paper_stream``); ``fast`` encodes each utterance of a batch once and applies the loss to all in-batch pairs
(``in_batch_stream`` + the all-pairs loss). ``stage2_params`` builds what is trained (the encoder, with fresh
adapters for C-ADAPT, the projection, SMAX's pair classifier); ``load_encoder`` the starting encoder.
"""

from __future__ import annotations

import logging
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from jax.sharding import PartitionSpec as P

from fewshot_nlu import config_checks, sharding
from fewshot_nlu.data import batching, samplers
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import adapters, frozen_prefix, packing, pretrained, transformer
from fewshot_nlu.encoders import projection as projection_head
from fewshot_nlu.encoders.transformer import DTYPES
from fewshot_nlu.losses import pairs as pair_losses
from fewshot_nlu.train import run as train_run

log = logging.getLogger(__name__)

LOSSES = ("ocl", "cos", "smax")
PAIR_CLASSIFIER_PARAMS = "pair_classifier/.*"  # SMAX's W (``stage2_params``), a regex over parameter paths
SAMPLINGS = ("fast", "paper")
INITS = ("pretrained", "random")


def validate_loss(config: ml_collections.ConfigDict) -> None:
  """``stage2.loss`` is one of ``LOSSES``; for OCL, the margin delta_m of Eq. (2) lies in (0, 2], the range of
  the cosine distance 1 - cos (a margin <= 0 gives no negative any gradient; one > 2 pushes every negative pair
  without end)."""
  config_checks.require_choice(config, "stage2.loss", LOSSES)
  if ("smax_classifier_learning_rate" in config.stage2
      and not config_checks.is_positive(rate := config.stage2.smax_classifier_learning_rate)):
    raise config_checks.ConfigError(f"config.stage2.smax_classifier_learning_rate: must be a positive number, got "
                                    f"{rate!r} (SMAX's pair classifier W; 1e-3 by default)")
  if config.stage2.loss == "ocl":
    margin = config_checks.get(config, "stage2.margin")
    if not config_checks.is_positive(margin) or margin > 2:
      raise config_checks.ConfigError(f"config.stage2.margin: the OCL margin on the cosine distance 1 - cos must "
                                      f"lie in (0, 2], got {margin!r} (ConvFiT: 0.5)")


def with_pair_classifier_rate(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """``config`` with SMAX's pair classifier (``stage2_params``' ``pair_classifier``) in its own learning-rate group
  at ``stage2.smax_classifier_learning_rate`` (``train.group_learning_rates``; the same warm-up and decay); for
  another loss, or without that field, ``config`` itself. Not in ConvFiT §2.2, where W trains at the encoder's
  rate: W starts random, and the few hundred steps of the fast sampling at 2e-5 leave it near its start, so the
  encoder bends its space to a random classifier (HWU64 10-shot, MiniLM, seed 0: `valid` 77.97 at 2e-5, 79.46 at
  1e-3; OCL 85.04; bench/results/convfit_notes.md)."""
  if config.stage2.loss != "smax" or "smax_classifier_learning_rate" not in config.stage2:
    return config
  rate = config.stage2.smax_classifier_learning_rate
  config = config.copy_and_resolve_references()
  config.train.group_learning_rates = (*config.train.get("group_learning_rates", ()),
                                       (PAIR_CLASSIFIER_PARAMS, float(rate)))
  return config


def validate_length_groups(config: ml_collections.ConfigDict) -> None:
  """``stage2.length_groups`` (sub-batches of the all-pairs stream) is >= 1 and divides the batch."""
  if config.stage2.length_groups < 1 or config.train.batch_size % config.stage2.length_groups:
    raise config_checks.ConfigError(
        f"config.stage2.length_groups: {config.stage2.length_groups} must be >= 1 and divide "
        f"config.train.batch_size={config.train.batch_size}")


def validate_frozen_prefix(config: ml_collections.ConfigDict) -> None:
  """``train.frozen_prefix_layers``: -1 (off) or a prefix of the encoder's layers; not with adapters."""
  train_run.validate_frozen_prefix(config)
  train_run.validate_packing(config)
  if config.train.frozen_prefix_layers >= 0 and config.stage2.get("mode", "fft") == "adapter":
    raise config_checks.ConfigError(
        "config.train.frozen_prefix_layers: adapter training (stage2.mode=adapter) puts fresh adapters in every "
        "layer, so no prefix is frozen; set it to -1")


def freeze_prefix(params: dict, axes: dict, model: pretrained.Pretrained, config) -> tuple[dict, dict, Any]:
  """``frozen_prefix.freeze`` with ``train.frozen_prefix_layers``: (params, axes, cache or None)."""
  return frozen_prefix.freeze(params, axes, model.config, config.train.frozen_prefix_layers,
                              pad_id=model.tokenizer.pad_id, max_length=config.model.max_length,
                              dtype=DTYPES[config.model.dtype], batch_size=config.eval.batch_size)


# ---------------------------------------------------------------------------------------------- the loss

def embed_fn(cfg: transformer.EncoderConfig, config: ml_collections.ConfigDict):
  """``embed(params, batch, side, rng, num_items)``: the vectors of one side of ``batch`` as
  ``batching.batch_side`` lays it out (token ids or a frozen prefix's cached states, padded or packed several to a
  row; ``encoders.packing.encode_side``): encoder (dropout on) -> pooling -> down-projection if present. With
  ``stage2.mode = "adapter"`` (Multi-ConvFiT's C-ADAPT) gradients reach only the encoder's adapters."""
  dtype = DTYPES[config.model.dtype]
  adapter_only = config.stage2.get("mode", "fft") == "adapter"

  def embed(params, batch, side, rng, num_items: int):
    encoder_params = adapters.freeze_base(params["encoder"]) if adapter_only else params["encoder"]
    vectors = packing.encode_side(cfg, encoder_params, batch, side, num_items=num_items, pool=config.model.pooling,
                                  dtype=dtype, deterministic=False, rng=rng)
    return projection_head.apply(params["projection"], vectors) if "projection" in params else vectors

  return embed


def pair_loss_fn(config: ml_collections.ConfigDict):
  """``loss(params, a, b, positive, valid)`` for ``stage2.loss``."""
  s2 = config.stage2
  if s2.loss == "ocl":
    return lambda params, a, b, pos, valid: pair_losses.online_contrastive_loss(a, b, pos, valid, margin=s2.margin)
  if s2.loss == "cos":
    return lambda params, a, b, pos, valid: pair_losses.cosine_pair_loss(
        a, b, pos, valid, positive_target=s2.cos_targets[0], negative_target=s2.cos_targets[1])
  return lambda params, a, b, pos, valid: pair_losses.softmax_pair_loss(a, b, pos, valid, params["pair_classifier"])


def make_loss_fn(cfg: transformer.EncoderConfig, config: ml_collections.ConfigDict):
  embed, pair_loss = embed_fn(cfg, config), pair_loss_fn(config)

  def paper_loss(params, batch, rng):
    first_rng, second_rng = jax.random.split(rng)
    items = batch["valid"].shape[0]
    a = embed(params, batch, "first", first_rng, items)
    b = embed(params, batch, "second", second_rng, items)
    return pair_loss(params, a, b, batch["positive"], batch["valid"]), {}

  def fast_loss(params, batch, rng):
    if "packed_owner" in batch:
      vectors = embed(params, batch, "packed", rng, batch["valid"].shape[0])
    else:
      vectors = jnp.concatenate([embed(params, batch, f"group{g}", jax.random.fold_in(rng, g),
                                       batch[f"group{g}_mask"].shape[0]) for g in length_groups(batch)])
    first, second = all_pairs(vectors.shape[0])
    positive = in_batch_positive(batch, first, second)
    valid = batch["valid"][first] & batch["valid"][second]
    return pair_loss(params, vectors[first], vectors[second], positive, valid), {
        "positive_pairs": jnp.sum(positive & valid).astype(jnp.float32)}

  return fast_loss if config.stage2.sampling == "fast" else paper_loss


def length_groups(batch: dict) -> list[int]:
  """The length groups of an unpacked all-pairs batch (sides ``group<g>``), in row order."""
  return sorted(int(k[len("group"):].split("_")[0]) for k in batch if k.startswith("group") and k.endswith("_mask"))


def in_batch_positive(batch: dict, first, second) -> jax.Array:
  """Whether rows ``first`` and ``second`` of the batch form a positive pair: same intent (``label``), or,
  for multi-label data (``label_sets``, multi-hot [B, C]), intersecting label sets (Multi-ConvFiT §2.1)."""
  if "label_sets" in batch:
    sets = batch["label_sets"]
    return jnp.sum(sets[first] * sets[second], axis=-1) > 0
  return batch["label"][first] == batch["label"][second]


def all_pairs(batch_size: int) -> tuple[np.ndarray, np.ndarray]:
  """Row indices (i, j), i < j, of every unordered in-batch pair."""
  return np.triu_indices(batch_size, k=1)


# --------------------------------------------------------------------------------------------- batches

def _valid(n: int, batch_size: int) -> np.ndarray:
  return np.arange(batch_size) < n


def in_batch_stream(texts, fields: dict[str, np.ndarray], tokenizer, config, batch_size: int, mesh,
                    plan=None, cache: frozen_prefix.PrefixCache | None = None) -> EpochStream:
  """Batches of utterances for the all-pairs loss: each batch's token ids (or with ``cache`` their frozen
  prefix's states) in ``stage2.length_groups`` length-sorted sub-batches (sides ``group<g>``) or, with
  ``train.packing``, packed several to a row (side ``packed``, ``batching.batch_side``), ``valid``,
  and each of ``fields`` (per-utterance arrays: ``label`` or ``label_sets``) in the same row order. ``plan``: a
  batch plan (default: shuffled)."""
  groups = config.stage2.length_groups
  parallel = sharding.data_parallel_size(mesh)
  if (config.train.batch_size // groups) % parallel:
    raise config_checks.ConfigError(
        f"config.stage2.length_groups: {groups} groups of {config.train.batch_size // groups} rows do not split "
        f"over the {parallel} data-parallel devices of mesh {dict(mesh.shape)}")
  token_ids = frozen_prefix.cached_or_ids(tokenizer.encode(texts, config.model.max_length), cache)
  buckets = batching.length_buckets(config.model.max_length)
  pack_length, row_multiple = train_run.packing_layout(config, mesh)

  def make_batch(indices, epoch, batch_size):
    rows = [token_ids[i] for i in indices]
    if pack_length:  # items keep the plan's order; several share a row
      order = np.arange(len(indices))
      sides = batching.batch_side("packed", rows, buckets, tokenizer.pad_id, batch_size, pack_length, row_multiple)
    else:
      order, parts = batching.pad_in_length_groups(rows, groups, buckets, tokenizer.pad_id, batch_size)
      sides = {}
      for g, part in enumerate(parts):
        sides.update({f"group{g}_ids": part["input_ids"], f"group{g}_mask": part["attention_mask"]})
    batch = {"valid": _valid(len(indices), batch_size), **sides}
    for name, values in fields.items():
      column = np.zeros((batch_size, *values.shape[1:]), values.dtype)
      column[: len(indices)] = values[np.asarray(indices)[order]]
      batch[name] = column
    return batch

  return EpochStream(len(texts), batch_size, make_batch, seed=config.seed, plan=plan)


def paper_stream(texts, pairs: samplers.Pairs, tokenizer, config, batch_size: int, mesh,
                 cache: frozen_prefix.PrefixCache | None = None) -> EpochStream:
  """Batches of ``train.batch_size`` pairs (indices into ``texts``), each side padded to its own bucket or packed
  (``train.packing``): token ids, or with ``cache`` their frozen prefix's states."""
  token_ids = frozen_prefix.cached_or_ids(tokenizer.encode(texts, config.model.max_length), cache)
  log.info("paper sampling: %d positive + %d negative pairs", pairs.positive.sum(), (~pairs.positive).sum())
  buckets = batching.length_buckets(config.model.max_length)
  first = [token_ids[i] for i in pairs.first]
  second = [token_ids[i] for i in pairs.second]
  pack_length, row_multiple = train_run.packing_layout(config, mesh)
  make_batch = batching.padded_batcher({"first": (first, buckets), "second": (second, buckets)},
                                       tokenizer.pad_id, {"positive": pairs.positive}, pack_length, row_multiple)
  return EpochStream(len(pairs), batch_size, make_batch, seed=config.seed)


# ----------------------------------------------------------------------------------------------- params

def _linear_init(rng, n_in, n_out):
  """One dense layer, initialised as ``heads.mlp.init`` initialises a one-layer MLP (same numbers)."""
  return projection_head.init(jax.random.split(rng, 1)[0], n_in, n_out)


def stage2_params(encoder_params, cfg: transformer.EncoderConfig, config) -> tuple[dict, dict]:
  """(params, logical axes) of everything Stage 2 trains: encoder (with fresh adapters when ``stage2.mode`` is
  "adapter"), projection, SMAX's pair classifier."""
  rng = jax.random.key(config.seed)
  params = {"encoder": encoder_params}
  axes = {"encoder": transformer.logical_axes(cfg)}
  if config.stage2.get("mode", "fft") == "adapter":
    size = adapters.size_for(cfg, config.stage2.adapter_reduction)
    params["encoder"] = adapters.add_fresh(cfg, encoder_params, config.stage2.adapter_reduction,
                                           jax.random.fold_in(rng, 3))
    axes["encoder"] = transformer.logical_axes(cfg, size)
  dim = cfg.hidden_size
  if config.stage2.projection_dim:
    dim = config.stage2.projection_dim
    params["projection"] = jax.device_get(projection_head.init(jax.random.fold_in(rng, 1), cfg.hidden_size, dim))
    axes["projection"] = projection_head.logical_axes()
  if config.stage2.loss == "smax":
    params["pair_classifier"] = jax.device_get(_linear_init(jax.random.fold_in(rng, 2), 3 * dim, 2))
    axes["pair_classifier"] = {"kernel": P(None, None), "bias": P(None)}
  return params, axes


def load_encoder(config) -> pretrained.Pretrained:
  model = pretrained.load_pretrained(config.model.name)
  if config.model.max_length > model.config.max_length:
    raise config_checks.ConfigError(f"config.model.max_length: {config.model.max_length} exceeds the model's "
                                    f"{model.config.max_length} positions")
  train_run.check_frozen_prefix_depth(config, model.config)
  if config.model.init == "random":
    model.params = jax.device_get(transformer.init_params(model.config, jax.random.key(config.seed)))
    model.heads = {}
  return model
