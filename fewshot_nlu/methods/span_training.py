"""Training Retriever's encoder with the batch softmax (Yu et al., 2021, §5.1), shared by the slot-filling
(``methods.retriever.slots``) and intent (``methods.retriever.intents``) protocols.

Items are labelled spans of tokenised utterances: for slots a gold slot span (first and last word piece), for
intents the whole utterance ([CLS], piece 0). A batch holds ``retriever.per_label_batch`` (B) items of every
label (``data.samplers.PerLabelBatches``, N = all labels), so the global batch is N x B rows, rounded up to a
multiple of the data-parallel devices with padding rows; under jit the span vectors of all devices are the
candidates of every query (``losses.batch_softmax``). Dropout is on (BERT's 10%), as in BERT's fine-tuning code
the paper adapts. With ``train.packing`` the items' utterances (token ids, or a frozen prefix's cached states) are
packed several to a row of ``model.max_length`` (``encoders.packing``: each attends to itself only) and every span
is read at its utterance's place in its row (``item_spans``): the same loss and gradients as padded rows
(tests/methods/test_span_training.py), on ~the real tokens only.

Early stopping (App. A.1: "F1 score on the development domain as the metric for early stopping"): every
``eval.dev_every`` steps ``evaluate(encoder params) -> score`` runs; the best-scoring params are exported to
``<workdir>/best`` with ``best.json`` (step, score) before training goes on, and after ``eval.patience``
evaluations without improvement (0: never) training stops (``train.selection``: the rule QAID's development
curve uses too, so an interrupted run resumes with its best model known and stops where it would have). The best
export is what the protocols evaluate.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import pathlib
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from fewshot_nlu import config_checks, sharding
from fewshot_nlu.data import batching
from fewshot_nlu.data.samplers import PerLabelBatches
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import frozen_prefix, packing, pooling, pretrained, transformer
from fewshot_nlu.encoders.transformer import DTYPES
from fewshot_nlu.losses.batch_softmax import REDUCTIONS, batch_softmax_loss
from fewshot_nlu.models.span_retrieval import SpanEncoder, labelled_spans, pieces_ok, unlabelled_spans
from fewshot_nlu.train import optimizer as train_optimizer
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
    others = [span for span in unlabelled_spans(len(u["tokens"]), gold, max_words) if pieces_ok(pieces, span)]
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
  if r.get("train", True) and not config.train.get("max_steps", 0) and config.train.epochs <= 0:
    raise config_checks.ConfigError("config.train.epochs: must be > 0")


def make_loss_fn(cfg: transformer.EncoderConfig, config, num_labels: int, span: bool):
  """Batch-softmax loss of the encoder's span vectors (``span``: first+last pieces) or [CLS] vectors."""
  dtype = DTYPES[config.model.dtype]
  reduction = config.retriever.reduction
  cosine_scale = config.retriever.cosine_scale

  def loss_fn(params, batch, rng):
    if "text_owner" in batch:  # packed rows: each utterance attends to itself, numbered from 0 (encoders.packing)
      owner = batch["text_owner"]
      hidden = frozen_prefix.encode_tokens(cfg, params["encoder"], batch["text_ids"], packing.attention_mask(owner),
                                           dtype=dtype, deterministic=False, rng=rng,
                                           position_ids=packing.position_ids(batch["text_offsets"], owner, cfg))
    else:
      hidden = frozen_prefix.encode_tokens(cfg, params["encoder"], batch["text_ids"], batch["text_mask"],
                                           dtype=dtype, deterministic=False, rng=rng)
    def similarity_space(z):  # s = scale * cos instead of the dot product (the similarity retrieval uses)
      z = z.astype(np.float32)
      return pooling.l2_normalize(z) * np.sqrt(cosine_scale) if cosine_scale else z

    if span:
      z = item_spans(hidden, batch, batch["first"][:, None], batch["last"][:, None])[:, 0]
    else:  # [CLS]: piece 0 of the item's utterance
      z = item_spans(hidden, batch, batch["first"][:, None], batch["first"][:, None])[:, 0, : hidden.shape[-1]]
    negatives = negatives_valid = None
    if "negative_first" in batch:
      negatives = similarity_space(item_spans(hidden, batch, batch["negative_first"], batch["negative_last"]))
      negatives = negatives.reshape(-1, negatives.shape[-1])
      negatives_valid = (batch["negative_valid"] & batch["valid"][:, None]).reshape(-1)
    loss, accuracy = batch_softmax_loss(similarity_space(z), batch["label"], batch["valid"], num_labels, reduction,
                                        negatives, negatives_valid)
    return loss, {"accuracy": accuracy}

  return loss_fn


