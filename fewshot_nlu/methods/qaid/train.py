"""QAID (Yehudai et al., 2023): few-shot intent detection as question-answering retrieval, intent names as answers.

Representation (§2.1): z(u) = normalize(Proj(Enc(u))), every token projected to D_P = ``qaid.projection_dim``
(128; 0 = the encoder's width) by a linear layer; relevance = Eq. (1)'s late interaction
(``late_interaction.maxsim_scores``). Queries are truncated at m = ``qaid.query_length`` (32) tokens; intent names
at ``qaid.answer_length`` and padded to the longest in the batch's length bucket. Deviation, measured in
bench/results/qaid.md: ``qaid.projection_init = "warm"`` (default) starts Proj from the encoder's own token
vectors of the training texts (``warm_start.fit``: the identity at full width, their principal directions
below it), so step 0 keeps the pretrained similarity; ``"random"`` is the paper's fresh layer.

Throughput (not in the paper): ``train.frozen_prefix_layers`` = N freezes the embeddings and the lower N layers
(no gradient, no optimizer state, no dropout there; ``frozen_prefix.encode_through_prefix``). The masked views
change at every step, so the prefix is run, not cached.

Development curve: with ``eval.dev_split`` set, the accuracy on that split under ``qaid.match`` is measured
at step 0 and every ``eval.dev_every`` steps (``results.json`` ``dev_curve``, ``metrics.jsonl`` ``dev/accuracy*``;
the other inference modes are scored only in the final evaluation, ``accuracy_by_match``: on every point they
cost more than the selected mode). With ``eval.select_best`` the model of the best-scoring step on it
(``qaid.match``'s accuracy; the earliest on ties) is the one evaluated and exported: it is saved to
``<workdir>/best`` (with ``best.json``: step, accuracy) when it is measured, so an interrupted run resumes
knowing it; without it the last step's model is used. ``eval.patience`` = P stops training when P measurements
in a row have not beaten the best (with ``select_best`` only: without it the last step is kept, so training runs
to the end): the learning-rate schedule is still the full run's, so the kept model is the one the full run would
keep whenever its best comes before such a stretch.

Augmentation (§2.1, §3.2): two views of every text, each with BERT's 80/10/10 token masking
(``data.masking``, ``qaid.mask_rate`` = 0.15) and encoder dropout (the model's own 10%).

Stages (``qaid.stage``):
  * ``pretrain`` (§2.2.1): the train and valid utterances of ``qaid.pretrain_datasets`` (test sets excluded),
    batches of n queries -> 2n views; L^PT = L^self (Eq. 2, tau = 0.07) + lambda * L^mlm (lambda =
    ``qaid.mlm_weight``, 0.1). Exports encoder + MLM head + projection, loadable as ``model.name`` by the
    fine-tuning stage.
  * ``finetune`` (§2.2.2): n few-shot examples per batch -> two query views + two intent-name views = 4n;
    L^FT = L^sup (Eq. 3 over the 4n views, positives = same intent) + lambda_class * L^class +
    lambda_mlm * L^mlm (0.1, 0.05). Batch 32, 10 epochs, lr 1e-5. Then the intent names are indexed and the
    eval split is answered by retrieval (``qaid.model.QAIDModel``); predictions.tsv shows the top names with
    their scores; ``export/`` is the ready-to-use model (``python -m fewshot_nlu.predict --model .../export``).

Ablations (Table 3) as config switches: ``qaid.loss`` = ``npairs`` (one positive, the intent name) or
``triplet`` (the ColBERT baseline: ``qaid.triplets_per_query`` (query, name, BM25-hard negative name) triplets
per query, ColBERT's pairwise softmax loss); ``qaid.similarity = "cosine"`` (pooled vector instead of late
interaction); ``qaid.augment = False`` (no masking, no dropout); w/o pre-training = fine-tune from the
untouched checkpoint (``model.name`` not a pre-training export).

Intent names: the label strings with underscores as spaces, or ``qaid.intent_descriptions`` (a
``label<TAB>description`` file). Unspecified by the paper, chosen here and said where made: the
classification loss is a linear layer on the pooled encoder output of the query views with softmax
cross-entropy (CPFT's head, which QAID inherits); the MLM loss covers the masked tokens of all views.
"""

