"""Training Retriever's encoder with the batch softmax (Yu et al., 2021, §5.1), shared by the slot-filling
(``methods.retriever.slots``) and intent (``methods.retriever.intents``) protocols.

Items are labelled spans of tokenised utterances: for slots a gold slot span (first and last word piece), for
intents the whole utterance ([CLS], piece 0). A batch holds ``retriever.per_label_batch`` (B) items of every
label (``data.samplers.PerLabelBatches``, N = all labels), so the global batch is N x B rows, rounded up to a
multiple of the data-parallel devices with padding rows; under jit the span vectors of all devices are the
candidates of every query (``losses.batch_softmax``). Dropout is on (BERT's 10%), as in BERT's fine-tuning code
the paper adapts.

Early stopping (App. A.1: "F1 score on the development domain as the metric for early stopping"): every
``eval.dev_every`` steps ``evaluate(encoder params) -> score`` runs; the best-scoring params are exported to
``<workdir>/best`` with ``best.json`` (step, score) before training goes on, and after ``eval.patience``
evaluations without improvement (0: never) training stops (``train.selection``: the rule QAID's development
curve uses too, so an interrupted run resumes with its best model known and stops where it would have). The best
export is what the protocols evaluate.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import pathlib
from typing import Callable, Sequence

import jax
import ml_collections
import numpy as np

from fewshot_nlu import config_checks, sharding
from fewshot_nlu.data import batching
from fewshot_nlu.data.samplers import PerLabelBatches
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import frozen_prefix, pooling, pretrained, transformer
from fewshot_nlu.encoders.transformer import DTYPES
from fewshot_nlu.losses.batch_softmax import REDUCTIONS, batch_softmax_loss
from fewshot_nlu.models.span_decoding import enumerate_spans
from fewshot_nlu.models.span_retrieval import labelled_spans, pieces_ok
from fewshot_nlu.train import run as train_run
from fewshot_nlu.train import selection
from fewshot_nlu.train.metrics import MetricWriter

log = logging.getLogger(__name__)

@dataclasses.dataclass
class SpanItems:
  """Training items: token ids of the item's utterance, its span's first/last piece, its label id; and for
  slots, ``negative_first`` / ``negative_last`` [items, K]: the pieces of K spans of the same utterance that
  are no gold slot (``negative_valid`` False where the utterance has fewer), the loss's "none" column."""

  token_ids: list[list[int]]
  first: np.ndarray
  last: np.ndarray
  label_ids: np.ndarray
  label_names: list[str]
  negative_first: np.ndarray | None = None
  negative_last: np.ndarray | None = None
  negative_valid: np.ndarray | None = None

  def __len__(self) -> int:
    return len(self.token_ids)


def _label_ids(labels: Sequence[str]) -> tuple[np.ndarray, list[str]]:
  names = sorted(set(labels))
  index = {n: i for i, n in enumerate(names)}
  return np.array([index[l] for l in labels], np.int32), names