def item_stream(items: SpanItems, config, global_batch: int, pad_id: int,
                cache: frozen_prefix.PrefixCache | None = None, pack_length: int = 0,
                row_multiple: int = 1) -> EpochStream:
  """Per-label batches (B of every label, or of ``retriever.labels_per_batch`` labels drawn per batch when set)
  of ``items``: ``text_ids/_mask`` (token ids, or with ``cache`` their frozen prefix's states; with
  ``pack_length``, ``text_ids/_owner/_offsets``: the utterances packed several to a row, ``batching.batch_side``,
  and ``item_row`` / ``item_start``), ``first``, ``last``, ``label``."""
  plan = PerLabelBatches(tuple(int(i) for i in items.label_ids), config.retriever.per_label_batch,
                         n=labels_per_batch(config, len(items.label_names)), seed=config.seed)
  tokens = frozen_prefix.cached_or_ids(items.token_ids, cache)
  sides = {"text": (tokens, batching.length_buckets(config.model.max_length))}
  fields = {"first": items.first, "last": items.last, "label": items.label_ids}
  if items.negative_first is not None:
    fields.update(negative_first=items.negative_first, negative_last=items.negative_last,
                  negative_valid=items.negative_valid)
  make_batch = batching.padded_batcher(sides, pad_id, fields, pack_length, row_multiple)
  if pack_length:
    make_batch = _with_item_starts(make_batch)
  return EpochStream(len(items), global_batch, make_batch, seed=config.seed, plan=plan)


def _with_item_starts(make_batch):
  """``make_batch`` of packed rows plus each item's row and start in them (``item_row`` / ``item_start``
  [batch]): an item's ``first`` / ``last`` / negative pieces index its own utterance, which starts there."""
  def packed_batch(indices, epoch, batch_size):
    batch = make_batch(indices, epoch, batch_size)
    batch["item_row"], batch["item_start"] = batching.packed_starts(batch["text_owner"], batch["text_offsets"],
                                                                    batch_size)
    return batch
  return packed_batch


def item_spans(hidden: jax.Array, batch: dict, first: jax.Array, last: jax.Array) -> jax.Array:
  """Span vectors [B, S, 2H] (first + last piece, ``pooling.span_first_last``) of the pieces ``first`` / ``last``
  [B, S] of each item's utterance: row b of ``hidden`` [B, L, H], or with packed rows (``item_row`` in ``batch``)
  the row and offset ``_with_item_starts`` found it at."""
  if "item_row" not in batch:
    return pooling.span_first_last(hidden, first, last)
  length = hidden.shape[1]
  base = (batch["item_row"] * length + batch["item_start"])[:, None]
  flat = hidden.reshape(1, -1, hidden.shape[-1])
  spans = pooling.span_first_last(flat, (base + first).reshape(1, -1), (base + last).reshape(1, -1))
  return spans.reshape(*first.shape, spans.shape[-1])


def labels_per_batch(config, num_labels: int) -> int | None:
  """N of a batch: ``retriever.labels_per_batch`` labels (when set and below the labels there are), else all."""
  n = config.retriever.get("labels_per_batch", 0)
  return n if 0 < n < num_labels else None


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
  batch = global_batch_size(labels_per_batch(config, num_labels) or num_labels, config.retriever.per_label_batch, mesh)
  cfg = ml_collections.ConfigDict(config.to_dict())
  cfg.train.batch_size = batch
  params = {"encoder": model.params}
  axes = {"encoder": transformer.logical_axes(model.config)}
  params, axes, cache = frozen_prefix.freeze(params, axes, model.config, config.train.frozen_prefix_layers,
                                             pad_id=model.tokenizer.pad_id, max_length=config.model.max_length,
                                             dtype=DTYPES[config.model.dtype], batch_size=config.eval.batch_size)
  pack_length, row_multiple = train_run.packing_layout(config, mesh)
  stream = item_stream(items, cfg, batch, model.tokenizer.pad_id, cache, pack_length, row_multiple)
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


