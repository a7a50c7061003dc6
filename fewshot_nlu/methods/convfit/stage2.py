"""ConvFiT Stage 2 (task-tailored conversational fine-tuning, §2.2) and intent detection by similarity.

Variants of Table 2, chosen by config:
  * LM / LM+S1: ``stage2.enabled = False`` with ``model.name`` = the input LM or a Stage 1 export
    (``methods.convfit.stage1``), classified by k-NN or by the MLP baseline (``classifier.kind = "mlp"``);
  * LM+S2 / LM+S1+S2: ``stage2.enabled = True``; ``stage2.loss`` = ``ocl`` | ``cos`` | ``smax``;
  * RAND: ``model.init = "random"`` (the LM's architecture and tokenizer, random weights).

Stage 2 encodes utterances with the LM, mean-pools, and applies a d_o = 512 tanh down-projection
(``encoders.projection``); the pair loss (``losses.pairs``) pulls same-intent pairs together. Two ways to sample
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

Inference (``fewshot_nlu.models.intent_model``) in the specialised (projected) space, by ``classifier.kind``:
  * ``knn``: the paper's rule (§2.2), the k nearest examples by cosine over the training pool, plus any
    ``eval.extra_pool_splits`` (inference-time pool augmentation, Figure 6);
  * ``linear``: logistic regression on the training pool's vectors (a softmax layer, ``classifier.linear``; the
    shipped default, a deviation: on every dataset's ``valid`` split it beats 1-NN on the same encoder,
    bench/results/decision_rules.md). The export holds it as a softmax head without hidden layers (kind
    ``mlp``); the nearest examples are still returned as evidence, and ``results.json``
    ``nearest_neighbour_accuracy`` says what 1-NN gives on the same encoder;
  * ``mlp``: Casanueva et al. (2020)'s MLP (``classifier.mlp``), Table 2's baseline.

Out-of-scope rejection (not in the paper; ``models.intent_model``): the export's threshold is calibrated on
``eval.calibration_split`` (held-out in-scope utterances, e.g. a dataset's ``valid``) when set, else on the
training pool left out one at a time (which over-rejects with a specialised encoder).
"""

from __future__ import annotations

import logging
import pathlib
import time

import jax
import ml_collections
import numpy as np

from fewshot_nlu import config_checks, reports, workdirs
from fewshot_nlu.data import samplers, splits
from fewshot_nlu.data.intent_folder import IntentSplit
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import frozen_prefix
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.encoders.transformer import DTYPES
from fewshot_nlu.evaluation import knn
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.models.intent_model import IntentModel
from fewshot_nlu.train import run as train_run
from fewshot_nlu.train import specialisation
from fewshot_nlu.train.metrics import MetricWriter

log = logging.getLogger(__name__)

# classifier.kind -> the IntentModel classifier holding it (a softmax head of any depth is an "mlp")
CLASSIFIERS = {"knn": "knn", "linear": "mlp", "mlp": "mlp"}

def validate(config: ml_collections.ConfigDict) -> None:
  builder = train_run.validate_common(config)
  config_checks.require_choice(config, "model.init", specialisation.INITS)
  specialisation.validate_loss(config)
  config_checks.require_choice(config, "stage2.sampling", specialisation.SAMPLINGS)
  config_checks.require_choice(config, "classifier.kind", tuple(CLASSIFIERS))
  config_checks.require_positive(config, "classifier.k")
  mlp_head.validate_config(config, "classifier.mlp")
  mlp_head.validate_config(config, "classifier.linear")
  if config.stage2.projection_dim < 0 or config.stage2.negatives < 0:
    raise config_checks.ConfigError("config.stage2.projection_dim and config.stage2.negatives must be >= 0")
  if config.stage2.sampling == "fast":
    config_checks.require_positive(config, "stage2.examples_per_class")
    specialisation.validate_length_groups(config)
    if config.train.batch_size % config.stage2.examples_per_class:
      raise config_checks.ConfigError(
          f"config.stage2.examples_per_class: {config.stage2.examples_per_class} does not divide "
          f"config.train.batch_size={config.train.batch_size} (fast sampling fills batches with P intents x K "
          "utterances)")
  specialisation.validate_frozen_prefix(config)
  splits.require_splits(config, builder, "eval.extra_pool_splits", config.eval.extra_pool_splits)
  if config.eval.calibration_split:
    splits.require_splits(config, builder, "eval.calibration_split", (config.eval.calibration_split,),
                          hint="--config.eval.calibration_split= (empty) calibrates out-of-scope rejection on the "
                               "training examples instead")


