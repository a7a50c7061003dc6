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

Inference (``fewshot_nlu.models.intent_model``) with the specialised encoder, in the space ``classifier.space``:
  * ``pooled`` (the shipped default, a deviation): the mean-pooled vectors before the down-projection, which is
    used for training only (SimCLR's observation, Chen et al. 2020 §4.2, that the layer before a contrastive
    projection head represents better). On ``valid`` it is ahead of the projected space for logistic regression
    in 6 of 8 cells, balanced or long-tail (level, < 0.1 behind, in the other two; +0.46 on average) and for
    prototypes in 7 of 8 (bench/results/decision_rules.md); the export holds no
    projection, and its vectors are the encoder's hidden size;
  * ``projected``: the paper's d_o space;
and by ``classifier.kind``:
  * ``knn``: the paper's rule (§2.2), the k nearest examples by cosine over the training pool, plus any
    ``eval.extra_pool_splits`` (inference-time pool augmentation, Figure 6);
  * ``linear``: logistic regression on the training pool's vectors (a softmax layer, ``classifier.linear``; a
    deviation: on every dataset's ``valid`` split it beats 1-NN on the same encoder on balanced few-shot pools,
    bench/results/decision_rules.md). The export holds it as a softmax head without hidden layers (kind
    ``mlp``); the nearest examples are still returned as evidence, and ``results.json``
    ``nearest_neighbour_accuracy`` says what 1-NN gives on the same encoder;
  * ``mlp``: Casanueva et al. (2020)'s MLP (``classifier.mlp``), Table 2's baseline;
  * ``prototype``: the nearest class mean (Prototypical Networks; ``models.intent_model``), nothing trained;
  * ``auto`` (the shipped default, not in the paper): of ``classifier.candidates`` (logistic regression,
    prototypes), the one most accurate on the development split ``classifier.select_split`` (``valid`` for the
    benchmark datasets; without one, the first candidate), recorded in ``results.json`` ``classifier_selection``.
    Logistic regression wins on balanced few-shot pools, prototypes on long-tail pools whose intents have 1-3
    examples (bench/results/decision_rules.md).

