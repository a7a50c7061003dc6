"""Pieces every intent method shares: config checks, reading splits through the builders, the train loop
wiring (mesh, stream, checkpoints, metrics), 1-NN evaluation with evidence, and results files."""

from __future__ import annotations

import json
import logging
import pathlib
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from fewshot_nlu import config_checks, sharding
from fewshot_nlu.data import builders
from fewshot_nlu.data.builders import base
from fewshot_nlu.data.intent_folder import IntentSplit, LabelSetSplit
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import pooling
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.intent_model import IntentModel
from fewshot_nlu.train import loop, optimizer
from fewshot_nlu.train.checkpoint import Checkpointer
from fewshot_nlu.train.metrics import MetricWriter
from fewshot_nlu.train.setup import build_training
from fewshot_nlu.train.step import GradsFn, LossFn

log = logging.getLogger(__name__)

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def validate_training(config: ml_collections.ConfigDict) -> None:
  """The checks of the model, train and eval fields every training method shares."""
  config_checks.require_positive(config, "train.batch_size", "train.epochs", "train.learning_rate",
                                 "model.max_length", "eval.batch_size", "train.save_every",
                                 "train.log_every")
  config_checks.require_fraction(config, "train.warmup_fraction")
  config_checks.require_choice(config, "train.decay", optimizer.DECAYS)
  config_checks.require_choice(config, "model.pooling", tuple(pooling.POOLERS))
  config_checks.require_choice(config, "model.dtype", tuple(DTYPES))


def validate_common(config: ml_collections.ConfigDict):
  """The checks every intent method needs; none needs a model or a compile (preparing the dataset files is
  allowed). Returns the prepared builder."""
  config_checks.require_choice(config, "data.builder", tuple(builders.BUILDERS))
  validate_training(config)
  return prepared_builder(config)


def require_splits(config: ml_collections.ConfigDict, builder, field: str, splits) -> None:
  """Every name in ``splits`` (the value of ``config.<field>``) is a split of ``builder``."""
  available = sorted(builder.info.splits.keys())
  for split in splits:
    if split not in available:
      raise config_checks.ConfigError(
          f"config.{field}: {split!r} is not a split of {config.data.builder}; available: {available}")


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
  kwargs = {"config": config.data.builder_config} if config.data.get("builder_config") else {}
  return cls(raw_dir=raw_dir, data_dir=config.data.tfds_dir or None, **kwargs)


def dialogue_pairs_builder(config: ml_collections.ConfigDict, pairing: str, split_field: str):
  """The prepared ``dialogue_pairs`` builder of config ``pairing``, its raw root ``data.dir`` (the folder holding
  SGD/ and Taskmaster4/), after checking that ``config.<split_field>`` names one of its splits."""
  root = config_checks.require_dir(config, "data.dir", hint=" (the folder holding SGD/ and Taskmaster4/)")
  builder = base.prepare(builders.get_builder("dialogue_pairs", config=pairing, raw_dir=root,
                                              data_dir=config.data.tfds_dir or None))
  split = config_checks.get(config, split_field)
  if split not in builder.info.splits:
    raise config_checks.ConfigError(f"config.{split_field}: {split!r} is not a split of dialogue_pairs/{pairing}; "
                                    f"available: {sorted(builder.info.splits.keys())}")
  return builder


def _as_split(examples: list[dict], where: str) -> IntentSplit:
  texts, labels = [], []
  for e in examples:
    label = next((e[k] for k in ("label", "labels", "intents") if k in e), None)
    if isinstance(label, list):
      if len(label) != 1:
        raise ValueError(f"{where}, example {e['index']}: {len(label)} labels {label}; this method is "
                         "single-label (multi-label data belongs to Multi-ConvFiT)")
      label = label[0]
    texts.append(e["text"])
    labels.append(label)
  return IntentSplit(texts, labels, where)


def prepared_builder(config: ml_collections.ConfigDict):
  """The builder with its files prepared (once), after checking the configured split names exist."""
  builder = base.prepare(_builder(config))
  for field in ("data.train_split", "data.eval_split"):
    split = config_checks.get(config, field)
    require_splits(config, builder, field, [split] if split else [])
  return builder


def read_split(config: ml_collections.ConfigDict, split: str, builder=None) -> IntentSplit:
  builder = builder or prepared_builder(config)
  return _as_split(base.load_split(builder, split), f"{config.data.builder}/{split}")


