"""Baseline: supervised in-batch ranking fine-tuning on same-intent pairs, then 1-NN intent detection.

The sentence-transformers / SetFit-style baseline every paper in this project is compared against, and the
foundation's end-to-end job: each training utterance is paired with another utterance of the same intent
(itself if it is its intent's only example: dropout makes the two views differ), pairs are ranked with the
MNEG loss (ConvFiT Eq. 1) against the global in-batch negatives, with same-intent in-batch responses removed
from the negatives; prediction is the intent of the nearest training utterance by cosine.
"""

from __future__ import annotations

import json
import logging
import pathlib

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from fewshot_nlu import config_checks, sharding
from fewshot_nlu.data import batching
from fewshot_nlu.data import builders
from fewshot_nlu.data.builders import base
from fewshot_nlu.data.intent_folder import IntentSplit
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import pooling, pretrained, transformer
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.index import Index
from fewshot_nlu.losses.ranking import mneg_loss
from fewshot_nlu.train import loop
from fewshot_nlu.train.checkpoint import Checkpointer
from fewshot_nlu.train.metrics import MetricWriter
from fewshot_nlu.train.setup import build_training

log = logging.getLogger(__name__)

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def validate(config: ml_collections.ConfigDict) -> None:
  """Every check that needs no model or compile (preparing the dataset files is allowed)."""
  config_checks.require_choice(config, "data.builder", tuple(builders.BUILDERS))
  config_checks.require_positive(config, "train.batch_size", "train.epochs", "train.learning_rate",
                                 "model.max_length", "eval.batch_size", "train.save_every",
                                 "train.log_every")
  config_checks.require_fraction(config, "train.warmup_fraction")
  config_checks.require_choice(config, "train.decay", ("linear", "cosine", "constant"))
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


def make_loss_fn(cfg: transformer.EncoderConfig, config: ml_collections.ConfigDict):
  module = transformer.TransformerEncoder(cfg, DTYPES[config.model.dtype])
  pool = pooling.get_pooler(config.model.pooling)

  def embed(params, ids, mask, rng):
    hidden = module.apply({"params": params}, ids, mask, deterministic=False, rngs={"dropout": rng})
    return pool(hidden, mask)

  def loss_fn(params, batch, rng):
    anchor_rng, positive_rng = jax.random.split(rng)
    anchors = embed(params, batch["anchor_ids"], batch["anchor_mask"], anchor_rng)
    positives = embed(params, batch["positive_ids"], batch["positive_mask"], positive_rng)
    loss = mneg_loss(anchors, positives, batch["valid"], batch["label"], scale=config.loss.scale,
                     exclude_positive=config.loss.exclude_positive)
    return loss, {}

  return loss_fn


def make_batcher(split: IntentSplit, label_ids: dict[str, int], tokenizer, max_length: int, seed: int):
  """``make_batch(indices, epoch, batch_size)`` for ``EpochStream``: anchors + same-intent partners."""
  token_ids = tokenizer.encode(split.texts, max_length)
  labels = np.array([label_ids[l] for l in split.labels], np.int32)
  by_label = {l: np.flatnonzero(labels == l) for l in np.unique(labels)}
  buckets = batching.length_buckets(max_length)

  def make_batch(indices: np.ndarray, epoch: int, batch_size: int):
    partners = []
    for i in indices:
      rng = np.random.default_rng([seed, epoch, int(i)])
      others = by_label[labels[i]][by_label[labels[i]] != i]
      partners.append(int(rng.choice(others)) if len(others) else int(i))
    anchor_tokens = [token_ids[i] for i in indices]
    partner_tokens = [token_ids[j] for j in partners]
    length = batching.bucket_for(max(len(t) for t in anchor_tokens + partner_tokens), buckets)
    anchor = batching.pad_token_ids(anchor_tokens, length, tokenizer.pad_id, batch_size)
    positive = batching.pad_token_ids(partner_tokens, length, tokenizer.pad_id, batch_size)
    valid = np.zeros(batch_size, bool)
    valid[: len(indices)] = True
    label = np.full(batch_size, -1, np.int32)
    label[: len(indices)] = labels[indices]
    return {"anchor_ids": anchor["input_ids"], "anchor_mask": anchor["attention_mask"],
            "positive_ids": positive["input_ids"], "positive_mask": positive["attention_mask"],
            "valid": valid, "label": label}

  return make_batch


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


def run(config: ml_collections.ConfigDict, workdir: pathlib.Path) -> dict:
  train_split, eval_split = read_splits(config)
  unknown = sorted(set(eval_split.labels) - set(train_split.labels))
  if unknown:
    log.warning("%d eval intents never occur in training (always wrong under 1-NN): %s",
                    len(unknown), unknown[:5])
  label_ids = {l: i for i, l in enumerate(train_split.label_names)}

  model = pretrained.load_pretrained(config.model.name)
  if config.model.max_length > model.config.max_length:
    raise config_checks.ConfigError(
        f"config.model.max_length: {config.model.max_length} exceeds the model's "
        f"{model.config.max_length} positions")
  mesh = sharding.make_mesh(dict(config.mesh))
  global_batch = config.train.batch_size
  if global_batch % sharding.data_parallel_size(mesh):
    raise config_checks.ConfigError(
        f"config.train.batch_size: {global_batch} is not divisible by the "
        f"{sharding.data_parallel_size(mesh)} data-parallel devices of mesh {dict(mesh.shape)}")
  # Each process feeds its slice of the global batch.
  host_batch = global_batch // jax.process_count()
  stream = EpochStream(len(train_split.texts), host_batch,
                       make_batcher(train_split, label_ids, model.tokenizer, config.model.max_length,
                                    config.seed), seed=config.seed + jax.process_index())
  total_steps = stream.total_steps(config.train.epochs)
  training = build_training(model.params, transformer.logical_axes(model.config),
                            make_loss_fn(model.config, config), total_steps, mesh, config)
  writer = MetricWriter(workdir)
  checkpointer = Checkpointer(workdir, config.train.save_every, config.train.keep_checkpoints)
  try:
    state = loop.train(training=training, stream=stream, total_steps=total_steps, mesh=mesh,
                       checkpointer=checkpointer, writer=writer, log_every=config.train.log_every,
                       description=f"{config.method} {config.data.builder}/{config.data.train_split}")
  finally:
    checkpointer.close()
  params = jax.device_get(state.params)

  export_dir = workdir / "export"
  if jax.process_index() == 0:
    pretrained.save_pretrained(export_dir, model.config, params, model.tokenizer, model.heads)
    (export_dir / "labels.json").write_text(json.dumps(train_split.label_names, indent=1) + "\n")
  def evaluate(eval_params, tag):
    encoder = SentenceEncoder(model.config, eval_params, model.tokenizer, pooling_mode=config.model.pooling,
                              max_length=config.model.max_length, batch_size=config.eval.batch_size,
                              dtype=DTYPES[config.model.dtype])
    return nearest_neighbour_eval(encoder, train_split, eval_split, workdir, tag)

  results = evaluate(params, "predictions")
  if config.eval.before_training:
    results["accuracy_before_training"] = evaluate(model.params, "predictions_before_training")["accuracy"]
  results.update(method=config.method, dataset=config.data.builder, train_split=config.data.train_split,
                 eval_split=config.data.eval_split, steps=total_steps, model=config.model.name)
  writer.write(total_steps, {"accuracy": results["accuracy"]}, prefix="eval/")
  writer.close()
  if jax.process_index() == 0:
    (workdir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
  log.info("results: %s", results)
  return results
