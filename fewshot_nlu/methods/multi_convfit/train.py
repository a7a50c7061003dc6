"""Multi-ConvFiT (Vulić et al., 2022): multi-label intent detection by contrastive task specialisation of a
sentence encoder (§2.1), optionally into bottleneck adapters only (§2.3, C-ADAPT), then a multi-label MLP on
the frozen specialised encodings (§2.2) with a decision threshold.

Specialisation is ConvFiT's Stage 2 (``train.specialisation``, shared with ``methods.convfit.stage2``: the same
loss functions, streams and train loop) with label sets: a pair is positive iff the two label sets intersect.
``stage2.mode``:
  * ``fft`` (C-FFT): every encoder weight trains (AdamW 1e-4 in the configs; the paper 2e-5);
  * ``adapter`` (C-ADAPT): Pfeiffer adapters, reduction factor ``stage2.adapter_reduction`` (4), are added to
    every layer and only they train (AdamW 2e-3; the paper 4e-4); the base weights receive no gradient and
    are checked to be bit-identical afterwards (``base_unchanged`` in results.json). The export holds only the adapter.
Pairs (``stage2.sampling``):
  * ``paper``: §2.1's sets, ``samplers.multilabel_pairs`` (every intersecting pair in both orders, n
    negatives sharing no label per positive; ``stage2.keep_positive_fraction`` < 1 subsamples the positives,
    Figure 6), batches of ``train.batch_size`` pairs;
  * ``fast``: shuffled batches of utterances, each encoded once, OCL over all in-batch pairs (positive iff
    the label sets intersect). Not in the paper; it is the CPU default because the paper's pair sets are
    large: NLU++ banking low-data (209 utterances) has 7,502 positive pairs -> 22.5k pairs an epoch; MixATIS
    dev (759) has 173k. A fast epoch is one pass over the utterances, so it runs ``train.epochs x
    stage2.fast_epochs_factor`` (default 4) of them: banking low-data, 40 x 7 steps x 496 in-batch pairs =
    139k pair terms, the order of the paper's 10 x 22.5k = 225k, in 280 steps where the paper's make ~7,000:
    so the configs train at 5x §3's learning rates (fewshot_nlu/defaults/multi_convfit_base.py has the tuning).
The classifier (``heads.mlp``, ``multilabel=True``) trains on encodings computed once; thresholds are
``classifier.threshold`` (theta = 0.3) or, with ``classifier.calibrate``, per intent from out-of-fold
predictions on the training data (``multilabel.best_thresholds``).

Data (``data.builder``): ``nlupp`` (``data.builder_config`` banking / hotels) with the 10-fold protocol of §3
(``data.regime`` low: train on fold ``data.fold``, test on the other 9; high: the reverse; the 20 shipped
folds grouped in consecutive pairs, ``builders.nlupp.protocol_splits``); ``mixatis`` (low: dev, high: train;
test for both); any other builder: ``data.train_split`` / ``data.eval_split`` ("+" joins splits).
Metrics: micro-F1 and exact-match accuracy on the test examples.
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
from fewshot_nlu.data.builders import nlupp
from fewshot_nlu.data.intent_folder import LabelSetSplit
from fewshot_nlu.encoders import adapters, frozen_prefix
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.methods.multi_convfit import labels as multilabel
from fewshot_nlu.methods.multi_convfit.model import MultiLabelModel, adapter_bytes
from fewshot_nlu.train import run as train_run
from fewshot_nlu.train import specialisation
from fewshot_nlu.train.metrics import MetricWriter

log = logging.getLogger(__name__)

MODES = ("fft", "adapter")
REGIMES = ("low", "high")
ADAPTER_PARAMS = r"encoder/layer_\d+/adapter/.*"


def resolve_splits(config: ml_collections.ConfigDict) -> tuple[list[str], list[str]]:
  """(train splits, test splits) for the configured dataset and regime (module docstring)."""
  d = config.data
  if d.builder == "nlupp":
    config_checks.require_choice(config, "data.regime", REGIMES)
    try:
      return nlupp.protocol_splits(d.regime, d.fold, d.n_folds)
    except ValueError as e:
      raise config_checks.ConfigError(f"config.data.fold / config.data.n_folds: {e}") from None
  if d.builder == "mixatis":
    config_checks.require_choice(config, "data.regime", REGIMES)
    return ["dev" if d.regime == "low" else "train"], ["test"]
  if not d.train_split or not d.eval_split:
    raise config_checks.ConfigError(f"config.data.train_split / eval_split: set both for builder {d.builder!r}")
  return d.train_split.split("+"), d.eval_split.split("+")


def validate(config: ml_collections.ConfigDict) -> None:
  builder = train_run.validate_common(config)
  train_splits, test_splits = resolve_splits(config)
  splits.require_splits(config, builder, "data.train_split", train_splits)
  splits.require_splits(config, builder, "data.eval_split", test_splits)
  config_checks.require_choice(config, "stage2.mode", MODES)
  specialisation.validate_loss(config)
  config_checks.require_choice(config, "stage2.sampling", specialisation.SAMPLINGS)
  mlp_head.validate_config(config, "classifier.mlp")
  config_checks.require_positive(config, "stage2.adapter_reduction", "stage2.fast_epochs_factor")
  for field in ("classifier.threshold", "stage2.keep_positive_fraction"):
    config_checks.require_fraction(config, field)
  if config.stage2.keep_positive_fraction <= 0:
    raise config_checks.ConfigError("config.stage2.keep_positive_fraction must be > 0")
  if config.stage2.negatives < 0:
    raise config_checks.ConfigError("config.stage2.negatives must be >= 0")
  if config.classifier.calibrate and config.classifier.calibration_folds < 2:
    raise config_checks.ConfigError("config.classifier.calibration_folds must be >= 2")
  specialisation.validate_length_groups(config)
  specialisation.validate_frozen_prefix(config)


def read_data(config) -> tuple[LabelSetSplit, LabelSetSplit]:
  builder = splits.prepared_builder(config)
  train_splits, test_splits = resolve_splits(config)
  train = splits.read_label_sets(config, train_splits, builder)
  test = splits.read_label_sets(config, test_splits, builder)
  unseen = sorted(set(test.label_names) - set(train.label_names))
  if unseen:
    log.warning("%d test intents never occur in training (never predicted, counted as misses): %s",
                len(unseen), unseen[:5])
  return train, test


def specialise(config, model, train: LabelSetSplit, labels: list[str], workdir: pathlib.Path,
               writer: MetricWriter, description: str | None = None) -> tuple[dict, int, dict]:
  """Contrastive specialisation (``description``: the progress bar's label); returns (encoder params, steps,
  figures)."""
  run_config = specialisation.with_pair_classifier_rate(config).copy_and_resolve_references()
  if config.stage2.mode == "adapter":  # the encoder trains its adapters only; a loss's own head (SMAX's W) trains too
    run_config.train.trainable = (ADAPTER_PARAMS, specialisation.PAIR_CLASSIFIER_PARAMS)
    run_config.train.frozen = ()
  start = time.perf_counter()
  params, axes = specialisation.stage2_params(model.params, model.config, run_config)
  params, axes, cache = specialisation.freeze_prefix(params, axes, model, run_config)
  mesh, batch_size = train_run.mesh_and_batch(run_config)
  if config.stage2.sampling == "fast":
    run_config.train.epochs = config.train.epochs * config.stage2.fast_epochs_factor
    stream = specialisation.in_batch_stream(train.texts, {"label_sets": multilabel.multi_hot(train.label_sets, labels)},
                                            model.tokenizer, run_config, batch_size, mesh, cache=cache)
    passes_per_step = config.train.batch_size
  else:
    pairs = samplers.multilabel_pairs(train.label_sets, config.stage2.negatives, seed=config.seed,
                                      keep_positive_fraction=config.stage2.keep_positive_fraction)
    stream = specialisation.paper_stream(train.texts, pairs, model.tokenizer, run_config, batch_size, mesh,
                                         cache)
    passes_per_step = 2 * config.train.batch_size
  loss_fn = specialisation.make_loss_fn(model.config, run_config)
  params, steps = train_run.train(run_config, workdir, params, axes, loss_fn, stream, mesh, writer,
                                  description=description)
  params = frozen_prefix.thaw(params, cache)
  figures = {"specialisation_seconds": time.perf_counter() - start, "encoder_passes": steps * passes_per_step}
  if config.stage2.mode == "adapter":
    base = adapters.split(params["encoder"])[0]
    figures["base_unchanged"] = _bit_identical(base, model.params)
  return params["encoder"], steps, figures


def _bit_identical(a, b) -> bool:
  same = jax.tree.map(lambda x, y: np.array_equal(np.asarray(x).view(np.uint32), np.asarray(y).view(np.uint32)),
                      a, b)
  return bool(all(jax.tree.leaves(same)))


def classifier_config(config) -> mlp_head.MLPConfig:
  return mlp_head.config_from(config.classifier.mlp, multilabel=True, seed=config.seed)


def thresholds(config, features: np.ndarray, targets: np.ndarray) -> float | np.ndarray:
  """theta, or per-intent thresholds from out-of-fold probabilities on the training data."""
  c = config.classifier
  if not c.calibrate:
    return c.threshold
  mlp_config = classifier_config(config)

  def fit_predict(x, y, held):
    return mlp_head.predict_proba(mlp_head.train(x, y, mlp_config), held, multilabel=True)

  oof = multilabel.out_of_fold_probabilities(features, targets, c.calibration_folds, config.seed, fit_predict)
  return multilabel.best_thresholds(oof, targets, c.threshold)


def run(config: ml_collections.ConfigDict, workdir: pathlib.Path) -> dict:
  train, test = read_data(config)
  train_splits = "+".join(resolve_splits(config)[0])  # the protocol picks them: data.train_split may be empty
  labels = train.label_names
  model = specialisation.load_encoder(config)
  writer = MetricWriter(workdir)
  results, steps = {}, 0
  encoder_params = model.params
  if config.stage2.enabled:
    encoder_params, steps, figures = specialise(config, model, train, labels, workdir, writer,
                                                description=f"{train_run.progress_label(config)} {train_splits}")
    results.update(figures)
  encoder = SentenceEncoder.from_config(config, model.config, encoder_params, model.tokenizer)

  start = time.perf_counter()
  features = encoder.encode(train.texts, show_progress=True)
  targets = multilabel.multi_hot(train.label_sets, labels)
  mlp = mlp_head.train(features, targets, classifier_config(config))
  theta = thresholds(config, features, targets)
  results["classifier_seconds"] = time.perf_counter() - start
  intent_model = MultiLabelModel(encoder, mlp, labels, theta)

  start = time.perf_counter()
  test_vectors = encoder.encode(test.texts, show_progress=True)
  predictions = intent_model.predict_from(intent_model.probabilities_of(test_vectors))
  results["predict_seconds"] = time.perf_counter() - start
  results.update(multilabel.scores(test.label_sets, [p.labels for p in predictions]))
  results["accuracy"] = results["exact_match"]
  if jax.process_index() == 0:
    write_predictions(workdir / "predictions.tsv", test, predictions)
    with workdirs.atomic_folder(workdir / "export") as export:
      intent_model.save(export, base_name=config.model.name, base_params=model.params, encoder_heads=model.heads)
  results.update({k: round(v, 2) if isinstance(v, float) and k.endswith("seconds") else v
                  for k, v in results.items()},
                 variant=variant_name(config), num_train=len(train.texts), num_eval=len(test.texts),
                 num_labels=len(labels), train_splits=train_splits,
                 adapter_bytes=adapter_bytes(encoder), threshold=config.classifier.threshold,
                 mlp_dropout_site=config.classifier.mlp.dropout_site,
                 calibrated=bool(config.classifier.calibrate),
                 specialisation_learning_rate=config.train.learning_rate if config.stage2.enabled else None)
  if config.data.builder in ("nlupp", "mixatis"):
    results.update(regime=config.data.regime, fold=config.data.fold if config.data.builder == "nlupp" else None,
                   domain=config.data.get("builder_config") or None)
  embeddings = {reports.UNTOUCHED: test_vectors}  # without specialisation the encoder is the untouched one
  if config.stage2.enabled:
    untouched = SentenceEncoder.from_config(config, model.config, model.params, model.tokenizer)
    embeddings = {reports.UNTOUCHED: lambda: untouched.encode(test.texts, show_progress=True),
                  f"{reports.SPECIALISED} (C-{config.stage2.mode.upper()})": test_vectors}
  results.update(reports.write_run_report(
      workdir, test.label_sets, [p.labels for p in predictions], texts=test.texts,
      title=f"Multi-ConvFiT on {config.data.builder} ({len(test.texts)} test utterances)",
      embeddings=embeddings))
  results = train_run.finish(config, workdir, results, steps, writer)
  writer.close()
  return results


def write_predictions(path: pathlib.Path, test: LabelSetSplit, predictions) -> None:
  """text, gold and predicted intents ("+"-joined), and the three most likely intents with probabilities."""
  with open(path, "w", encoding="utf-8") as f:
    f.write("text\tgold\tpredicted\texact\ttop_intents\n")
    for text, gold, p in zip(test.texts, test.label_sets, predictions):
      top = " | ".join(f"{l} {s:.3f}" for l, s in list(p.probabilities.items())[:3])
      text = text.replace("\t", " ").replace("\n", " ")
      f.write(f"{text}\t{'+'.join(sorted(gold))}\t{'+'.join(p.labels)}\t{set(gold) == set(p.labels)}\t{top}\n")


def variant_name(config) -> str:
  """The paper's naming: <encoder> [+C-FFT | +C-ADAPT], then the classifier."""
  spec = {"fft": " +C-FFT", "adapter": " +C-ADAPT"}[config.stage2.mode] if config.stage2.enabled else ""
  return f"{config.model.name}{spec} + MLP"