# --------------------------------------------------------------------------------------------- batches

def fast_stream(split: IntentSplit, label_ids: dict, tokenizer, config, batch_size: int, mesh,
                cache=None) -> EpochStream:
  """P intents x K utterances per batch (``samplers.ClassBalancedBatches``), for the all-pairs loss."""
  labels = np.array([label_ids[l] for l in split.labels], np.int32)
  k = config.stage2.examples_per_class
  p = batch_size // k
  if p > len(label_ids) or p < 2:
    raise config_checks.ConfigError(
        f"config.stage2.examples_per_class: batches of {batch_size} with K={k} hold P={p} intents, but fast "
        f"sampling needs 2 <= P <= {len(label_ids)} (the intents of {split.source})")
  plan = samplers.ClassBalancedBatches(tuple(int(l) for l in labels), p, k, seed=config.seed)
  return specialisation.in_batch_stream(split.texts, {"label": labels}, tokenizer, config, batch_size, mesh, plan,
                                        cache)


# ------------------------------------------------------------------------------------------------- run

def run(config: ml_collections.ConfigDict, workdir: pathlib.Path) -> dict:
  train_split, eval_split = splits.read_splits(config)
  splits.warn_unseen_labels(train_split, eval_split)
  model = specialisation.load_encoder(config)
  timings = {}

  def sentence_encoder(encoder_params, projection=None):
    return SentenceEncoder(model.config, encoder_params, model.tokenizer, pooling_mode=config.model.pooling,
                           max_length=config.model.max_length, batch_size=config.eval.batch_size,
                           dtype=DTYPES[config.model.dtype], projection=projection)

  writer = MetricWriter(workdir)
  results, steps = {}, 0
  untouched = lambda: sentence_encoder(model.params).encode(eval_split.texts, show_progress=True)  # noqa: E731
  if config.eval.before_training and config.stage2.enabled:
    before = knn.nearest_neighbour(sentence_encoder(model.params), train_split, eval_split, workdir,
                                   "predictions_before_training")
    results["accuracy_before_training"], untouched = before.results["accuracy"], before.vectors
  params = {"encoder": model.params}
  if config.stage2.enabled:
    start = time.perf_counter()
    params, axes = specialisation.stage2_params(model.params, model.config, config)
    params, axes, cache = specialisation.freeze_prefix(params, axes, model, config)
    mesh, batch_size = train_run.mesh_and_batch(config)
    label_ids = {l: i for i, l in enumerate(train_split.label_names)}
    if config.stage2.sampling == "fast":
      stream = fast_stream(train_split, label_ids, model.tokenizer, config, batch_size, mesh, cache)
    else:
      pairs = samplers.convfit_pairs(train_split.labels, config.stage2.negatives, seed=config.seed)
      stream = specialisation.paper_stream(train_split.texts, pairs, model.tokenizer, config, batch_size, mesh,
                                           cache)
    loss_fn = specialisation.make_loss_fn(model.config, config)
    params, steps = train_run.train(config, workdir, params, axes, loss_fn, stream, mesh, writer)
    params = frozen_prefix.thaw(params, cache)
    timings["stage2_seconds"] = time.perf_counter() - start
    per_step = config.train.batch_size * (1 if config.stage2.sampling == "fast" else 2)
    results["encoder_passes"] = steps * per_step
  encoder = sentence_encoder(params["encoder"], params.get("projection"))

  start = time.perf_counter()
  pool = _pool(config, train_split)
  labels = list(train_split.label_names)
  classifier = CLASSIFIERS[config.classifier.kind]
  mlp = _train_mlp(labels, encoder, train_split, config) if classifier == "mlp" else None
  intent_model = IntentModel.from_examples(encoder, pool.texts, pool.labels, show_progress=True, label_names=labels,
                                           k=config.classifier.k, classifier=classifier, mlp=mlp,
                                           head=_mlp_config(config))  # kept: added examples retrain the head
  timings["classifier_seconds"] = time.perf_counter() - start
  evaluation = knn.evaluate(intent_model, eval_split, workdir, "predictions")
  results.update(evaluation.results)
  if classifier != "knn":  # the nearest example is every prediction's first evidence: 1-NN on the same encoder
    results["nearest_neighbour_accuracy"] = float(np.mean(
        [p.neighbours[0].label == gold for p, gold in zip(evaluation.predictions, eval_split.labels)]))
  start = time.perf_counter()  # held-out: one encoding of that split; else leave-one-out over the index
  results["rejection"] = _calibrate_rejection(config, intent_model).to_dict()
  timings["rejection_seconds"] = time.perf_counter() - start
  variant = variant_name(config, is_stage1_model(model.directory))
  results.update({k: round(v, 2) for k, v in timings.items()}, variant=variant, classifier=config.classifier.kind)
  if jax.process_index() == 0:
    with workdirs.atomic_folder(workdir / "export") as export:
      intent_model.save(export, encoder_heads=model.heads)
  embeddings = {reports.UNTOUCHED: evaluation.vectors}  # without Stage 2 the model's encoder is the untouched one
  if config.stage2.enabled:
    embeddings = {reports.UNTOUCHED: untouched, f"{reports.SPECIALISED} (ConvFiT Stage 2)": evaluation.vectors}
  results.update(reports.write_run_report(
      workdir, eval_split.labels, [p.label for p in evaluation.predictions], texts=eval_split.texts,
      title=f"ConvFiT {variant} on {config.data.builder}/{config.data.eval_split}", embeddings=embeddings))
  results = train_run.finish(config, workdir, results, steps, writer)
  writer.close()
  return results


