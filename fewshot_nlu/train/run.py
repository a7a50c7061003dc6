"""Train wiring every method shares, and the one way a run finishes.

``validate_training`` checks the model / train / eval fields before anything compiles; ``mesh_and_batch``
and ``train`` run the resumable loop (mesh, stream, checkpoints, metrics); ``finish`` adds the fields an intent
run reports and writes them (``workdirs.write_results``, the one writer of ``results.json``).
"""

from __future__ import annotations

import logging
import math
import pathlib
from typing import Any

import jax
import ml_collections

from fewshot_nlu import config_checks, sharding, workdirs
from fewshot_nlu.data import builders, splits
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import frozen_prefix, pooling
from fewshot_nlu.encoders.transformer import DTYPES
from fewshot_nlu.train import loop, optimizer
from fewshot_nlu.train.checkpoint import Checkpointer
from fewshot_nlu.train.metrics import MetricWriter
from fewshot_nlu.train.setup import build_training
from fewshot_nlu.train.step import GradsFn, LossFn

log = logging.getLogger(__name__)


def validate_training(config: ml_collections.ConfigDict) -> None:
  """The checks of the model, train and eval fields every training method shares."""
  config_checks.require_positive(config, "train.batch_size", "train.epochs", "train.learning_rate",
                                 "model.max_length", "eval.batch_size", "train.save_every",
                                 "train.log_every", "train.keep_checkpoints")
  config_checks.require_non_negative(config, "train.max_steps", "train.weight_decay", "train.grad_clip_norm")
  if "min_steps" in config.train:
    config_checks.require_non_negative(config, "train.min_steps")
  for i, (pattern, rate) in enumerate(config.train.get("group_learning_rates", ())):
    if not config_checks.is_positive(rate):
      raise config_checks.ConfigError(f"config.train.group_learning_rates[{i}]: the learning rate of {pattern!r} "
                                      f"must be a positive number, got {rate!r}")
  config_checks.require_fraction(config, "train.warmup_fraction")
  config_checks.require_choice(config, "train.decay", optimizer.DECAYS)
  if "pooling" in config.model:  # span vectors (the span encoder) pool no sentence
    config_checks.require_choice(config, "model.pooling", tuple(pooling.POOLERS))
  config_checks.require_choice(config, "model.dtype", tuple(DTYPES))


def progress_label(config) -> str:
  """The progress bar's label: the method and what it trains on (a builder's split, or corpora)."""
  data = config.data
  if "builder" in data:
    name = data.builder + (f"/{data.builder_config}" if data.get("builder_config") else "")
    return f"{config.method} {name}" + (f"/{data.train_split}" if data.get("train_split") else "")
  return f"{config.method} {'+'.join(s for s in data.get('sources', ()) if s not in data.get('exclude', ()))}"


def validate_frozen_prefix(config: ml_collections.ConfigDict) -> None:
  """``train.frozen_prefix_layers`` (``encoders.frozen_prefix``): -1 (off) or >= 0 layers frozen with the
  embeddings (the encoder's own depth is checked when it is loaded)."""
  layers = config.train.frozen_prefix_layers
  if layers < -1:
    raise config_checks.ConfigError(f"config.train.frozen_prefix_layers: {layers} must be -1 (off) or >= 0")


def check_frozen_prefix_depth(config: ml_collections.ConfigDict, encoder_config) -> None:
  """Once the encoder is loaded: ``train.frozen_prefix_layers`` leaves at least its top layer to train (the
  default job freezes 2 layers, which a 2-layer ``--config.model.name`` cannot take)."""
  layers = config.train.frozen_prefix_layers
  if layers >= 0:
    try:
      frozen_prefix.validate_layers(encoder_config, layers)
    except ValueError as error:
      raise config_checks.ConfigError(f"config.train.frozen_prefix_layers: {error}; set it lower, or -1 to train "
                                      "every layer") from None


def validate_packing(config: ml_collections.ConfigDict) -> None:
  """``train.packing`` (``encoders.packing``) pools by the mean of each utterance's tokens."""
  if config.train.packing and config.model.pooling != "mean":
    raise config_checks.ConfigError(
        f"config.train.packing: packed rows are mean-pooled, but config.model.pooling is {config.model.pooling!r}")


