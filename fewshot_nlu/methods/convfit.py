"""ConvFiT Stage 2 (task-tailored conversational fine-tuning, §2.2) and intent detection by similarity.

Variants of Table 2, chosen by config:
  * LM / LM+S1: ``stage2.enabled = False`` with ``model.name`` = the input LM or a Stage 1 export
    (``methods.convfit_stage1``), classified by k-NN or by the MLP baseline (``classifier.kind = "mlp"``);
  * LM+S2 / LM+S1+S2: ``stage2.enabled = True``; ``stage2.loss`` = ``ocl`` | ``cos`` | ``smax``;
  * RAND: ``model.init = "random"`` (the LM's architecture and tokenizer, random weights).

Stage 2 encodes utterances with the LM, mean-pools, and applies a d_o = 512 tanh down-projection
(``heads.projection``); the pair loss (``losses.pairs``) pulls same-intent pairs together. Two ways to sample
pairs (``stage2.sampling``):
  * ``paper``: the pair sets PP / NP of §2.2 (every same-intent pair, 2n random negatives per positive),
    shuffled each epoch and cut into batches of ``train.batch_size`` pairs; each step encodes 2 x batch
    utterances. BANKING77 10-shot with n = 3 has 24,255 pairs: 758 steps per epoch.
  * ``fast``: batches of P intents x K utterances (``data.samplers.ClassBalancedBatches``, K =
    ``stage2.examples_per_class``, P = batch / K), each utterance encoded once, and the pair loss applied to
    all B(B-1)/2 in-batch pairs (same intent = positive). An epoch is one pass over the utterances
    (BANKING77 10-shot: 28 steps of 32), so an epoch costs ~1/50 of the paper mode's encoder passes. Not in
    the paper; see ``bench/results/convfit.md`` for how it compares. Each batch is encoded in
    ``stage2.length_groups`` length-sorted sub-batches (``batching.pad_in_length_groups``) to pad less.

Inference (``fewshot_nlu.intent_model``): k-NN by cosine in the specialised (projected) space over the
training pool, plus any ``eval.extra_pool_splits`` (inference-time pool augmentation, Figure 6).
"""

from __future__ import annotations

import logging
import pathlib
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from jax.sharding import PartitionSpec as P

from fewshot_nlu import config_checks, sharding
from fewshot_nlu.data import batching, samplers
from fewshot_nlu.data.intent_folder import IntentSplit
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import adapters, pooling, pretrained, transformer
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.heads import projection as projection_head
from fewshot_nlu.intent_model import CLASSIFIERS, IntentModel
from fewshot_nlu.losses import pairs as pair_losses
from fewshot_nlu.methods import common
from fewshot_nlu.train.metrics import MetricWriter

log = logging.getLogger(__name__)

LOSSES = ("ocl", "cos", "smax")
SAMPLINGS = ("fast", "paper")
INITS = ("pretrained", "random")


def validate(config: ml_collections.ConfigDict) -> None:
  builder = common.validate_common(config)
  config_checks.require_choice(config, "model.init", INITS)
  config_checks.require_choice(config, "stage2.loss", LOSSES)
  config_checks.require_choice(config, "stage2.sampling", SAMPLINGS)
  config_checks.require_choice(config, "classifier.kind", CLASSIFIERS)
  config_checks.require_positive(config, "classifier.k", "classifier.mlp.epochs",
                                 "classifier.mlp.batch_size", "classifier.mlp.learning_rate")
  config_checks.require_fraction(config, "classifier.mlp.dropout")
  if config.stage2.projection_dim < 0 or config.stage2.negatives < 0:
    raise config_checks.ConfigError("config.stage2.projection_dim and config.stage2.negatives must be >= 0")
  if config.stage2.sampling == "fast":
    config_checks.require_positive(config, "stage2.examples_per_class")
    validate_length_groups(config)
    if config.train.batch_size % config.stage2.examples_per_class:
      raise config_checks.ConfigError(
          f"config.stage2.examples_per_class: {config.stage2.examples_per_class} does not divide "
          f"config.train.batch_size={config.train.batch_size} (fast sampling fills batches with P intents x K "
          "utterances)")
  common.require_splits(config, builder, "eval.extra_pool_splits", config.eval.extra_pool_splits)


