"""Pieces every intent method shares: config checks, reading splits through the builders, the train loop
wiring (mesh, stream, checkpoints, metrics), 1-NN evaluation with evidence, and results files."""

from __future__ import annotations

import json
import logging
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from fewshot_nlu import config_checks, sharding
from fewshot_nlu.data import builders
from fewshot_nlu.data.builders import base
from fewshot_nlu.data.intent_folder import IntentSplit
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import pooling
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.index import Index
from fewshot_nlu.train import loop, optimizer
from fewshot_nlu.train.checkpoint import Checkpointer
from fewshot_nlu.train.metrics import MetricWriter
from fewshot_nlu.train.setup import build_training
from fewshot_nlu.train.step import LossFn

log = logging.getLogger(__name__)

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def validate_common(config: ml_collections.ConfigDict) -> None:
  """The checks every intent method needs; none needs a model or a compile (preparing the dataset files is
  allowed)."""
  config_checks.require_choice(config, "data.builder", tuple(builders.BUILDERS))
  config_checks.require_positive(config, "train.batch_size", "train.epochs", "train.learning_rate",
                                 "model.max_length", "eval.batch_size", "train.save_every",
                                 "train.log_every")
  config_checks.require_fraction(config, "train.warmup_fraction")
  config_checks.require_choice(config, "train.decay", optimizer.DECAYS)
  config_checks.require_choice(config, "model.pooling", tuple(pooling.POOLERS))
  config_checks.require_choice(config, "model.dtype", tuple(DTYPES))
  _prepared_builder(config)


def _builder(config: ml_collections.ConfigDict):
  """The dataset builder: raw files from ``data.raw_dir`` if set, else ``data.dir/<its folder>``."""
  cls = builders.builder_class(config.data.builder)
  if config.data.raw_dir:
    raw_dir = config_checks.require_dir(config, "data.raw_dir")
  else:
    root = config_checks.require_dir(
        config, "data.dir", hint=" (set --config.data.dir or the FEWSHOT_NLU_DATA environment variable to "
        "the folder holding the raw datasets, or --config.data.raw_dir to your own dataset folder)")
    if not cls.RAW_FOLDER:
      raise config_checks.ConfigError(
          f"config.data.raw_dir: builder {config.data.builder!r} reads your own folder; set it")
    raw_dir = root / cls.RAW_FOLDER
    if not raw_dir.is_dir():
      raise config_checks.ConfigError(
          f"config.data.dir: {str(root)!r} has no {cls.RAW_FOLDER}/ folder for builder {config.data.builder!r}")
  return cls(raw_dir=raw_dir, data_dir=config.data.tfds_dir or None)


def _as_split(examples: list[dict], where: str) -> IntentSplit:
  texts, labels = [], []
  for e in examples:
    label = e["label"] if "label" in e else e.get("labels")
    if isinstance(label, list):
      if len(label) != 1:
        raise ValueError(f"{where}, example {e['index']}: {len(label)} labels {label}; this method is "
                         "single-label (multi-label data belongs to Multi-ConvFiT)")
      label = label[0]
    texts.append(e["text"])
    labels.append(label)
  return IntentSplit(texts, labels, where)


def _prepared_builder(config: ml_collections.ConfigDict):
  """The builder with its files prepared (once), after checking the configured split names exist."""
  builder = base.prepare(_builder(config))
  available = sorted(builder.info.splits.keys())
  for field in ("data.train_split", "data.eval_split"):
    split = config_checks.get(config, field)
    if split not in available:
      raise config_checks.ConfigError(
          f"config.{field}: {split!r} is not a split of {config.data.builder}; available: {available}")
  return builder


def read_splits(config: ml_collections.ConfigDict) -> tuple[IntentSplit, IntentSplit]:
  """(train, eval) splits named by ``data.train_split`` / ``data.eval_split``."""
  builder = _prepared_builder(config)
  return tuple(_as_split(base.load_split(builder, split), f"{config.data.builder}/{split}")
               for split in (config.data.train_split, config.data.eval_split))


def mesh_and_host_batch(config: ml_collections.ConfigDict) -> tuple[Any, int]:
  """The mesh, and this process's slice of ``config.train.batch_size`` (which must split over the
  data-parallel devices)."""
  mesh = sharding.make_mesh(dict(config.mesh))
  global_batch = config.train.batch_size
  if global_batch % sharding.data_parallel_size(mesh):
    raise config_checks.ConfigError(
        f"config.train.batch_size: {global_batch} is not divisible by the "
        f"{sharding.data_parallel_size(mesh)} data-parallel devices of mesh {dict(mesh.shape)}")
  return mesh, global_batch // jax.process_count()


def train(config: ml_collections.ConfigDict, workdir: pathlib.Path, params: Any, logical_axes: Any,
          loss_fn: LossFn, stream: EpochStream, mesh, writer: MetricWriter) -> tuple[Any, int]:
  """Runs the resumable training loop; returns (trained params on host, total steps)."""
  total_steps = stream.total_steps(config.train.epochs)
  training = build_training(params, logical_axes, loss_fn, total_steps, mesh, config)
  checkpointer = Checkpointer(workdir, config.train.save_every, config.train.keep_checkpoints)
  try:
    state = loop.train(training=training, stream=stream, total_steps=total_steps, mesh=mesh,
                       checkpointer=checkpointer, writer=writer, log_every=config.train.log_every,
                       description=f"{config.method} {config.data.builder}/{config.data.train_split}")
  finally:
    checkpointer.close()
  return jax.device_get(state.params), total_steps


def nearest_neighbour_eval(encoder: SentenceEncoder, pool: IntentSplit, queries: IntentSplit,
                           workdir: pathlib.Path, name: str = "predictions") -> dict:
  """1-NN by cosine over the training pool (``fewshot_nlu.index``); writes ``<name>.tsv`` with the nearest
  training utterance as the evidence for each prediction."""
  index = Index.build(encoder.encode(pool.texts, show_progress=True),
                      [{"label": l, "text": t} for t, l in zip(pool.texts, pool.labels)], metric="cosine")
  hits = [row[0] for row in index.query(encoder.encode(queries.texts, show_progress=True), k=1)]
  correct = np.array([h.payload["label"] == g for h, g in zip(hits, queries.labels)])
  with open(workdir / f"{name}.tsv", "w", encoding="utf-8") as f:
    f.write("text\tgold\tpredicted\tscore\tnearest_training_utterance\n")
    for text, gold, hit in zip(queries.texts, queries.labels, hits):
      f.write(f"{text}\t{gold}\t{hit.payload['label']}\t{hit.score:.4f}\t{hit.payload['text']}\n")
  return {"accuracy": float(correct.mean()), "num_eval": len(queries.texts), "num_pool": len(pool.texts)}


def write_results(config: ml_collections.ConfigDict, workdir: pathlib.Path, results: dict, steps: int,
                  writer: MetricWriter) -> dict:
  results.update(method=config.method, dataset=config.data.builder, train_split=config.data.train_split,
                 eval_split=config.data.eval_split, steps=steps, model=config.model.name)
  writer.write(steps, {"accuracy": results["accuracy"]}, prefix="eval/")
  if jax.process_index() == 0:
    (workdir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
  log.info("results: %s", results)
  return results


def warn_unseen_labels(train_split: IntentSplit, eval_split: IntentSplit) -> None:
  unknown = sorted(set(eval_split.labels) - set(train_split.labels))
  if unknown:
    log.warning("%d eval intents never occur in training (always wrong under 1-NN): %s", len(unknown),
                unknown[:5])