def slot_items(tokenizer, utterances: Sequence[dict], max_length: int, *, negatives: int = 0,
               max_words: int = 7, seed: int = 0) -> SpanItems:
  """One item per gold slot span of ``utterances`` (``{"tokens", "tags"}``); spans cut by truncation are
  dropped. With ``negatives`` = K, each item also carries K spans of up to ``max_words`` words of its utterance
  that are no gold slot (partial and overlong slots included), drawn without replacement (seeded)."""
  rng = np.random.default_rng(seed)
  encoded = tokenizer.encode_words([u["tokens"] for u in utterances], max_length)
  ids, first, last, labels, negative_pieces = [], [], [], [], []
  for u, (token_ids, pieces) in zip(utterances, encoded):
    gold = labelled_spans(u["tags"])
    others = [span for span in enumerate_spans(len(u["tokens"]), max_words)
              if span not in {(s, e) for s, e, _ in gold} and pieces_ok(pieces, span)]
    for start, end, label in gold:
      if pieces_ok(pieces, (start, end)):
        ids.append(token_ids), first.append(pieces[start][0]), last.append(pieces[end - 1][1])
        labels.append(label)
        drawn = rng.choice(len(others), min(negatives, len(others)), replace=False) if negatives else []
        negative_pieces.append([(pieces[others[i][0]][0], pieces[others[i][1] - 1][1]) for i in drawn])
  label_ids, names = _label_ids(labels)
  items = SpanItems(ids, np.array(first, np.int32), np.array(last, np.int32), label_ids, names)
  if negatives:
    items.negative_first = np.zeros((len(ids), negatives), np.int32)
    items.negative_last = np.zeros((len(ids), negatives), np.int32)
    items.negative_valid = np.zeros((len(ids), negatives), bool)
    for i, spans in enumerate(negative_pieces):
      for k, (a, b) in enumerate(spans):
        items.negative_first[i, k], items.negative_last[i, k], items.negative_valid[i, k] = a, b, True
  return items


def utterance_items(tokenizer, texts: Sequence[str], labels: Sequence[str], max_length: int) -> SpanItems:
  """One item per utterance, its vector the [CLS] token (piece 0)."""
  label_ids, names = _label_ids(labels)
  zeros = np.zeros(len(texts), np.int32)
  return SpanItems(tokenizer.encode(texts, max_length), zeros, zeros, label_ids, names)


def validate(config: ml_collections.ConfigDict) -> None:
  train_run.validate_training(config)
  train_run.validate_frozen_prefix(config)
  r = config.retriever
  config_checks.require_choice(config, "retriever.reduction", REDUCTIONS)
  config_checks.require_positive(config, "retriever.per_label_batch")
  selection.validate(config)
  config_checks.require_non_negative(config, "retriever.cosine_scale", "retriever.negative_spans")
  if r.train and not config.train.get("max_steps", 0) and config.train.epochs <= 0:
    raise config_checks.ConfigError("config.train.epochs: must be > 0")


def make_loss_fn(cfg: transformer.EncoderConfig, config, num_labels: int, span: bool):
  """Batch-softmax loss of the encoder's span vectors (``span``: first+last pieces) or [CLS] vectors."""
  dtype = DTYPES[config.model.dtype]
  reduction = config.retriever.reduction
  cosine_scale = config.retriever.cosine_scale

  def loss_fn(params, batch, rng):
    hidden = frozen_prefix.encode_tokens(cfg, params["encoder"], batch["text_ids"], batch["text_mask"], dtype=dtype,
                                         deterministic=False, rng=rng)
    def similarity_space(z):  # s = scale * cos instead of the dot product (the similarity retrieval uses)
      z = z.astype(np.float32)
      return pooling.l2_normalize(z) * np.sqrt(cosine_scale) if cosine_scale else z

    if span:
      z = pooling.span_first_last(hidden, batch["first"][:, None], batch["last"][:, None])[:, 0]
    else:
      z = hidden[:, 0]
    negatives = negatives_valid = None
    if "negative_first" in batch:
      negatives = similarity_space(pooling.span_first_last(hidden, batch["negative_first"], batch["negative_last"]))
      negatives = negatives.reshape(-1, negatives.shape[-1])
      negatives_valid = (batch["negative_valid"] & batch["valid"][:, None]).reshape(-1)
    loss, accuracy = batch_softmax_loss(similarity_space(z), batch["label"], batch["valid"], num_labels, reduction,
                                        negatives, negatives_valid)
    return loss, {"accuracy": accuracy}

  return loss_fn