def validate_length_groups(config: ml_collections.ConfigDict) -> None:
  """``stage2.length_groups`` (sub-batches of the all-pairs stream) is >= 1 and divides the batch."""
  if config.stage2.length_groups < 1 or config.train.batch_size % config.stage2.length_groups:
    raise config_checks.ConfigError(
        f"config.stage2.length_groups: {config.stage2.length_groups} must be >= 1 and divide "
        f"config.train.batch_size={config.train.batch_size}")


# ---------------------------------------------------------------------------------------------- the loss

def embed_fn(cfg: transformer.EncoderConfig, config: ml_collections.ConfigDict):
  """``embed(params, ids, mask, rng)``: encoder (dropout on) -> pooling -> down-projection if present. With
  ``stage2.mode = "adapter"`` (Multi-ConvFiT's C-ADAPT) gradients reach only the encoder's adapters."""
  dtype = common.DTYPES[config.model.dtype]
  pool = pooling.get_pooler(config.model.pooling)

  adapter_only = config.stage2.get("mode", "fft") == "adapter"

  def embed(params, ids, mask, rng):
    encoder_params = adapters.freeze_base(params["encoder"]) if adapter_only else params["encoder"]
    module = transformer.encoder_for(cfg, encoder_params, dtype)
    hidden = module.apply({"params": encoder_params}, ids, mask, deterministic=False, rngs={"dropout": rng})
    vectors = pool(hidden, mask)
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
    a = embed(params, batch["first_ids"], batch["first_mask"], first_rng)
    b = embed(params, batch["second_ids"], batch["second_mask"], second_rng)
    return pair_loss(params, a, b, batch["positive"], batch["valid"]), {}

  def fast_loss(params, batch, rng):
    groups = sorted({k.rsplit("_", 1)[1] for k in batch if k.startswith("ids_")}, key=int)
    vectors = jnp.concatenate([embed(params, batch[f"ids_{g}"], batch[f"mask_{g}"], jax.random.fold_in(rng, int(g)))
                               for g in groups])
    first, second = all_pairs(vectors.shape[0])
    positive = in_batch_positive(batch, first, second)
    valid = batch["valid"][first] & batch["valid"][second]
    return pair_loss(params, vectors[first], vectors[second], positive, valid), {
        "positive_pairs": jnp.sum(positive & valid).astype(jnp.float32)}

  return fast_loss if config.stage2.sampling == "fast" else paper_loss


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


def fast_stream(split: IntentSplit, label_ids: dict, tokenizer, config, host_batch: int, mesh) -> EpochStream:
  """P intents x K utterances per batch (``samplers.ClassBalancedBatches``), for the all-pairs loss."""
  labels = np.array([label_ids[l] for l in split.labels], np.int32)
  k = config.stage2.examples_per_class
  p = host_batch // k
  if p > len(label_ids) or p < 2:
    raise config_checks.ConfigError(
        f"config.stage2.examples_per_class: batches of {host_batch} with K={k} hold P={p} intents, but fast "
        f"sampling needs 2 <= P <= {len(label_ids)} (the intents of {split.source})")
  plan = samplers.ClassBalancedBatches(tuple(int(l) for l in labels), p, k, seed=config.seed)
  return in_batch_stream(split.texts, {"label": labels}, tokenizer, config, host_batch, mesh, plan)