from __future__ import annotations

import json
import logging
import pathlib
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from fewshot_nlu import config_checks, reports, sharding, workdirs
from fewshot_nlu.data import batching, masking, splits
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import frozen_prefix, pooling, pretrained, transformer
from fewshot_nlu.encoders import projection as projection_head
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.encoders.transformer import DTYPES
from fewshot_nlu.evaluation import knn
from fewshot_nlu.heads import mlm as mlm_head
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.methods.qaid import late_interaction, warm_start
from fewshot_nlu.methods.qaid.bm25 import BM25
from fewshot_nlu.methods.qaid.losses import npairs_loss, pairwise_softmax_loss, supcon_loss
from fewshot_nlu.methods.qaid.model import MATCHES, QAIDModel, intent_name, read_intent_descriptions
from fewshot_nlu.train import run as train_run
from fewshot_nlu.train import selection
from fewshot_nlu.train.metrics import MetricWriter

log = logging.getLogger(__name__)

STAGES = ("pretrain", "finetune")
PROJECTION_INITS = ("warm", "random")
WARM_START_TEXTS = 2048  # at most this many training texts (evenly spaced) fit a narrow warm projection
LOSSES = ("supcon", "npairs", "triplet")
MARKER = "qaid_pretrain.json"


# ---------------------------------------------------------------------------------------------- config

def validate(config: ml_collections.ConfigDict) -> None:
  config_checks.require_choice(config, "qaid.stage", STAGES)
  config_checks.require_choice(config, "qaid.loss", LOSSES)
  config_checks.require_choice(config, "qaid.similarity", late_interaction.SIMILARITIES)
  config_checks.require_choice(config, "qaid.projection_init", PROJECTION_INITS)
  config_checks.require_positive(config, "qaid.query_length", "qaid.answer_length",
                                 "qaid.temperature", "qaid.triplets_per_query")
  if config.qaid.projection_dim < 0:
    raise config_checks.ConfigError(f"config.qaid.projection_dim: {config.qaid.projection_dim} must be >= 0 "
                                    "(0: the encoder's width)")
  train_run.validate_frozen_prefix(config)
  config_checks.require_fraction(config, "qaid.mask_rate")
  for field in ("qaid.mlm_weight", "qaid.class_weight"):
    if config_checks.get(config, field) < 0:
      raise config_checks.ConfigError(f"config.{field}: {config_checks.get(config, field)} must be >= 0")
  if config.qaid.stage == "pretrain":
    train_run.validate_training(config)
    if config.qaid.loss != "supcon":
      raise config_checks.ConfigError(f"config.qaid.loss: {config.qaid.loss!r}; pre-training uses Eq. (2), "
                                      "i.e. 'supcon' with each query its own class")
    if "test" in config.qaid.pretrain_splits:
      raise config_checks.ConfigError("config.qaid.pretrain_splits: the test sets are excluded (§3.2)")
    for dataset in config.qaid.pretrain_datasets:
      splits.prepared_builder(_dataset_config(config, dataset, config.qaid.pretrain_splits))
    return
  builder = train_run.validate_common(config)
  selection.validate(config)
  if config.eval.dev_split:
    splits.require_splits(config, builder, "eval.dev_split", [config.eval.dev_split])
    config_checks.require_positive(config, "eval.dev_every")
  elif config.eval.select_best:
    raise config_checks.ConfigError("config.eval.select_best: needs config.eval.dev_split (the development data "
                                    "the step is selected on)")
  if config.qaid.intent_descriptions:
    path = pathlib.Path(config.qaid.intent_descriptions).expanduser()
    if not path.is_file():
      raise config_checks.ConfigError(f"config.qaid.intent_descriptions: {str(path)!r} is not a file")
  del builder


def _dataset_config(config, dataset: str, splits) -> ml_collections.ConfigDict:
  """``config`` reading ``dataset`` from ``data.dir`` with ``splits`` as its train/eval splits."""
  cfg = ml_collections.ConfigDict(config.to_dict())
  cfg.data.builder, cfg.data.raw_dir = dataset, ""
  cfg.data.train_split, cfg.data.eval_split = splits[0], splits[-1]
  return cfg