def _calibrate_rejection(config, intent_model: IntentModel):
  """The out-of-scope threshold, on ``eval.calibration_split``'s in-scope utterances when set (their labels are
  not read), else leave-one-out over the pool."""
  split = config.eval.calibration_split
  if not split:
    return intent_model.calibrate_rejection()
  held_out = splits.read_split(config, split)
  return intent_model.calibrate_rejection(texts=held_out.texts, source=f"{config.data.builder}/{split}",
                                          show_progress=True)


def _pool(config, train_split: IntentSplit) -> IntentSplit:
  """The training pool, plus ``eval.extra_pool_splits`` (pairs already in the pool are not repeated)."""
  if not config.eval.extra_pool_splits:
    return train_split
  builder = splits.prepared_builder(config)
  seen = set(zip(train_split.texts, train_split.labels))
  texts, labels = list(train_split.texts), list(train_split.labels)
  for split in config.eval.extra_pool_splits:
    extra = splits.read_split(config, split, builder)
    for t, l in zip(extra.texts, extra.labels):
      if (t, l) not in seen:
        seen.add((t, l))
        texts.append(t)
        labels.append(l)
  log.info("inference pool: %d training + %d extra utterances", len(train_split.texts),
           len(texts) - len(train_split.texts))
  return IntentSplit(texts, labels, f"{train_split.source} + {'+'.join(config.eval.extra_pool_splits)}")


def _train_mlp(labels: list[str], encoder: SentenceEncoder, train_split: IntentSplit, config):
  features = encoder.encode(train_split.texts, show_progress=True)
  targets = np.eye(len(labels), dtype=np.float32)[[labels.index(l) for l in train_split.labels]]
  return mlp_head.train(features, targets, _mlp_config(config))


def _mlp_config(config) -> mlp_head.MLPConfig | None:
  """The softmax head's settings: ``classifier.linear`` or ``classifier.mlp`` (None for k-NN)."""
  if CLASSIFIERS[config.classifier.kind] != "mlp":
    return None
  return mlp_head.config_from(config.classifier[config.classifier.kind], multilabel=False, seed=config.seed)


STAGE1_MARKER = "convfit_stage1.json"  # written into a Stage 1 export by methods.convfit.stage1


def is_stage1_model(directory: pathlib.Path) -> bool:
  return (pathlib.Path(directory) / STAGE1_MARKER).exists()


def variant_name(config, stage1: bool) -> str:
  """Table 2's naming: LM[+S1][+S2-<LOSS>] (RAND for random init), and the classifier."""
  lm = "RAND" if config.model.init == "random" else "LM"
  s1 = "+S1" if stage1 else ""
  s2 = f"+S2-{config.stage2.loss.upper()}" if config.stage2.enabled else ""
  return f"{lm}{s1}{s2} ({config.classifier.kind})"
