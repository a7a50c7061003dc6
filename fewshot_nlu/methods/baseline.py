"""Baseline: supervised in-batch ranking fine-tuning on same-intent pairs, then 1-NN intent detection.

The sentence-transformers / SetFit-style baseline every paper in this project is compared against, and the
foundation's end-to-end job: each training utterance is paired with another utterance of the same intent
(itself if it is its intent's only example: dropout makes the two views differ), pairs are ranked with the
MNEG loss (ConvFiT Eq. 1) against the global in-batch negatives, with same-intent in-batch responses removed
from the negatives; prediction is the intent of the nearest training utterance by cosine.

``export/`` is that 1-NN classifier (``models.intent_model.IntentModel`` over the training utterances, kind
``intent_model``: ``python -m fewshot_nlu.predict --model .../export``); its encoder is a Hugging Face
checkpoint other methods load as ``model.name``, and ``labels.json`` lists the training intents.
"""

from __future__ import annotations

import json
import logging
import pathlib

import jax
import ml_collections
import numpy as np

from fewshot_nlu import config_checks, reports, workdirs
from fewshot_nlu.data import batching, splits
from fewshot_nlu.data.intent_folder import IntentSplit
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import packing, pretrained, transformer
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.encoders.transformer import DTYPES
from fewshot_nlu.evaluation import knn
from fewshot_nlu.losses.ranking import mneg_loss
from fewshot_nlu.models.intent_model import IntentModel
from fewshot_nlu.train import run as train_run
from fewshot_nlu.train.metrics import MetricWriter

log = logging.getLogger(__name__)

def validate(config: ml_collections.ConfigDict) -> None:
  train_run.validate_common(config)
  config_checks.require_positive(config, "loss.scale")
  train_run.validate_packing(config)


def make_loss_fn(cfg: transformer.EncoderConfig, config: ml_collections.ConfigDict):
  dtype = DTYPES[config.model.dtype]

  def loss_fn(params, batch, rng):
    anchor_rng, positive_rng = jax.random.split(rng)
    def side(name, side_rng):  # padded or packed (``train.packing``)
      return packing.encode_side(cfg, params, batch, name, num_items=batch["valid"].shape[0],
                                 pool=config.model.pooling, dtype=dtype, deterministic=False, rng=side_rng)
    loss = mneg_loss(side("anchor", anchor_rng), side("positive", positive_rng), batch["valid"], batch["label"],
                     scale=config.loss.scale, exclude_positive=config.loss.exclude_positive)
    return loss, {}

  return loss_fn


def make_batcher(split: IntentSplit, label_ids: dict[str, int], tokenizer, max_length: int, seed: int,
                 pack_length: int = 0, row_multiple: int = 1):
  """``make_batch(indices, epoch, batch_size)`` for ``EpochStream``: anchors + same-intent partners, both padded
  to one bucket, or each side packed (``pack_length``, ``batching.batch_side``)."""
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
    valid = np.zeros(batch_size, bool)
    valid[: len(indices)] = True
    label = np.full(batch_size, -1, np.int32)
    label[: len(indices)] = labels[indices]
    batch = {"valid": valid, "label": label}
    if pack_length:
      for name, tokens in (("anchor", anchor_tokens), ("positive", partner_tokens)):
        batch.update(batching.batch_side(name, tokens, buckets, tokenizer.pad_id, batch_size, pack_length,
                                         row_multiple))
      return batch
    length = batching.bucket_for(max(len(t) for t in anchor_tokens + partner_tokens), buckets)
    anchor = batching.pad_token_ids(anchor_tokens, length, tokenizer.pad_id, batch_size)
    positive = batching.pad_token_ids(partner_tokens, length, tokenizer.pad_id, batch_size)
    batch.update(anchor_ids=anchor["input_ids"], anchor_mask=anchor["attention_mask"],
                 positive_ids=positive["input_ids"], positive_mask=positive["attention_mask"])
    return batch

  return make_batch


def run(config: ml_collections.ConfigDict, workdir: pathlib.Path) -> dict:
  train_split, eval_split = splits.read_splits(config)
  splits.warn_unseen_labels(train_split, eval_split)
  label_ids = {l: i for i, l in enumerate(train_split.label_names)}
  model = pretrained.load_pretrained(config.model.name)
  if config.model.max_length > model.config.max_length:
    raise config_checks.ConfigError(
        f"config.model.max_length: {config.model.max_length} exceeds the model's "
        f"{model.config.max_length} positions")
  mesh, batch_size = train_run.mesh_and_batch(config)
  stream = EpochStream(len(train_split.texts), batch_size,
                       make_batcher(train_split, label_ids, model.tokenizer, config.model.max_length,
                                    config.seed, *train_run.packing_layout(config, mesh)),
                       seed=config.seed)
  writer = MetricWriter(workdir)
  params, steps = train_run.train(config, workdir, model.params, transformer.logical_axes(model.config),
                                  make_loss_fn(model.config, config), stream, mesh, writer)

  def encoder_of(eval_params) -> SentenceEncoder:
    return SentenceEncoder.from_config(config, model.config, eval_params, model.tokenizer)

  def evaluate(eval_params, tag) -> tuple[IntentModel, knn.Evaluation]:
    intent_model = IntentModel.from_examples(encoder_of(eval_params), train_split.texts, train_split.labels,
                                             show_progress=True, label_names=train_split.label_names)
    return intent_model, knn.evaluate(intent_model, eval_split, workdir, tag)

  intent_model, evaluation = evaluate(params, "predictions")
  results = dict(evaluation.results)
  results["rejection"] = intent_model.calibrate_rejection().to_dict()  # leave-one-out 1-NN: no extra encoding
  if jax.process_index() == 0:
    with workdirs.atomic_folder(workdir / "export") as export:
      intent_model.save(export, encoder_heads=model.heads)
      (export / "labels.json").write_text(json.dumps(train_split.label_names, indent=1) + "\n")
  untouched = lambda: encoder_of(model.params).encode(eval_split.texts, show_progress=True)  # noqa: E731
  if config.eval.before_training:
    before = evaluate(model.params, "predictions_before_training")[1]
    results["accuracy_before_training"], untouched = before.results["accuracy"], before.vectors
  results.update(reports.write_run_report(
      workdir, eval_split.labels, [p.label for p in evaluation.predictions], texts=eval_split.texts,
      title=f"{config.method} on {config.data.builder}/{config.data.eval_split}",
      embeddings={reports.UNTOUCHED: untouched, reports.SPECIALISED: evaluation.vectors}))
  results = train_run.finish(config, workdir, results, steps, writer)
  writer.close()
  return results