def pretraining_texts(config) -> list[str]:
  """The unique utterances of ``qaid.pretrain_splits`` of every ``qaid.pretrain_datasets`` (test excluded)."""
  texts = []
  for dataset in config.qaid.pretrain_datasets:
    cfg = _dataset_config(config, dataset, config.qaid.pretrain_splits)
    builder = splits.prepared_builder(cfg)
    for split in config.qaid.pretrain_splits:
      texts += splits.read_split(cfg, split, builder).texts
  return list(dict.fromkeys(t for t in texts if t.strip()))


# ----------------------------------------------------------------------------------------------- params

def projection_width(model: pretrained.Pretrained, config) -> int:
  """D_P: ``qaid.projection_dim``, or the encoder's width when it is 0."""
  return config.qaid.projection_dim or model.config.hidden_size


def encoder_token_vectors(model: pretrained.Pretrained, texts, max_length: int, batch_size: int) -> np.ndarray:
  """[N, H]: the untouched encoder's output vector of every real token of ``texts`` (truncated at
  ``max_length``), through the shared inference loop."""
  identity = {"kernel": np.eye(model.config.hidden_size, dtype=np.float32),
              "bias": np.zeros(model.config.hidden_size, np.float32)}
  qaid = QAIDModel(model.config, model.params, model.tokenizer, identity, query_length=max_length,
                   answer_length=max_length, batch_size=batch_size)
  vectors, mask = qaid.represent(list(texts), max_length)
  return vectors[mask.astype(bool)]