Out-of-scope rejection (not in the paper; ``models.intent_model``): the export's threshold is calibrated on
``eval.calibration_split`` (held-out in-scope utterances, e.g. a dataset's ``valid``) when set, else by
``eval.calibration_rule``: ``held_out_half`` (the shipped default) trains Stage 2 a second time on half of each
intent's examples and scores the other half as new utterances; ``leave_one_out`` scores the training pool left
out one at a time under the final encoder (no second training, but that encoder was trained on those very
examples: on small bots it rejected 21-59% of new in-scope utterances where it aims at 10%, the held-out half
3-38%; bench/results/oos_bots.md).
"""

from __future__ import annotations

import collections
import json
import logging
import pathlib
import shutil
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
from fewshot_nlu.evaluation import knn
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.models import rejection
from fewshot_nlu.models.intent_model import IntentModel
from fewshot_nlu.train import run as train_run
from fewshot_nlu.train import specialisation
from fewshot_nlu.train.metrics import MetricWriter

log = logging.getLogger(__name__)

# classifier.kind -> the IntentModel classifier holding it (a softmax head of any depth is an "mlp")
CLASSIFIERS = {"knn": "knn", "linear": "mlp", "mlp": "mlp", "prototype": "prototype"}
AUTO = "auto"  # classifier.kind: the candidate most accurate on classifier.select_split
SPACES = ("pooled", "projected")  # classifier.space: before / after Stage 2's down-projection

def validate(config: ml_collections.ConfigDict) -> None:
  builder = train_run.validate_common(config)
  config_checks.require_choice(config, "model.init", specialisation.INITS)
  specialisation.validate_loss(config)
  config_checks.require_choice(config, "stage2.sampling", specialisation.SAMPLINGS)
  config_checks.require_choice(config, "classifier.kind", (*CLASSIFIERS, AUTO))
  if config.classifier.kind == AUTO:
    if not config.classifier.candidates:
      raise config_checks.ConfigError("config.classifier.candidates: empty; classifier.kind=auto chooses among them")
    for i, candidate in enumerate(config.classifier.candidates):
      if candidate not in CLASSIFIERS:
        raise config_checks.ConfigError(f"config.classifier.candidates[{i}]: {candidate!r} is no classifier; "
                                        f"choose from {tuple(CLASSIFIERS)}")
    if config.classifier.select_split:
      splits.require_splits(config, builder, "classifier.select_split", (config.classifier.select_split,),
                            hint="--config.classifier.select_split= (empty) takes the first of "
                                 "classifier.candidates without a development split")
  config_checks.require_choice(config, "classifier.space", SPACES)
  config_checks.require_positive(config, "classifier.k")
  mlp_head.validate_config(config, "classifier.mlp")
  mlp_head.validate_config(config, "classifier.linear")
  if config.stage2.projection_dim < 0 or config.stage2.negatives < 0:
    raise config_checks.ConfigError("config.stage2.projection_dim and config.stage2.negatives must be >= 0")
  if config.stage2.sampling == "fast":
    config_checks.require_positive(config, "stage2.examples_per_class")
    config_checks.require_non_negative(config, "stage2.intents_per_batch")
    specialisation.validate_length_groups(config)
    p, k, batch = config.stage2.intents_per_batch, config.stage2.examples_per_class, config.train.batch_size
    if p * k > batch:
      raise config_checks.ConfigError(
          f"config.stage2.intents_per_batch: {p} intents x {k} utterances (config.stage2.examples_per_class) do not "
          f"fit batches of config.train.batch_size={batch}; lower one of them, or raise the batch size")
  specialisation.validate_frozen_prefix(config)
  splits.require_splits(config, builder, "eval.extra_pool_splits", config.eval.extra_pool_splits)
  config_checks.require_choice(config, "eval.calibration_rule", CALIBRATION_RULES)
  if config.eval.calibration_split:
    splits.require_splits(config, builder, "eval.calibration_split", (config.eval.calibration_split,),
                          hint="--config.eval.calibration_split= (empty) calibrates out-of-scope rejection on the "
                               "training examples instead")


# --------------------------------------------------------------------------------------------- batches

def fast_stream(split: IntentSplit, label_ids: dict, tokenizer, config, batch_size: int, mesh,
                cache=None) -> EpochStream:
  """P intents x K utterances per batch (``samplers.ClassBalancedBatches``; P = ``stage2.intents_per_batch``,
  K = ``stage2.examples_per_class``), padded to ``batch_size`` rows, for the all-pairs loss."""
  labels = np.array([label_ids[l] for l in split.labels], np.int32)
  k = config.stage2.examples_per_class
  p = config.stage2.intents_per_batch or intents_per_batch(len(label_ids), batch_size, k)
  if not 2 <= p <= len(label_ids):
    raise config_checks.ConfigError(
        f"config.stage2.intents_per_batch: {p} intents per batch, but fast sampling needs 2 to {len(label_ids)} "
        f"(the intents of {split.source}); set it to 0 to derive it from the data")
  plan = samplers.ClassBalancedBatches(tuple(int(l) for l in labels), p, k, seed=config.seed)
  return specialisation.in_batch_stream(split.texts, {"label": labels}, tokenizer, config, batch_size, mesh, plan,
                                        cache)


def intents_per_batch(intents: int, batch_size: int, k: int) -> int:
  """P for ``stage2.intents_per_batch = 0``: as many intents as batches of ``batch_size`` hold at K utterances
  each, at most the data's ``intents`` (fewer intents: a batch of P x K utterances padded to ``batch_size``)."""
  return min(intents, batch_size // k)


def resolve(config: ml_collections.ConfigDict, explicit: frozenset[str] | None) -> None:
  """Fits the shipped config to the data where the caller did not set a field (``explicit``; None: the caller
  set every field): split names
  (``splits.resolve_splits``; without a development split the decision rule is ``no_development_rule``'s and the
  out-of-scope threshold is calibrated on the training examples), and the batch geometry of fast sampling
  (``stage2.intents_per_batch`` = 0 -> P from the data, recorded in the run's config). One warning line says
  what the run does without the splits it expected (the geometry is logged as information); a config the data
  cannot satisfy is a ``ConfigError`` naming the field."""
  development = {"eval.calibration_split": CALIBRATION_WITHOUT_SPLIT[config.eval.calibration_rule]}
  if config.classifier.kind == AUTO:
    development["classifier.select_split"] = ("the decision rule is class prototypes on a skewed pool, else "
                                              f"{config.classifier.candidates[0]}")
  changes = splits.resolve_splits(config, explicit, development)
  if changes:
    log.warning("fitted to the data: %s", "; ".join(changes))
  if config.stage2.enabled and config.stage2.sampling == "fast":
    for change in _resolve_geometry(config, explicit):
      log.info("fitted to the data: %s", change)


def _resolve_geometry(config: ml_collections.ConfigDict, explicit: frozenset[str] | None) -> list[str]:
  """``stage2.intents_per_batch`` for fast sampling: checked against the data's intents when set, else derived
  (``intents_per_batch``); what changed, for ``resolve``'s warning."""
  intents = len(set(splits.read_split(config, config.data.train_split).labels))
  k, batch = config.stage2.examples_per_class, config.train.batch_size
  if config.stage2.intents_per_batch:
    if config.stage2.intents_per_batch > intents:
      raise config_checks.ConfigError(
          f"config.stage2.intents_per_batch: {config.stage2.intents_per_batch} intents per batch, but "
          f"{config.data.builder}/{config.data.train_split} has {intents}; set it to {intents} or less, or to 0 "
          "to derive it from the data")
    return []
  if k > 0:
    p = intents_per_batch(intents, batch, k)
    if p < 2:
      field = "train.batch_size" if "train.batch_size" in (explicit or ()) else "stage2.examples_per_class"
      raise config_checks.ConfigError(
          f"config.{field}: batches of {batch} with K={k} utterances per intent (config.stage2.examples_per_class) "
          f"hold {batch // k} intent, but fast sampling needs 2 or more; lower config.stage2.examples_per_class "
          f"to {batch // 2} or less, or raise config.train.batch_size to {2 * k} or more")
    config.stage2.intents_per_batch = p
    if p < batch // k:
      return [f"stage2.intents_per_batch={p} ({intents} intents: batches of {p} x {k} utterances, padded to {batch})"]
  return []


# ------------------------------------------------------------------------------------------------- run

def run(config: ml_collections.ConfigDict, workdir: pathlib.Path) -> dict:
  train_split, eval_split = splits.read_splits(config)
  splits.warn_unseen_labels(train_split, eval_split)
  model = specialisation.load_encoder(config)
  timings = {}

  def sentence_encoder(encoder_params, projection=None):
    return SentenceEncoder.from_config(config, model.config, encoder_params, model.tokenizer, projection=projection)

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
    params, steps = _specialise(config, workdir, model, train_split, writer)
    timings["stage2_seconds"] = time.perf_counter() - start
    per_step = config.train.batch_size * (1 if config.stage2.sampling == "fast" else 2)
    results["encoder_passes"] = steps * per_step
  projection = params.get("projection") if config.classifier.space == "projected" else None
  encoder = sentence_encoder(params["encoder"], projection)

  start = time.perf_counter()
  pool = _pool(config, train_split)
  labels = list(train_split.label_names)
  pool_vectors = encoder.encode(pool.texts, show_progress=True)  # once, for the selection, the head and the index
  kind, encoded = config.classifier.kind, {}  # encoded: {split: its vectors}, reused by the calibration
  if kind == AUTO:
    kind, results["classifier_selection"] = _select_classifier(config, encoder, pool, labels, pool_vectors, encoded)
  classifier = CLASSIFIERS[kind]
  mlp = (_train_mlp(labels, encoder, train_split, config, kind, pool_vectors if pool is train_split else None)
         if classifier == "mlp" else None)
  intent_model = IntentModel.from_examples(encoder, pool.texts, pool.labels, show_progress=True, label_names=labels,
                                           k=config.classifier.k, classifier=classifier, mlp=mlp,
                                           head=_mlp_config(config, kind),  # kept: added examples retrain the head
                                           vectors=pool_vectors)
  timings["classifier_seconds"] = time.perf_counter() - start
  evaluation = knn.evaluate(intent_model, eval_split, workdir, "predictions")
  results.update(evaluation.results)
  if classifier != "knn":  # the nearest example is every prediction's first evidence: 1-NN on the same encoder
    results["nearest_neighbour_accuracy"] = float(np.mean(
        [p.neighbours[0].label == gold for p, gold in zip(evaluation.predictions, eval_split.labels)]))
  start = time.perf_counter()  # held-out: one encoding of that split; half: Stage 2 again; else leave-one-out
  results["rejection"] = _calibrate_rejection(config, workdir, model, train_split, intent_model,
                                              sentence_encoder, results, encoded).to_dict()
  timings["rejection_seconds"] = time.perf_counter() - start
  variant = variant_name(config, is_stage1_model(model.directory), kind)
  results.update({k: round(v, 2) for k, v in timings.items()}, variant=variant, classifier=kind,
                 classifier_space="pooled" if projection is None else "projected")
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


def _specialise(config, workdir: pathlib.Path, model, split: IntentSplit, writer: MetricWriter,
                description: str | None = None) -> tuple[dict, int]:
  """Stage 2 on ``split`` (resumable from ``workdir``'s checkpoints; ``description``: the progress bar's label):
  (the trained params, the steps)."""
  config = specialisation.with_pair_classifier_rate(config)
  params, axes = specialisation.stage2_params(model.params, model.config, config)
  params, axes, cache = specialisation.freeze_prefix(params, axes, model, config)
  mesh, batch_size = train_run.mesh_and_batch(config)
  label_ids = {l: i for i, l in enumerate(split.label_names)}
  if config.stage2.sampling == "fast":
    stream = fast_stream(split, label_ids, model.tokenizer, config, batch_size, mesh, cache)
  else:
    pairs = samplers.convfit_pairs(split.labels, config.stage2.negatives, seed=config.seed)
    stream = specialisation.paper_stream(split.texts, pairs, model.tokenizer, config, batch_size, mesh, cache)
  loss_fn = specialisation.make_loss_fn(model.config, config)
  params, steps = train_run.train(config, workdir, params, axes, loss_fn, stream, mesh, writer,
                                  description=description)
  return frozen_prefix.thaw(params, cache), steps


CALIBRATION_RULES = ("held_out_half", "leave_one_out")  # eval.calibration_rule: without eval.calibration_split
CALIBRATION_WITHOUT_SPLIT = {  # resolve()'s warning, by eval.calibration_rule
    "held_out_half": "out-of-scope rejection is calibrated on half of the training examples, held out of a second "
                     "Stage 2 on the other half (eval.calibration_rule)",
    "leave_one_out": "out-of-scope rejection is calibrated on the training examples, leave-one-out"}
CALIBRATION_FOLDER = "calibration"  # held_out_half: the second Stage 2's checkpoints, then its scores


def _calibrate_rejection(config, workdir: pathlib.Path, model, train_split: IntentSplit, intent_model: IntentModel,
                         sentence_encoder, results: dict, encoded: dict) -> rejection.Rejection:
  """The out-of-scope threshold (``models.rejection``): on ``eval.calibration_split``'s in-scope utterances when
  set (their labels are not read); else by ``eval.calibration_rule``: ``held_out_half`` scores half of each
  intent's training examples against an encoder that Stage 2 trained on the other half (``held_out_scores``),
  ``leave_one_out`` the pool left out one at a time under the encoder trained on all of it (no training; the
  encoder pulled those very examples together, so the threshold rejects far more than its quantile of new
  in-scope traffic: on small bots 21-59%, bench/results/oos_bots.md). ``held_out_half`` also records in
  ``results`` the held-out half's intent accuracy (``held_out_half_accuracy``). ``encoded``: splits the final
  encoder has encoded already ({name: vectors}; the decision rule's development split is the calibration split
  of the benchmark datasets)."""
  split = config.eval.calibration_split
  if split:
    held_out = splits.read_split(config, split)
    return intent_model.calibrate_rejection(texts=held_out.texts, source=f"{config.data.builder}/{split}",
                                            show_progress=True, vectors=encoded.get(split))
  if config.eval.calibration_rule == "held_out_half" and config.stage2.enabled:
    score = intent_model.rejection_score
    held_out = held_out_scores(config, workdir / CALIBRATION_FOLDER, model, train_split, sentence_encoder, score,
                               intent_model.k)
    if held_out is not None:
      scores, accuracy = held_out
      if accuracy is not None:
        results["held_out_half_accuracy"] = accuracy
        log.info("intent accuracy on the %d training examples held out of the second Stage 2: %.1f%% (an encoder "
                 "and k-NN from the other half; new utterances score lower: on small bots 0-13.5 points, "
                 "bench/results/oos_bots_notes.md)", len(scores), 100 * accuracy)
      return intent_model.calibrate_rejection(scores=scores, source="training utterances held out of a second "
                                                                    "Stage 2 (trained on the other half of each "
                                                                    "intent's examples)")
    log.warning("out-of-scope calibration: no intent has 2 examples to hold one out; calibrated leave-one-out on "
                "the training examples instead (over-rejects new in-scope utterances)")
  return intent_model.calibrate_rejection()


def half_split(split: IntentSplit, seed: int) -> tuple[IntentSplit, IntentSplit]:
  """(kept, held out): of each intent with n >= 2 examples, floor(n / 2) drawn at random are held out."""
  rng = np.random.default_rng([seed, 17])
  by_label = collections.defaultdict(list)
  for i, label in enumerate(split.labels):
    by_label[label].append(i)
  held = sorted(i for label in sorted(by_label) for i in
                rng.permutation(by_label[label])[:len(by_label[label]) // 2].tolist())
  kept = sorted(set(range(len(split.texts))) - set(held))
  part = lambda rows, name: IntentSplit([split.texts[i] for i in rows], [split.labels[i] for i in rows],  # noqa: E731
                                        f"{split.source} ({name})")
  return part(kept, "kept half"), part(held, "held-out half")


def held_out_scores(config, folder: pathlib.Path, model, train_split: IntentSplit, sentence_encoder, score: str,
                    k: int) -> tuple[np.ndarray, float | None] | None:
  """``eval.calibration_rule = "held_out_half"``: Stage 2 (the run's config) on the kept half of ``half_split``,
  in ``folder`` (resumable; its checkpoints are deleted once the scores are written to ``folder/scores.json``,
  which a re-run reads back), then each held-out example's rejection ``score`` against the kept half's index
  under that encoder; with the share of held-out examples whose intent that k-NN model got right (for data
  without a development split; None from a scores file written before it was kept). It is no lower bound: a
  team's examples resemble each other more than its users' utterances do, and on the small bots of
  bench/oos_bots.py it ran 0-13.5 points above test accuracy (+7.2 on average; oos_bots_notes.md). None when no
  intent has two examples."""
  done = folder / "scores.json"
  if done.exists():
    saved = json.loads(done.read_text())
    return np.asarray(saved["scores"], np.float64), saved.get("accuracy")
  kept, held = half_split(train_split, config.seed)
  if not held.texts:
    return None
  log.info("out-of-scope calibration: Stage 2 again on %d of the %d training examples, to score the other %d as "
           "new utterances (eval.calibration_rule=held_out_half; leave_one_out skips it)", len(kept.texts),
           len(train_split.texts), len(held.texts))
  writer = MetricWriter(folder, tensorboard=False)
  try:
    params, _ = _specialise(config, folder, model, kept, writer, description="convfit out-of-scope calibration "
                                                                              "(half of the examples)")
  finally:
    writer.close()
  projection = params.get("projection") if config.classifier.space == "projected" else None
  half_model = IntentModel.from_examples(sentence_encoder(params["encoder"], projection), kept.texts, kept.labels,
                                         label_names=list(train_split.label_names), k=k, classifier="knn")
  predictions = half_model.predict(held.texts, neighbours=1, show_progress=True)
  scores = np.array([rejection.score_of(p, score) for p in predictions])
  accuracy = float(np.mean([p.label == gold for p, gold in zip(predictions, held.labels)]))
  if jax.process_index() == 0:
    workdirs.write_json(done, {"scores": scores.tolist(), "held_out": len(held.texts), "kept": len(kept.texts),
                               "accuracy": accuracy})
    shutil.rmtree(folder / "checkpoints", ignore_errors=True)
  return scores, accuracy


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


SKEW = 3  # a pool is skewed when its best-covered intent has at least this many times the examples of its least


def no_development_rule(candidates: list[str], counts: collections.Counter) -> tuple[str, str]:
  """The decision rule of ``classifier.kind=auto`` without a development split, and why: class prototypes on a
  skewed pool (the most examples of an intent >= ``SKEW`` x the fewest: long-tail pools, small bots), where they
  beat logistic regression on the development splits (bench/results/decision_rules.md, peers.md,
  small_bots_notes.md), else the first candidate."""
  most, fewest = max(counts.values()), min(counts.values())
  if "prototype" in candidates and most >= SKEW * fewest:
    return "prototype", f"a skewed pool: {fewest} to {most} examples per intent"
  return candidates[0], f"the first of classifier.candidates ({fewest} to {most} examples per intent)"


def _select_classifier(config, encoder: SentenceEncoder, pool: IntentSplit, labels: list[str],
                       pool_vectors: np.ndarray, encoded: dict) -> tuple[str, dict]:
  """``classifier.kind=auto``: the candidate (``classifier.candidates``) most accurate on the development split
  ``classifier.select_split`` (never the test set; ties: the one listed first), each fitted on the pool (its
  ``pool_vectors``); without a split, the first candidate. Returns it and the record of the choice
  (``results.json`` ``classifier_selection``); the split's vectors go to ``encoded[split]``."""
  candidates, split = list(config.classifier.candidates), config.classifier.select_split
  if not split:
    chosen, reason = no_development_rule(candidates, collections.Counter(pool.labels))
    log.info("classifier.kind=auto without classifier.select_split: %s (%s)", chosen, reason)
    return chosen, {"split": "", "chosen": chosen, "reason": reason}
  held_out = splits.read_split(config, split)
  vectors = encoded[split] = encoder.encode(held_out.texts, show_progress=True)
  accuracy, index = {}, None
  for kind in candidates:
    if index is None:  # the pool is encoded once, its index shared by the candidates
      model = IntentModel.from_examples(encoder, pool.texts, pool.labels, label_names=labels,
                                        k=config.classifier.k, classifier=CLASSIFIERS[kind],
                                        head=_mlp_config(config, kind), vectors=pool_vectors)
      index = model.index
    else:
      model = IntentModel(encoder, index, labels, k=config.classifier.k, classifier=CLASSIFIERS[kind],
                          head=_mlp_config(config, kind))
      model.mlp = model.fit_head() if model.classifier == "mlp" else None
    predicted = model.predict_from(vectors, neighbours=0)
    accuracy[kind] = float(np.mean([p.label == gold for p, gold in zip(predicted, held_out.labels)]))
  chosen = max(candidates, key=lambda c: accuracy[c])  # max keeps the first of equal
  log.info("classifier.kind=auto: %s (%s accuracy: %s)", chosen, split,
           ", ".join(f"{c} {100 * a:.2f}" for c, a in accuracy.items()))
  return chosen, {"split": split, "chosen": chosen, "accuracy": accuracy}


def _train_mlp(labels: list[str], encoder: SentenceEncoder, train_split: IntentSplit, config, kind: str,
               features: np.ndarray | None = None):
  """The softmax head on ``train_split``'s vectors (``features`` when the caller has encoded it already)."""
  if features is None:
    features = encoder.encode(train_split.texts, show_progress=True)
  targets = np.eye(len(labels), dtype=np.float32)[[labels.index(l) for l in train_split.labels]]
  return mlp_head.train(features, targets, _mlp_config(config, kind))


def _mlp_config(config, kind: str) -> mlp_head.MLPConfig | None:
  """Classifier ``kind``'s softmax head settings: ``classifier.linear`` or ``classifier.mlp`` (None for the
  others)."""
  if CLASSIFIERS[kind] != "mlp":
    return None
  return mlp_head.config_from(config.classifier[kind], multilabel=False, seed=config.seed)


STAGE1_MARKER = "convfit_stage1.json"  # written into a Stage 1 export by methods.convfit.stage1


def is_stage1_model(directory: pathlib.Path) -> bool:
  return (pathlib.Path(directory) / STAGE1_MARKER).exists()


def variant_name(config, stage1: bool, kind: str) -> str:
  """Table 2's naming: LM[+S1][+S2-<LOSS>] (RAND for random init), and the classifier ``kind`` (the one chosen
  under ``classifier.kind=auto``)."""
  lm = "RAND" if config.model.init == "random" else "LM"
  s1 = "+S1" if stage1 else ""
  s2 = f"+S2-{config.stage2.loss.upper()}" if config.stage2.enabled else ""
  return f"{lm}{s1}{s2} ({kind})"