# ------------------------------------------------------------------------------------- learning the support

MODES = ("metric", "encoder")


@dataclasses.dataclass(frozen=True)
class SupportTuning:
  """How a slot filler learns from its own support set: ``steps`` full-batch steps of the batch softmax (Eq. 4)
  over the support's gold slot spans, with every other span of up to ``max_words`` words of the support
  utterances as a "none" column, at s = ``cosine_scale`` cos (the similarity retrieval uses), AdamW at a
  constant ``learning_rate``. What learns (``mode``):
    * ``metric``: a linear map W = I + D of the span vectors (``learn_metric``; the encoder stays as it is, so
      a step costs a few matrix products; ``weight_decay`` pulls W back towards I);
    * ``encoder``: the encoder's layers above the embeddings and the lower ``frozen_layers`` layers (their
      states computed once; -1: none frozen), dropout on (``fine_tune``)."""

  steps: int = 50
  learning_rate: float = 1e-3
  mode: str = "metric"
  rank: int = 0  # mode "metric": D = A B of this rank (0: a full matrix)
  cosine_scale: float = 20.0
  frozen_layers: int = 1
  weight_decay: float = 0.0
  max_words: int = 7

  def __post_init__(self):
    if (self.steps < 0 or not self.learning_rate > 0 or self.cosine_scale <= 0 or self.max_words < 1
        or self.mode not in MODES):
      raise ValueError(f"{self}: needs steps >= 0, learning_rate > 0, cosine_scale > 0, max_words >= 1 and a mode "
                       f"in {MODES}")


def learn_support(encoder: SpanEncoder, utterances: Sequence[dict], tuning: SupportTuning, *, seed: int = 0,
                  snapshots: Sequence[int] = ()) -> list[SpanEncoder]:
  """``encoder`` after learning the support set ``utterances`` (``{"tokens", "tags"}``) as ``tuning`` says,
  one ``SpanEncoder`` per step count in ``snapshots`` (default: the last step), in their order; 0 steps is
  ``encoder`` itself."""
  snapshots = sorted(set(snapshots or (tuning.steps,)))
  if snapshots[-1] == 0:
    return [encoder]
  if tuning.mode == "metric":
    return [encoder.with_metric(w) for w in learn_metric(encoder, utterances, tuning, seed=seed, snapshots=snapshots)]
  tuned = fine_tune(encoder.cfg, jax.device_get(encoder.params), encoder.tokenizer, utterances, tuning,
                    max_length=encoder.max_length, seed=seed, snapshots=snapshots, dtype=encoder.dtype)
  return [encoder if n == 0 else SpanEncoder(encoder.cfg, p, encoder.tokenizer, max_length=encoder.max_length,
                                             batch_size=encoder.batch_size, dtype=encoder.dtype,
                                             metric=encoder.metric)
          for n, p in zip(snapshots, tuned)]