def in_batch_stream(texts, fields: dict[str, np.ndarray], tokenizer, config, host_batch: int, mesh,
                    plan=None) -> EpochStream:
  """Batches of utterances for the all-pairs loss: each batch's token ids in ``stage2.length_groups``
  length-sorted sub-batches (``ids_<g>`` / ``mask_<g>``), ``valid``, and each of ``fields`` (per-utterance
  arrays: ``label`` or ``label_sets``) in the same row order. ``plan``: a batch plan (default: shuffled)."""
  groups = config.stage2.length_groups
  if (config.train.batch_size // groups) % sharding.data_parallel_size(mesh):
    raise config_checks.ConfigError(
        f"config.stage2.length_groups: {groups} groups of {config.train.batch_size // groups} rows do not split "
        f"over the {sharding.data_parallel_size(mesh)} data-parallel devices of mesh {dict(mesh.shape)}")
  token_ids = tokenizer.encode(texts, config.model.max_length)
  buckets = batching.length_buckets(config.model.max_length)

  def make_batch(indices, epoch, batch_size):
    order, padded = batching.pad_in_length_groups([token_ids[i] for i in indices], groups, buckets,
                                                  tokenizer.pad_id, batch_size)
    batch = {"valid": _valid(len(indices), batch_size)}
    for name, values in fields.items():
      column = np.zeros((batch_size, *values.shape[1:]), values.dtype)
      column[: len(indices)] = values[np.asarray(indices)[order]]
      batch[name] = column
    for g, part in enumerate(padded):
      batch[f"ids_{g}"], batch[f"mask_{g}"] = part["input_ids"], part["attention_mask"]
    return batch

  return EpochStream(len(texts), host_batch, make_batch, seed=config.seed, plan=plan)


def paper_stream(texts, pairs: samplers.Pairs, tokenizer, config, host_batch: int) -> EpochStream:
  """Batches of ``train.batch_size`` pairs (indices into ``texts``), each side padded to its own bucket."""
  token_ids = tokenizer.encode(texts, config.model.max_length)
  log.info("paper sampling: %d positive + %d negative pairs", pairs.positive.sum(), (~pairs.positive).sum())
  buckets = batching.length_buckets(config.model.max_length)
  first = [token_ids[i] for i in pairs.first]
  second = [token_ids[i] for i in pairs.second]
  make_batch = batching.padded_batcher({"first": (first, buckets), "second": (second, buckets)},
                                       tokenizer.pad_id, {"positive": pairs.positive})
  return EpochStream(len(pairs), host_batch, make_batch, seed=config.seed)


# ----------------------------------------------------------------------------------------------- params

def _linear_init(rng, n_in, n_out):
  return mlp_head.init(rng, (n_in, n_out))[0]


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
  if config.model.init == "random":
    model.params = jax.device_get(transformer.init_params(model.config, jax.random.key(config.seed)))
    model.heads = {}
  return model


# ------------------------------------------------------------------------------------------------- run

def run(config: ml_collections.ConfigDict, workdir: pathlib.Path) -> dict:
  train_split, eval_split = common.read_splits(config)
  common.warn_unseen_labels(train_split, eval_split)
  model = load_encoder(config)
  timings = {}

  def sentence_encoder(encoder_params, projection=None):
    return SentenceEncoder(model.config, encoder_params, model.tokenizer, pooling_mode=config.model.pooling,
                           max_length=config.model.max_length, batch_size=config.eval.batch_size,
                           dtype=common.DTYPES[config.model.dtype], projection=projection)

  writer = MetricWriter(workdir)
  results, steps = {}, 0
  if config.eval.before_training and config.stage2.enabled:
    untouched = common.nearest_neighbour_eval(sentence_encoder(model.params), train_split, eval_split, workdir,
                                              "predictions_before_training")
    results["accuracy_before_training"] = untouched["accuracy"]
  params = {"encoder": model.params}
  if config.stage2.enabled:
    params, axes = stage2_params(model.params, model.config, config)
    mesh, host_batch = common.mesh_and_host_batch(config)
    label_ids = {l: i for i, l in enumerate(train_split.label_names)}
    if config.stage2.sampling == "fast":
      stream = fast_stream(train_split, label_ids, model.tokenizer, config, host_batch, mesh)
    else:
      pairs = samplers.convfit_pairs(train_split.labels, config.stage2.negatives, seed=config.seed)
      stream = paper_stream(train_split.texts, pairs, model.tokenizer, config, host_batch)
    start = time.perf_counter()
    params, steps = common.train(config, workdir, params, axes, make_loss_fn(model.config, config), stream, mesh,
                                 writer)
    timings["stage2_seconds"] = time.perf_counter() - start
    per_step = config.train.batch_size * (1 if config.stage2.sampling == "fast" else 2)
    results["encoder_passes"] = steps * per_step
  encoder = sentence_encoder(params["encoder"], params.get("projection"))

  start = time.perf_counter()
  pool = _pool(config, train_split)
  labels = list(train_split.label_names)
  mlp = _train_mlp(labels, encoder, train_split, config) if config.classifier.kind == "mlp" else None
  intent_model = IntentModel.from_examples(encoder, pool.texts, pool.labels, show_progress=True, label_names=labels,
                                           k=config.classifier.k, classifier=config.classifier.kind, mlp=mlp)
  timings["classifier_seconds"] = time.perf_counter() - start
  results.update(common.evaluate_intent_model(intent_model, eval_split, workdir, "predictions"))
  results.update({k: round(v, 2) for k, v in timings.items()},
                 variant=variant_name(config, is_stage1_model(model.directory)), classifier=config.classifier.kind)
  if jax.process_index() == 0:
    intent_model.save(workdir / "export", encoder_heads=model.heads)
  results = common.write_results(config, workdir, results, steps, writer)
  writer.close()
  return results


def _pool(config, train_split: IntentSplit) -> IntentSplit:
  """The training pool, plus ``eval.extra_pool_splits`` (pairs already in the pool are not repeated)."""
  if not config.eval.extra_pool_splits:
    return train_split
  builder = common.prepared_builder(config)
  seen = set(zip(train_split.texts, train_split.labels))
  texts, labels = list(train_split.texts), list(train_split.labels)
  for split in config.eval.extra_pool_splits:
    extra = common.read_split(config, split, builder)
    for t, l in zip(extra.texts, extra.labels):
      if (t, l) not in seen:
        seen.add((t, l))
        texts.append(t)
        labels.append(l)
  log.info("inference pool: %d training + %d extra utterances", len(train_split.texts),
           len(texts) - len(train_split.texts))
  return IntentSplit(texts, labels, f"{train_split.source} + {'+'.join(config.eval.extra_pool_splits)}")


def _train_mlp(labels: list[str], encoder: SentenceEncoder, train_split: IntentSplit, config):
  c = config.classifier.mlp
  features = encoder.encode(train_split.texts, show_progress=True)
  targets = np.eye(len(labels), dtype=np.float32)[[labels.index(l) for l in train_split.labels]]
  return mlp_head.train(features, targets, mlp_head.MLPConfig(
      hidden=tuple(c.hidden), dropout=c.dropout, learning_rate=c.learning_rate, epochs=c.epochs,
      batch_size=c.batch_size, seed=config.seed))


STAGE1_MARKER = "convfit_stage1.json"  # written into a Stage 1 export by methods.convfit_stage1


def is_stage1_model(directory: pathlib.Path) -> bool:
  return (pathlib.Path(directory) / STAGE1_MARKER).exists()


def variant_name(config, stage1: bool) -> str:
  """Table 2's naming: LM[+S1][+S2-<LOSS>] (RAND for random init), and the classifier."""
  lm = "RAND" if config.model.init == "random" else "LM"
  s1 = "+S1" if stage1 else ""
  s2 = f"+S2-{config.stage2.loss.upper()}" if config.stage2.enabled else ""
  return f"{lm}{s1}{s2} ({config.classifier.kind})"