def item_stream(items: SpanItems, config, global_batch: int, pad_id: int,
                cache: frozen_prefix.PrefixCache | None = None) -> EpochStream:
  """Per-label batches (B of every label) of ``items``: ``text_ids/_mask`` (token ids, or with ``cache`` their
  frozen prefix's states), ``first``, ``last``, ``label``."""
  plan = PerLabelBatches(tuple(int(i) for i in items.label_ids), config.retriever.per_label_batch,
                         seed=config.seed)
  tokens = frozen_prefix.cached_or_ids(items.token_ids, cache)
  sides = {"text": (tokens, batching.length_buckets(config.model.max_length))}
  fields = {"first": items.first, "last": items.last, "label": items.label_ids}
  if items.negative_first is not None:
    fields.update(negative_first=items.negative_first, negative_last=items.negative_last,
                  negative_valid=items.negative_valid)
  return EpochStream(len(items), global_batch, batching.padded_batcher(sides, pad_id, fields), seed=config.seed,
                     plan=plan)


def global_batch_size(num_labels: int, per_label: int, mesh) -> int:
  """N x B rounded up to a multiple of the data-parallel devices (the extra rows are padding)."""
  parallel = sharding.data_parallel_size(mesh)
  return math.ceil(num_labels * per_label / parallel) * parallel


def train(config, workdir: pathlib.Path, model: pretrained.Pretrained, items: SpanItems, *, span: bool,
          evaluate: Callable[[dict], tuple[float, dict]] | None) -> tuple[dict, dict]:
  """Trains the encoder on ``items``; returns (the encoder params to use, a record of the training). With
  ``evaluate(params) -> (score, details)`` those are the best-scoring params (exported in ``<workdir>/best``),
  and the record's ``best_details`` are that evaluation's details; else the final params."""
  train_run.check_frozen_prefix_depth(config, model.config)
  mesh = sharding.make_mesh(dict(config.mesh))
  num_labels = len(items.label_names)
  batch = global_batch_size(num_labels, config.retriever.per_label_batch, mesh)
  cfg = ml_collections.ConfigDict(config.to_dict())
  cfg.train.batch_size = batch
  params = {"encoder": model.params}
  axes = {"encoder": transformer.logical_axes(model.config)}
  params, axes, cache = frozen_prefix.freeze(params, axes, model.config, config.train.frozen_prefix_layers,
                                             pad_id=model.tokenizer.pad_id, max_length=config.model.max_length,
                                             dtype=DTYPES[config.model.dtype], batch_size=config.eval.batch_size)
  stream = item_stream(items, cfg, batch, model.tokenizer.pad_id, cache)
  writer = MetricWriter(workdir)
  best = selection.read_best(workdir) or {"score": -math.inf, "step": None, "details": None}

  def callback(step, state):
    encoder = frozen_prefix.thaw({"encoder": sharding.to_host(state.params["encoder"])}, cache)["encoder"]
    score, details = evaluate(encoder)
    writer.write(step, {"dev_score": score}, prefix="eval/")
    if score > best["score"]:
      best.update(score=float(score), step=step, details=details)
      if jax.process_index() == 0:
        pretrained.save_pretrained(selection.best_dir(workdir), model.config, encoder, model.tokenizer)
      selection.write_best(workdir, best)
    log.info("step %d: development score %.2f (best %.2f at step %s)", step, score, best["score"], best["step"])
    return selection.patience_exhausted(config, step, best["step"])

  loss_fn = make_loss_fn(model.config, cfg, num_labels, span)
  trained, steps = train_run.train(cfg, workdir, params, axes, loss_fn, stream, mesh, writer,
                                   callback=callback if evaluate else None,
                                   callback_every=config.eval.dev_every)
  writer.close()
  record = {"steps": steps, "labels": num_labels, "items": len(items), "global_batch": batch}
  if evaluate is None or best["step"] is None:  # no evaluation ran (eval.dev_every = 0): the final params
    return frozen_prefix.thaw(trained, cache)["encoder"], record
  record.update(best_step=best["step"], best_dev_score=round(best["score"], 2), best_details=best["details"])
  return pretrained.load_pretrained(str(selection.best_dir(workdir))).params, record