def learn_metric(encoder: SpanEncoder, utterances: Sequence[dict], tuning: SupportTuning, *, seed: int = 0,
                 snapshots: Sequence[int] = ()) -> list[np.ndarray]:
  """The span metric W = I + D ([2H, 2H]; D = A B of ``tuning.rank``, or full) after learning the support set
  (``SupportTuning``, mode ``metric``),
  one per step count in ``snapshots``: the gold spans and the other spans of the utterances are encoded once
  (through ``encoder``'s own metric, if any, which W then follows), and only D learns."""
  del seed  # full-batch and no dropout: nothing random
  snapshots = sorted(set(snapshots or (tuning.steps,)))
  gold, others = [], []
  for u in utterances:
    spans = labelled_spans(u["tags"])
    gold.append(spans)
    others.append(unlabelled_spans(len(u["tokens"]), spans, tuning.max_words))
  words = [u["tokens"] for u in utterances]
  z = np.concatenate([np.zeros((0, encoder.dim), np.float32),
                      *encoder.encode(words, [[(s, e) for s, e, _ in g] for g in gold])])
  negatives = np.concatenate([np.zeros((0, encoder.dim), np.float32), *encoder.encode(words, others)])
  labels, names = _label_ids([label for g in gold for _, _, label in g])
  if not len(z):
    raise ValueError("the support set holds no labelled span to learn from")
  # the negatives (every unlabelled span of the support, ~1-2 thousand) dominate a step's work: padded by a
  # sixteenth of an octave, not to the next power of two (masked rows, so the loss is the same)
  m, p = _power_of_two(len(z), 16), max(128, batching.padded_rows(len(negatives), finest=128))
  z_pad, labels_pad, negatives_pad = (np.zeros((m, encoder.dim), np.float32), np.zeros(m, np.int32),
                                      np.zeros((p, encoder.dim), np.float32))
  z_pad[: len(z)], labels_pad[: len(z)], negatives_pad[: len(negatives)] = z, labels, negatives
  step_fn, optimizer = _metric_step(_power_of_two(len(names), 8), float(tuning.cosine_scale), tuning.learning_rate,
                                    tuning.weight_decay)
  if tuning.rank:  # D = A B: B small and random, A zero, so D starts at 0 and A learns first
    b = jax.random.normal(jax.random.key(0), (tuning.rank, encoder.dim), jnp.float32) * 0.01
    delta = {"a": jnp.zeros((encoder.dim, tuning.rank), jnp.float32), "b": b}
  else:
    delta = {"d": jnp.zeros((encoder.dim, encoder.dim), jnp.float32)}
  state, out = optimizer.init(delta), {}
  batch = (jnp.asarray(z_pad), jnp.asarray(labels_pad), jnp.arange(m) < len(z), jnp.asarray(negatives_pad),
           jnp.arange(p) < len(negatives))
  identity = np.eye(encoder.dim, dtype=np.float32)
  base = encoder.metric if encoder.metric is not None else identity
  for step in range(0, tuning.steps + 1):
    if step:
      delta, state = step_fn(delta, state, *batch)
    if step in snapshots:
      host = jax.device_get(delta)
      out[step] = base @ (identity + (host["a"] @ host["b"] if "a" in host else host["d"]))
  return [out[s] for s in snapshots]


@functools.lru_cache(maxsize=16)
def _metric_step(num_labels: int, cosine_scale: float, learning_rate: float, weight_decay: float):
  """(jitted AdamW step of the support loss over D in W = I + D, its optimizer), made once per settings."""
  optimizer = optax.adamw(learning_rate, weight_decay=weight_decay)

  def loss_fn(delta, z, labels, valid, negatives, negatives_valid):
    def mapped(x):
      moved = (x @ delta["a"]) @ delta["b"] if "a" in delta else x @ delta["d"]
      return pooling.l2_normalize(x + moved) * np.sqrt(cosine_scale)
    return batch_softmax_loss(mapped(z), labels, valid, num_labels, "max", mapped(negatives), negatives_valid)[0]

  def step(delta, state, *batch):
    grads = jax.grad(loss_fn)(delta, *batch)
    updates, state = optimizer.update(grads, state, delta)
    return optax.apply_updates(delta, updates), state

  return jax.jit(step), optimizer