PACKED_ROW_MULTIPLE = 4  # packed batches have a multiple of this many rows (a few shapes to compile)


def packing_layout(config: ml_collections.ConfigDict, mesh) -> tuple[int, int]:
  """``(pack_length, row_multiple)`` for ``batching.batch_side``: rows of ``model.max_length`` tokens, a multiple
  of 4 (and of the data-parallel devices) rows, with ``train.packing``; ``(0, 1)`` (padded) without."""
  if not config.train.packing:
    return 0, 1
  return config.model.max_length, math.lcm(PACKED_ROW_MULTIPLE, sharding.data_parallel_size(mesh))


def validate_common(config: ml_collections.ConfigDict):
  """The checks every intent method needs; none needs a model or a compile (preparing the dataset files is
  allowed). Returns the prepared builder."""
  config_checks.require_choice(config, "data.builder", tuple(builders.BUILDERS))
  validate_training(config)
  return splits.prepared_builder(config)


def mesh_and_batch(config: ml_collections.ConfigDict) -> tuple[Any, int]:
  """The mesh, and the global batch ``config.train.batch_size`` (which must split over the data-parallel
  devices). Every process streams the whole global batch (``sharding.global_batch`` places each process's rows)."""
  mesh = sharding.make_mesh(dict(config.mesh))
  global_batch = config.train.batch_size
  if global_batch % sharding.data_parallel_size(mesh):
    raise config_checks.ConfigError(
        f"config.train.batch_size: {global_batch} is not divisible by the "
        f"{sharding.data_parallel_size(mesh)} data-parallel devices of mesh {dict(mesh.shape)}")
  return mesh, global_batch


def train(config: ml_collections.ConfigDict, workdir: pathlib.Path, params: Any, logical_axes: Any,
          loss_fn: LossFn, stream: EpochStream, mesh, writer: MetricWriter, *, grads_fn: GradsFn | None = None,
          total_steps: int | None = None, callback=None, callback_every: int = 0,
          description: str | None = None) -> tuple[Any, int]:
  """Runs the resumable training loop (``config.train.epochs`` of ``stream`` unless ``total_steps`` is
  given, at least ``config.train.min_steps`` and at most ``config.train.max_steps`` when the config has them
  > 0); returns (trained params on host,
  the steps trained: the schedule's length, or where a ``callback`` stopped it early). ``callback`` /
  ``callback_every``: see ``train.loop.train``. ``description``: the progress bar's label (default: the method
  and its data)."""
  total_steps = max(total_steps or stream.total_steps(config.train.epochs), config.train.get("min_steps", 0))
  if config.train.get("max_steps", 0):
    total_steps = min(total_steps, config.train.max_steps)
  training = build_training(params, logical_axes, loss_fn, total_steps, mesh, config, grads_fn)
  checkpointer = Checkpointer(workdir, config.train.save_every, config.train.keep_checkpoints)
  try:
    state = loop.train(training=training, stream=stream, total_steps=total_steps, mesh=mesh,
                       checkpointer=checkpointer, writer=writer, log_every=config.train.log_every,
                       description=description or progress_label(config),
                       callback=callback, callback_every=callback_every,
                       divergence_hint=f"lower config.train.learning_rate (now {config.train.learning_rate:g})")
  finally:
    checkpointer.close()
  return sharding.to_host(state.params), int(jax.device_get(state.step))


def finish(config: ml_collections.ConfigDict, workdir: pathlib.Path, results: dict, steps: int,
           writer: MetricWriter) -> dict:
  """An intent run's results: adds the method, dataset, splits, steps and model, logs the accuracy as a metric,
  and writes ``results.json`` (``write_results``)."""
  results.update(method=config.method, dataset=config.data.builder, train_split=config.data.train_split,
                 eval_split=config.data.eval_split, steps=steps, model=config.model.name)
  writer.write(steps, {"accuracy": results["accuracy"]}, prefix="eval/")
  return workdirs.write_results(workdir, results)