def initial_projection(model: pretrained.Pretrained, config, texts, rng) -> tuple[dict, str]:
  """(Proj, note): from a QAID pre-training export of the right width if ``model.name`` is one; else
  ``warm_start.fit`` on the encoder's token vectors of ``texts`` (``qaid.projection_init = "warm"``), or a
  fresh random layer (``"random"``, the paper's)."""
  width = projection_width(model, config)
  projection = projection_head.load(model.directory, file=late_interaction.PROJECTION_FILE)
  if projection is not None and projection["kernel"].shape == (model.config.hidden_size, width):
    return projection, f"from {model.directory}"
  if config.qaid.projection_init == "random":
    return (jax.device_get(projection_head.init(rng, model.config.hidden_size, width)),
            "initialised at random (the checkpoint has no QAID projection of this size)")
  texts = list(texts)
  if width >= model.config.hidden_size:
    return warm_start.fit(np.zeros((0, model.config.hidden_size)), width), (
        "warm: the identity (the encoder's own token vectors)")
  sample = texts[:: max(1, len(texts) // WARM_START_TEXTS)][:WARM_START_TEXTS]  # spread over all the texts
  tokens = encoder_token_vectors(model, sample, config.qaid.query_length, config.eval.batch_size)
  projection = warm_start.fit(tokens, width)
  kept = warm_start.retained_fraction(tokens, projection)
  return projection, (f"warm: the top {width} principal directions of the encoder's {len(tokens)} token vectors "
                      f"of {len(sample)} training texts ({kept:.1%} of their squared norm kept)")


def init_params(model: pretrained.Pretrained, config, num_intents: int, texts=()) -> tuple[dict, dict, dict]:
  """(params, logical axes, notes): the encoder, the projection (``initial_projection``; ``texts`` fit a warm
  one), the MLM head (from the checkpoint, else fresh — noted), and for fine-tuning with lambda_class > 0 a
  fresh linear intent classifier."""
  rng = jax.random.key(config.seed)
  notes = {}
  projection, notes["projection"] = initial_projection(model, config, texts, jax.random.fold_in(rng, 1))
  params = {"encoder": model.params, "projection": projection}
  axes = {"encoder": transformer.logical_axes(model.config), "projection": projection_head.logical_axes()}
  if config.qaid.mlm_weight > 0:
    head, found = mlm_head.from_checkpoint(model.heads, model.config, jax.random.fold_in(rng, 2))
    notes["mlm_head"] = f"from {model.directory}" if found else (
        "initialised: the checkpoint has no MLM head (cls.predictions.* / lm_head.*)")
    if not found:
      log.warning("%s has no MLM head; QAID's MLM loss trains a freshly initialised one", model.source)
    params["mlm"], axes["mlm"] = jax.device_get(head), mlm_head.logical_axes()
  if config.qaid.stage == "finetune" and config.qaid.class_weight > 0:
    params["classifier"] = jax.device_get(projection_head.init(jax.random.fold_in(rng, 3),
                                                               model.config.hidden_size, num_intents))
    axes["classifier"] = projection_head.logical_axes()
  return params, axes, notes


def export_heads(params, cfg: transformer.EncoderConfig, heads: dict) -> dict:
  """The checkpoint's other heads, with the trained MLM head (if any) in place of its own."""
  heads = {k: v for k, v in heads.items() if not k.startswith(("cls.predictions", "lm_head"))}
  if "mlm" in params:
    heads.update(mlm_head.to_checkpoint(params["mlm"], cfg,
                                        params["encoder"]["embeddings"]["word_embeddings"]["embedding"]))
  return heads


# ------------------------------------------------------------------------------------------------- loss

def make_loss_fn(cfg: transformer.EncoderConfig, tokenizer, config):
  q = config.qaid
  dtype = DTYPES[config.model.dtype]
  special = tuple(i for i in (tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id) if i is not None)
  if q.augment or q.mlm_weight > 0:
    if tokenizer.mask_id is None:
      raise config_checks.ConfigError("config.qaid.augment: the tokenizer has no mask token ([MASK] / <mask>)")
  pool = pooling.get_pooler(config.model.pooling)
  frozen_layers = config.train.frozen_prefix_layers

  def mask_tokens(rng, ids, mask):
    return masking.bert_mask(rng, ids, mask, mask_id=tokenizer.mask_id, vocab_size=cfg.vocab_size,
                             special_ids=special, rate=q.mask_rate)

  def encode(params, ids, mask, rng, *, augment):
    """(z, z mask, hidden, Masked or None) of one view of each row: masked + dropout when ``augment``."""
    mask_rng, dropout_rng = jax.random.split(rng)
    masked = mask_tokens(mask_rng, ids, mask) if augment else None
    hidden = frozen_prefix.encode_through_prefix(cfg, params["encoder"], masked.input_ids if augment else ids,
                                                 mask, frozen_layers, dtype=dtype,
                                                 deterministic=not augment, rng=dropout_rng)
    z, z_mask = late_interaction.represent(params["projection"], hidden, mask, q.similarity, config.model.pooling)
    return z, z_mask, hidden, masked

  def mlm_term(params, ids, mask, views, rng):
    """MLM over the masked tokens of the views (or, without augmentation, of one extra masked pass)."""
    if q.mlm_weight <= 0:
      return jnp.zeros(())
    embeddings = params["encoder"]["embeddings"]["word_embeddings"]["embedding"]
    if frozen_layers >= 0:  # the tied decoder is the frozen word embeddings: no gradient into them
      embeddings = jax.lax.stop_gradient(embeddings)
    if views is None:
      masked = mask_tokens(rng, ids, mask)
      hidden = frozen_prefix.encode_through_prefix(cfg, params["encoder"], masked.input_ids, mask, frozen_layers,
                                                   dtype=dtype)
      views = [(hidden, masked)]
    losses = [mlm_head.mlm_loss(params["mlm"], h, m, embeddings, cfg) for h, m in views]
    return sum(losses) / len(losses)

  def two_views(params, ids, mask, rng):
    """Both views of each row stacked ([2B, ...]) in one encoder pass."""
    ids2, mask2 = jnp.concatenate([ids, ids]), jnp.concatenate([mask, mask])
    z, z_mask, hidden, masked = encode(params, ids2, mask2, rng, augment=q.augment)
    return z, z_mask, hidden, masked, mask2

  def pad_to(x, length):
    return jnp.pad(x, [(0, 0), (0, length - x.shape[1])] + [(0, 0)] * (x.ndim - 2))

  def pretrain_loss(params, batch, rng):
    view_rng, mlm_rng = jax.random.split(rng)
    z, z_mask, hidden, masked, _ = two_views(params, batch["text_ids"], batch["text_mask"], view_rng)
    n = batch["text_ids"].shape[0]
    labels = jnp.concatenate([jnp.arange(n), jnp.arange(n)])
    valid = jnp.concatenate([batch["valid"], batch["valid"]])
    scores = late_interaction.maxsim_scores(z, z_mask, z, z_mask, chunk=q.score_chunk or None)
    contrastive = supcon_loss(scores, labels, valid, temperature=q.temperature)
    mlm = mlm_term(params, batch["text_ids"], batch["text_mask"], None if masked is None else [(hidden, masked)],
                   mlm_rng)
    return contrastive + q.mlm_weight * mlm, {"contrastive": contrastive, "mlm": mlm}

  def classification_term(params, hidden, mask, labels, valid):
    if "classifier" not in params:
      return jnp.zeros(())
    logits = projection_head.linear(params["classifier"], pool(hidden, mask))
    return mlp_head.loss(logits, jax.nn.one_hot(labels, logits.shape[-1]), valid.astype(jnp.float32),
                         multilabel=False, label_smoothing=0.0)

  def finetune_loss(params, batch, rng):
    q_rng, a_rng, mlm_rng = jax.random.split(rng, 3)
    zq, mq, hq, masked_q, qmask = two_views(params, batch["query_ids"], batch["query_mask"], q_rng)
    za, ma, ha, masked_a, _ = two_views(params, batch["answer_ids"], batch["answer_mask"], a_rng)
    length = max(zq.shape[1], za.shape[1])
    z = jnp.concatenate([pad_to(zq, length), pad_to(za, length)])
    z_mask = jnp.concatenate([pad_to(mq, length), pad_to(ma, length)])
    label = jnp.where(batch["valid"], batch["label"], -1)
    labels = jnp.concatenate([label] * 4)  # [q view 1, q view 2, name view 1, name view 2]
    valid = labels >= 0
    n = batch["query_ids"].shape[0]
    scores = late_interaction.maxsim_scores(z, z_mask, z, z_mask, chunk=q.score_chunk or None)
    if q.loss == "supcon":
      contrastive = supcon_loss(scores, labels, valid, temperature=q.temperature)
    else:  # npairs: query view v of row i (index t = v n + i) -> name view v of row i (index 2n + t)
      partner = jnp.concatenate([jnp.arange(2 * n) + 2 * n, jnp.zeros(2 * n, jnp.int32)])  # names: no anchor
      anchors = jnp.concatenate([jnp.ones(2 * n, bool), jnp.zeros(2 * n, bool)])
      contrastive = npairs_loss(scores, labels, partner, anchors, temperature=q.temperature)
    # MLM over the masked tokens of all 4n views; without augmentation, over one extra masked pass of the queries.
    views = None if masked_q is None else [(hq, masked_q), (ha, masked_a)]
    mlm = mlm_term(params, batch["query_ids"], batch["query_mask"], views, mlm_rng)
    classification = classification_term(params, hq, qmask, labels[: 2 * n], valid[: 2 * n])
    loss = contrastive + q.class_weight * classification + q.mlm_weight * mlm
    return loss, {"contrastive": contrastive, "classification": classification, "mlm": mlm}

  def triplet_loss(params, batch, rng):
    q_rng, p_rng, n_rng = jax.random.split(rng, 3)
    zq, mq, _, _ = encode(params, batch["query_ids"], batch["query_mask"], q_rng, augment=q.augment)
    zp, mp, _, _ = encode(params, batch["positive_ids"], batch["positive_mask"], p_rng, augment=q.augment)
    zn, mn, _, _ = encode(params, batch["negative_ids"], batch["negative_mask"], n_rng, augment=q.augment)
    positive = late_interaction.maxsim_pairs(zq, mq, zp, mp)
    negative = late_interaction.maxsim_pairs(zq, mq, zn, mn)
    loss = pairwise_softmax_loss(positive, negative, batch["valid"])
    return loss, {"contrastive": loss}

  if q.stage == "pretrain":
    return pretrain_loss
  return triplet_loss if q.loss == "triplet" else finetune_loss


# ---------------------------------------------------------------------------------------------- batches

def text_stream(texts, tokenizer, config, batch_size: int) -> EpochStream:
  """Pre-training batches: ``text_ids``/``text_mask`` of n queries (length-bucketed) and ``valid``."""
  sides = {"text": (tokenizer.encode(texts, config.qaid.query_length),
                    batching.length_buckets(config.qaid.query_length))}
  return EpochStream(len(texts), batch_size, batching.padded_batcher(sides, tokenizer.pad_id),
                     seed=config.seed)


def _queries_and_answers(texts, answers, tokenizer, config):
  """(query token ids, answer token ids, query buckets, answer buckets)."""
  return (tokenizer.encode(texts, config.qaid.query_length), tokenizer.encode(answers, config.qaid.answer_length),
          batching.length_buckets(config.qaid.query_length), batching.length_buckets(config.qaid.answer_length))


def example_stream(texts, label_ids: np.ndarray, answers: list[str], tokenizer, config, batch_size: int
                   ) -> EpochStream:
  """Fine-tuning batches: each example's query and its intent's answer (``query_*``, ``answer_*``), its
  ``label`` id and ``valid``."""
  query_ids, answer_ids, q_buckets, a_buckets = _queries_and_answers(texts, answers, tokenizer, config)
  sides = {"query": (query_ids, q_buckets), "answer": ([answer_ids[l] for l in label_ids], a_buckets)}
  make_batch = batching.padded_batcher(sides, tokenizer.pad_id, {"label": np.asarray(label_ids, np.int32)})
  return EpochStream(len(texts), batch_size, make_batch, seed=config.seed)


def triplet_stream(texts, label_ids: np.ndarray, answers: list[str], tokenizer, config, batch_size: int
                   ) -> EpochStream:
  """ColBERT baseline batches: ``qaid.triplets_per_query`` (query, its answer, a BM25-hard negative answer)
  triplets per training query (negatives: the highest-BM25 wrong answers, §3.3.1)."""
  bm25 = BM25(answers)
  per_query = config.qaid.triplets_per_query
  queries, negatives = [], []
  for i, text in enumerate(texts):
    queries += [i] * per_query
    negatives += bm25.hard_negatives(text, int(label_ids[i]), per_query)
  query_ids, answer_ids, q_buckets, a_buckets = _queries_and_answers(texts, answers, tokenizer, config)
  sides = {"query": ([query_ids[q] for q in queries], q_buckets),
           "positive": ([answer_ids[label_ids[q]] for q in queries], a_buckets),
           "negative": ([answer_ids[a] for a in negatives], a_buckets)}
  return EpochStream(len(queries), batch_size, batching.padded_batcher(sides, tokenizer.pad_id), seed=config.seed)


# ------------------------------------------------------------------------------------------------- run

def intent_answers(config, labels: list[str]) -> list[str]:
  """The answer text of every label: ``qaid.intent_descriptions`` where given, else ``intent_name``."""
  descriptions = {}
  if config.qaid.intent_descriptions:
    path = pathlib.Path(config.qaid.intent_descriptions).expanduser()
    descriptions = read_intent_descriptions(path)
    unknown = sorted(set(descriptions) - set(labels))
    if unknown:
      log.warning("%s describes %d labels the data does not have: %s", path, len(unknown), unknown[:5])
  return [descriptions.get(l, intent_name(l)) for l in labels]


def retrieval_model(config, model: pretrained.Pretrained, params: dict, labels, answers, train_split) -> QAIDModel:
  """The QAID retrieval model of ``params`` (encoder + projection) answering with ``qaid.match``: ``answers``
  indexed as the labels' and the training examples beside them (scored under qq+qa and intent_doc)."""
  qaid = QAIDModel(model.config, params["encoder"], model.tokenizer, params["projection"],
                   similarity=config.qaid.similarity, pooling_mode=config.model.pooling,
                   query_length=config.qaid.query_length, answer_length=config.qaid.answer_length,
                   match=config.qaid.match, batch_size=config.eval.batch_size, dtype=DTYPES[config.model.dtype])
  qaid.add_answers(labels, answers)
  qaid.add_examples(train_split.texts, train_split.labels)
  return qaid


def accuracy_by_match(qaid: QAIDModel, split, matches: tuple[str, ...] = MATCHES) -> dict[str, float]:
  """The accuracy on ``split`` of each inference mode in ``matches`` (default: every one, ``model.MATCHES``) of
  the same model."""
  out = {}
  for match, (scores, rows) in qaid.match_row_scores(split.texts, matches).items():
    predicted = np.array(qaid.labels)[qaid.label_scores(scores, rows).argmax(axis=1)]
    out[match] = round(float(np.mean(predicted == np.array(split.labels))), 6)
  return out


def dev_curve_callback(config, model: pretrained.Pretrained, labels, answers, train_split, writer, curve: list,
                       workdir: pathlib.Path):
  """``(measure, callback)`` recording the accuracy on ``eval.dev_split`` at step 0 and every
  ``eval.dev_every`` steps into ``curve`` and ``dev/accuracy`` under ``qaid.match`` only (``by_match`` holds that
  one mode; the final evaluation scores every mode: the other modes' late interaction over every example row
  costs more than the mode itself); with ``eval.select_best`` a better model is saved to ``<workdir>/best``, and
  with ``eval.patience`` = P the callback stops training once P measurements (P x ``eval.dev_every`` steps) have
  passed without a better one (counted from the best step, so a resumed run stops alike). ``(None, None)``
  without a dev split."""
  if config.qaid.stage != "finetune" or not config.eval.dev_split:
    return None, None
  dev = splits.read_split(config, config.eval.dev_split)
  best = selection.read_best(workdir) or {"step": None, "accuracy": -1.0}

  def measure(step: int, params: dict) -> None:
    start = time.perf_counter()
    qaid = retrieval_model(config, model, params, labels, answers, train_split)
    by_match = accuracy_by_match(qaid, dev, (config.qaid.match,))
    if config.eval.select_best and by_match[config.qaid.match] > best["accuracy"]:
      best.update(step=step, accuracy=by_match[config.qaid.match])
      if jax.process_index() == 0:
        qaid.save(selection.best_dir(workdir), encoder_heads=export_heads(params, model.config, model.heads))
      selection.write_best(workdir, best)
    curve.append({"step": step, "accuracy": by_match[config.qaid.match], "by_match": by_match,
                  "seconds": round(time.perf_counter() - start, 1)})
    writer.write(step, {"accuracy": by_match[config.qaid.match],
                        **{f"accuracy_{m.replace('+', '_')}": a for m, a in by_match.items()}}, prefix="dev/")
    log.info("step %d: %s accuracy %s", step, config.eval.dev_split, by_match)

  def callback(step: int, state) -> bool:
    measure(step, sharding.to_host(state.params))
    return selection.patience_exhausted(config, step, best["step"])

  return measure, callback


def run(config: ml_collections.ConfigDict, workdir: pathlib.Path) -> dict:
  model = pretrained.load_pretrained(config.model.name)
  for field in ("qaid.query_length", "qaid.answer_length"):
    if config_checks.get(config, field) > model.config.max_length:
      raise config_checks.ConfigError(f"config.{field}: {config_checks.get(config, field)} exceeds the model's "
                                      f"{model.config.max_length} positions")
  train_run.check_frozen_prefix_depth(config, model.config)
  mesh, batch_size = train_run.mesh_and_batch(config)
  writer = MetricWriter(workdir)
  tok = model.tokenizer
  if config.qaid.stage == "pretrain":
    texts = pretraining_texts(config)
    log.info("QAID pre-training on %d utterances of %s", len(texts), "+".join(config.qaid.pretrain_datasets))
    stream, labels, answers = text_stream(texts, tok, config, batch_size), [], []
    results = {"utterances": len(texts)}
    warm_texts = texts
  else:
    train_split, eval_split = splits.read_splits(config)
    splits.warn_unseen_labels(train_split, eval_split)
    labels = train_split.label_names
    answers = intent_answers(config, labels)
    index = {l: i for i, l in enumerate(labels)}
    label_ids = np.array([index[l] for l in train_split.labels], np.int32)
    make = triplet_stream if config.qaid.loss == "triplet" else example_stream
    stream = make(train_split.texts, label_ids, answers, tok, config, batch_size)
    results = {"train_examples": len(train_split.texts), "intents": len(labels)}
    warm_texts = list(train_split.texts) + answers
  params, axes, notes = init_params(model, config, len(labels), warm_texts)
  # a frozen prefix: the optimizer leaves the embeddings and lower layers alone (the loss stops their gradient)
  run_config = ml_collections.ConfigDict(config.to_dict())
  run_config.train.frozen = tuple(config.train.frozen) + frozen_prefix.frozen_param_patterns(
      model.config, config.train.frozen_prefix_layers)
  curve: list[dict] = []
  measure, callback = dev_curve_callback(config, model, labels, answers,
                                         None if config.qaid.stage == "pretrain" else train_split, writer, curve,
                                         workdir)
  start = time.perf_counter()
  if measure is not None:
    measure(0, params)
  params, steps = train_run.train(run_config, workdir, params, axes, make_loss_fn(model.config, tok, config),
                                  stream, mesh, writer, callback=callback,
                                  callback_every=config.eval.dev_every if callback else 0)
  results.update(steps=steps, train_seconds=round(time.perf_counter() - start, 1), init=notes,
                 batch_size=config.train.batch_size)
  if curve:  # train_seconds includes the curve's evaluations after step 0: dev_curve_seconds says how much
    results["dev_curve"] = curve
    results["dev_curve_seconds"] = round(sum(p["seconds"] for p in curve[1:]), 1)
  heads = export_heads(params, model.config, model.heads)
  if config.qaid.stage == "pretrain":
    if jax.process_index() == 0:
      with workdirs.atomic_folder(workdir / "export") as export:
        pretrained.save_pretrained(export, model.config, params["encoder"], tok, heads)
        projection_head.save(export, params["projection"], file=late_interaction.PROJECTION_FILE,
                             activation="none")
        (export / MARKER).write_text(json.dumps({"base_model": config.model.name, "steps": steps,
                                                 "utterances": results["utterances"]}, indent=1) + "\n")
  else:
    qaid = retrieval_model(config, model, params, labels, answers, train_split)
    selected = selection.read_best(workdir) if config.eval.select_best else None
    if selected:
      results.update(selected_step=selected["step"], selected_dev_accuracy=selected["accuracy"])
      best = selection.best_dir(workdir)
      qaid = QAIDModel.load(best, batch_size=config.eval.batch_size, dtype=DTYPES[config.model.dtype])
      heads = dict(pretrained.load_pretrained(str(best)).heads)
    start = time.perf_counter()
    evaluation = knn.evaluate(qaid, eval_split, workdir)
    results.update(evaluation.results)
    results["eval_seconds"] = round(time.perf_counter() - start, 1)
    results["accuracy_by_match"] = accuracy_by_match(qaid, eval_split)  # every inference mode, the same model
    start = time.perf_counter()  # one scoring pass: of held-out in-scope texts, or the examples left out
    if config.eval.calibration_split:
      held_out = splits.read_split(config, config.eval.calibration_split)
      results["rejection"] = qaid.calibrate_rejection(
          texts=held_out.texts, source=f"{config.data.builder}/{config.eval.calibration_split}").to_dict()
    else:
      log.warning("out-of-scope threshold: from the training queries left out one at a time under a model trained "
                  "on them, so it rejects more new in-scope utterances than its 10%% (held-out texts calibrate it: "
                  "fit(..., validation=...), --config.eval.calibration_split)")
      results["rejection"] = qaid.calibrate_rejection().to_dict()
    results["rejection_seconds"] = round(time.perf_counter() - start, 1)
    if jax.process_index() == 0:
      with workdirs.atomic_folder(workdir / "export") as export:
        qaid.save(export, encoder_heads=heads)
    untouched = SentenceEncoder.from_config(config, model.config, model.params, tok,
                                            max_length=config.qaid.query_length)
    results.update(reports.write_run_report(  # costs two encoding passes of the eval split
        workdir, eval_split.labels, [p.label for p in evaluation.predictions], texts=eval_split.texts,
        title=f"QAID on {config.data.builder}/{config.data.eval_split}",
        embeddings={f"{reports.UNTOUCHED} (pooled)": lambda: untouched.encode(eval_split.texts, show_progress=True),
                    f"{reports.SPECIALISED} (QAID: mean of z)": lambda: qaid.sentence_vectors(eval_split.texts)}))
    results.update(dataset=config.data.builder, train_split=config.data.train_split,
                   eval_split=config.data.eval_split, loss=config.qaid.loss, similarity=config.qaid.similarity,
                   augment=config.qaid.augment, match=config.qaid.match)
    writer.write(steps, {"accuracy": results["accuracy"]}, prefix="eval/")
  writer.close()
  results.update(method=config.method, stage=config.qaid.stage, model=config.model.name)
  return workdirs.write_results(workdir, results)