def _packed(states: np.ndarray, batch: dict, length: int) -> tuple[jax.Array, dict]:
  """The frozen prefix's ``states`` [U, L, H] of a support batch packed several utterances to a row of ``length``
  (``encoders.packing``: each attends to itself only; the prefix gave each its own positions), and the batch's
  span rows (utterance, first, last) moved to (packed row, first, last) in that row: the layers above the prefix
  then run on ~the real tokens instead of every utterance padded to the longest (a support set of short
  utterances with one long one: a quarter of the work). ``mask`` becomes the block-diagonal [R, length, length].
  R is the rows used rounded up to an even count, not to 8 as training batches are: one support set runs every
  step on the same rows, so each R compiles once for all of them, and SNIPS 5-shot support sets fill 1.8-12.2
  rows of 64 (rounded to 8, 14-79% of the rows' tokens were real: bench/results/retriever_notes.md)."""
  lengths = batch["mask"].sum(axis=1)
  count = int((lengths > 0).sum())  # the utterances; the rows after them pad the batch
  packed = batching.pack_rows([states[u, : lengths[u]] for u in range(count)], length, row_multiple=2)
  row_of, start_of = batching.packed_starts(packed["owner"], packed["offsets"], len(lengths))

  def moved(rows):
    out = rows.copy()
    start = start_of[rows[:, 0]]
    out[:, 0], out[:, 1], out[:, 2] = row_of[rows[:, 0]], start + rows[:, 1], start + rows[:, 2]
    return out

  mask = packing.attention_mask(jnp.asarray(packed["owner"]))
  return jnp.asarray(packed["ids"]), {**batch, "mask": mask, "gold": moved(batch["gold"]),
                                      "others": moved(batch["others"])}


def _support_batch(tokenizer, utterances: Sequence[dict], max_length: int, max_words: int):
  """Token ids [U, L], mask, and the gold spans' (utterance, first, last, label id) and every other span's
  (utterance, first, last), padded to a few shapes; plus the label names."""
  encoded = tokenizer.encode_words([u["tokens"] for u in utterances], max_length)
  gold, others = [], []
  for row, (u, (_, pieces)) in enumerate(zip(utterances, encoded)):
    spans = labelled_spans(u["tags"])
    gold += [(row, pieces[s][0], pieces[e - 1][1], label) for s, e, label in spans if pieces_ok(pieces, (s, e))]
    others += [(row, pieces[s][0], pieces[e - 1][1]) for s, e in unlabelled_spans(len(u["tokens"]), spans, max_words)
               if pieces_ok(pieces, (s, e))]
  label_ids, names = _label_ids([g[3] for g in gold])
  length = batching.bucket_for(max(len(ids) for ids, _ in encoded), batching.length_buckets(max_length, (16, 32, 48)))
  rows = _power_of_two(len(encoded), 8)
  ids = np.full((rows, length), tokenizer.pad_id, np.int32)
  mask = np.zeros((rows, length), np.int32)
  for r, (token_ids, _) in enumerate(encoded):
    ids[r, : len(token_ids)], mask[r, : len(token_ids)] = token_ids, 1

  def padded(entries, width, size):
    out = np.zeros((_power_of_two(len(entries), size), width), np.int32)
    out[: len(entries)] = np.array(entries, np.int32).reshape(len(entries), width) if entries else 0
    return out, np.arange(len(out)) < len(entries)

  gold_rows, gold_valid = padded([g[:3] + (int(l),) for g, l in zip(gold, label_ids)], 4, 16)
  other_rows, other_valid = padded(others, 3, 128)
  return {"ids": ids, "mask": mask, "gold": gold_rows, "gold_valid": gold_valid, "others": other_rows,
          "others_valid": other_valid}, names


def _power_of_two(n: int, least: int) -> int:
  """The smallest power of two >= ``n`` and >= ``least``: support sets of any size share a few shapes."""
  return max(least, 1 << max(n - 1, 0).bit_length())