def read_label_sets(config: ml_collections.ConfigDict, splits: Sequence[str], builder=None) -> LabelSetSplit:
  """The examples of ``splits`` (joined, in order) as texts with label sets (``intents``, ``labels`` or
  ``label`` field), for multi-label methods."""
  builder = builder or prepared_builder(config)
  texts, label_sets = [], []
  for split in splits:
    for e in base.load_split(builder, split):
      labels = next((e[k] for k in ("intents", "labels", "label") if k in e), None)
      if labels is None:
        raise ValueError(f"{config.data.builder}/{split}, example {e['index']}: no intents/labels/label field")
      texts.append(e["text"])
      label_sets.append(tuple(labels) if isinstance(labels, (list, tuple)) else (labels,))
  return LabelSetSplit(texts, label_sets, f"{config.data.builder}/{'+'.join(splits)}")


def read_splits(config: ml_collections.ConfigDict) -> tuple[IntentSplit, IntentSplit]:
  """(train, eval) splits named by ``data.train_split`` / ``data.eval_split``."""
  builder = prepared_builder(config)
  return tuple(read_split(config, split, builder) for split in (config.data.train_split, config.data.eval_split))


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
          loss_fn: LossFn, stream: EpochStream, mesh, writer: MetricWriter, *, grads_fn: GradsFn | None = None,
          total_steps: int | None = None, callback=None, callback_every: int = 0) -> tuple[Any, int]:
  """Runs the resumable training loop (``config.train.epochs`` of ``stream`` unless ``total_steps`` is
  given, at most ``config.train.max_steps`` when the config has one > 0); returns (trained params on host,
  total steps). ``callback`` / ``callback_every``: see ``train.loop.train``."""
  total_steps = total_steps or stream.total_steps(config.train.epochs)
  if config.train.get("max_steps", 0):
    total_steps = min(total_steps, config.train.max_steps)
  training = build_training(params, logical_axes, loss_fn, total_steps, mesh, config, grads_fn)
  checkpointer = Checkpointer(workdir, config.train.save_every, config.train.keep_checkpoints)
  try:
    state = loop.train(training=training, stream=stream, total_steps=total_steps, mesh=mesh,
                       checkpointer=checkpointer, writer=writer, log_every=config.train.log_every,
                       description=f"{config.method} {config.data.builder}/{config.data.train_split}",
                       callback=callback, callback_every=callback_every)
  finally:
    checkpointer.close()
  return jax.device_get(state.params), total_steps


def evaluate_intent_model(model: IntentModel, queries: IntentSplit, workdir: pathlib.Path,
                          name: str = "predictions") -> dict:
  """Accuracy of ``model`` on ``queries``; writes ``<name>.tsv`` (text, gold, predicted, score and the
  nearest training utterances with their labels and cosines: the evidence behind each prediction)."""
  predictions = model.predict(queries.texts, show_progress=True)
  correct = np.array([p.label == g for p, g in zip(predictions, queries.labels)])
  if jax.process_index() == 0:
    write_tsv(workdir / f"{name}.tsv", ("text", "gold", "predicted", "score", "nearest_training_utterances"),
              ((text, gold, p.label, f"{p.score:.4f}",
                " | ".join(f"{n.text} [{n.label} {n.score:.3f}]" for n in p.neighbours))
               for text, gold, p in zip(queries.texts, queries.labels, predictions)))
  return {"accuracy": float(correct.mean()), "num_eval": len(queries.texts), "num_pool": len(model)}


def _cell(text: str) -> str:
  return text.replace("\t", " ").replace("\n", " ")


def write_tsv(path: pathlib.Path, header: Sequence[str], rows) -> None:
  """A header line and one line per row, every cell ``str``-ed and cleaned of tabs and newlines."""
  with open(path, "w", encoding="utf-8") as f:
    f.write("\t".join(header) + "\n")
    for row in rows:
      f.write("\t".join(_cell(str(c)) for c in row) + "\n")


def nearest_neighbour_eval(encoder: SentenceEncoder, pool: IntentSplit, queries: IntentSplit,
                           workdir: pathlib.Path, name: str = "predictions") -> dict:
  """1-NN by cosine over the training pool, through ``IntentModel`` (see ``evaluate_intent_model``)."""
  model = IntentModel.from_examples(encoder, pool.texts, pool.labels, show_progress=True)
  return evaluate_intent_model(model, queries, workdir, name)


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