def fine_tune(cfg: transformer.EncoderConfig, params: dict, tokenizer, utterances: Sequence[dict],
              tuning: SupportTuning, *, max_length: int, seed: int = 0, snapshots: Sequence[int] = (),
              dtype=np.float32) -> list[dict]:
  """The encoder ``params`` after learning the support set ``utterances`` (``{"tokens", "tags"}``) as
  ``tuning`` says (``SupportTuning``), one copy (on the host) per step count in ``snapshots`` (default: the last
  step), in their order; a step count of 0 is the encoder as given. A support set with fewer than two labelled
  spans of a label has nothing to pull together there; its spans are still pushed away from the "none" spans.
  """
  snapshots = sorted(set(snapshots or (tuning.steps,)))
  if snapshots[-1] > tuning.steps or snapshots[0] < 0:
    raise ValueError(f"snapshots {snapshots} must lie in [0, {tuning.steps}]")
  batch, names = _support_batch(tokenizer, utterances, max_length, tuning.max_words)
  if not batch["gold_valid"].any():
    raise ValueError("the support set holds no labelled span to learn from")
  frozen, trainable = (frozen_prefix.split(params, cfg, tuning.frozen_layers) if tuning.frozen_layers >= 0
                       else ({}, params))
  if frozen:
    tokens = frozen_prefix.prefix_batch(frozen, batch["ids"], batch["mask"], cfg=cfg, dtype=dtype)
    tokens, batch = _packed(np.asarray(tokens), batch, max(max_length, batch["ids"].shape[1]))
  else:
    tokens = jnp.asarray(batch["ids"])
  step_fn, optimizer = _tuning_step(cfg, -(-len(names) // 8) * 8, float(tuning.cosine_scale), tuning.learning_rate,
                                    tuning.weight_decay, dtype)
  out, state = {}, optimizer.init(trainable)
  if 0 in snapshots:
    out[0] = params
  rng = jax.random.key(seed)
  arrays = {k: jnp.asarray(v) for k, v in batch.items() if k != "ids"}
  for step in range(1, tuning.steps + 1):
    trainable, state = step_fn(trainable, state, tokens, arrays, rng, step)
    if step in snapshots:
      host = jax.device_get(trainable)
      out[step] = frozen_prefix.merge(jax.device_get(frozen), host) if frozen else host
  return [out[s] for s in snapshots]


def support_loss(trainable: dict, tokens: jax.Array, batch: dict, rng: jax.Array, *, cfg: transformer.EncoderConfig,
                 num_labels: int, cosine_scale: float, dtype, deterministic: bool) -> jax.Array:
  """The support set's batch softmax (Eq. 4 of the Retriever, "max" reduction) over its gold slot spans, every
  other span of its utterances as the "none" column, at ``cosine_scale`` cos: the encoder layers in
  ``trainable`` run on ``tokens`` (ids, or a frozen prefix's states, padded or packed: ``_packed``), a span is
  its first and last pieces' states side by side (``batch["gold"]`` / ``["others"]`` rows: (row, first, last))."""
  hidden = frozen_prefix.encode_tokens(cfg, trainable, tokens, batch["mask"], dtype=dtype,
                                       deterministic=deterministic, rng=rng)
  flat, length = hidden.reshape(-1, hidden.shape[-1]), hidden.shape[1]

  def spans(rows):  # (row, first piece, last piece) -> first+last piece vectors, at scale * cos
    z = jnp.concatenate([flat[rows[:, 0] * length + rows[:, 1]], flat[rows[:, 0] * length + rows[:, 2]]], -1)
    return pooling.l2_normalize(z.astype(jnp.float32)) * np.sqrt(cosine_scale)

  loss, _ = batch_softmax_loss(spans(batch["gold"]), batch["gold"][:, 3], batch["gold_valid"], num_labels, "max",
                               spans(batch["others"]), batch["others_valid"])
  return loss


@functools.lru_cache(maxsize=16)
def _tuning_step(cfg, num_labels: int, cosine_scale: float, learning_rate: float, weight_decay: float, dtype):
  """(jitted AdamW step of the support loss, its optimizer) for ``fine_tune``, made once per encoder and
  settings (``num_labels`` rounded up, so support sets of a few label counts share one program)."""
  adamw = optax.adamw(learning_rate, weight_decay=weight_decay, mask=train_optimizer.weight_decay_mask)
  optimizer = optax.multi_transform(  # what the layers above a frozen prefix only carry stays as it is
      {"train": adamw, "freeze": optax.set_to_zero()},
      lambda params: train_optimizer.freeze_labels(params, None, frozen_prefix.read_only_patterns(params, root="")))

  loss_fn = functools.partial(support_loss, cfg=cfg, num_labels=num_labels, cosine_scale=cosine_scale, dtype=dtype,
                              deterministic=False)

  def step(trainable, state, tokens, batch, rng, number):
    loss, grads = jax.value_and_grad(loss_fn)(trainable, tokens, batch, jax.random.fold_in(rng, number))
    updates, state = optimizer.update(grads, state, trainable)
    return optax.apply_updates(trainable, updates), state

  return jax.jit(step), optimizer
