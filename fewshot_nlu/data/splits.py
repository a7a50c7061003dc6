"""Reading a config's dataset splits through the builders: the prepared builder (raw files from ``data.dir`` or
``data.raw_dir``), split-name checks that name the config field at fault, and splits as texts with one label
(``IntentSplit``) or with label sets (``LabelSetSplit``)."""

from __future__ import annotations

import logging
from typing import Sequence

import ml_collections

from fewshot_nlu import config_checks
from fewshot_nlu.data import builders
from fewshot_nlu.data.builders import base
from fewshot_nlu.data.intent_folder import IntentSplit, LabelSetSplit
from fewshot_nlu.errors import DataError

log = logging.getLogger(__name__)


def require_splits(config: ml_collections.ConfigDict, builder, field: str, splits, hint: str = "") -> None:
  """Every name in ``splits`` (the value of ``config.<field>``) is a split of ``builder``; ``hint`` ends the
  error (after ``; ``) when one is not."""
  available = sorted(builder.info.splits.keys())
  for split in splits:
    if split not in available:
      raise config_checks.ConfigError(
          f"config.{field}: {split!r} is not a split of {config.data.builder}; available: {available}"
          + (f"; {hint}" if hint else ""))


TRAIN_FALLBACK = "train"  # data.train_split when the configured one is absent (a user's own folder)


def resolve_splits(config: ml_collections.ConfigDict, explicit, development: dict[str, str]) -> list[str]:
  """Fits a shipped config's split names to the splits the data has, where the caller did not set them
  (``explicit``: the dotted fields given on the command line or to ``fit``; None: all of them, nothing
  changes): ``data.train_split`` absent ->
  ``train``; ``data.eval_split`` absent -> ``test``, else the training split (a sanity check, said so); each
  ``development`` field (dotted name -> what the method does without it) naming an absent split -> "" (that
  fallback). Returns what changed, one phrase each, for the caller's one warning line; an explicit field
  naming an absent split is left for the method's checks to refuse."""
  if explicit is None:
    return []
  builder = base.prepare(_builder(config))
  available = set(builder.info.splits.keys())
  changes = []

  def settle(field: str, value: str, why: str) -> None:
    config_checks.set_field(config, field, value)
    changes.append(f"{field}={value!r} ({why})")

  train = config.data.train_split
  if train and train not in available and "data.train_split" not in explicit and TRAIN_FALLBACK in available:
    settle("data.train_split", TRAIN_FALLBACK, f"{config.data.builder} has no {train!r} split")
  evaluated = config.data.eval_split
  if evaluated and evaluated not in available and "data.eval_split" not in explicit:
    fallback = "test" if "test" in available else config.data.train_split
    settle("data.eval_split", fallback, f"no {evaluated!r} split" + (
        "" if fallback == "test" else ": the run scores its training examples, a sanity check, not an estimate"))
  for field, without in development.items():
    value = config_checks.get(config, field)
    if value and value not in available and field not in explicit:
      settle(field, "", f"no {value!r} split: {without}")
  return changes


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


def read_splits(config: ml_collections.ConfigDict) -> tuple[IntentSplit, IntentSplit]:
  """(train, eval) splits named by ``data.train_split`` / ``data.eval_split``."""
  builder = prepared_builder(config)
  return tuple(read_split(config, split, builder) for split in (config.data.train_split, config.data.eval_split))


def read_label_sets(config: ml_collections.ConfigDict, splits: Sequence[str], builder=None) -> LabelSetSplit:
  """The examples of ``splits`` (joined, in order) as texts with label sets (``intents``, ``labels`` or
  ``label`` field), for multi-label methods."""
  builder = builder or prepared_builder(config)
  texts, label_sets = [], []
  for split in splits:
    for e in base.load_split(builder, split):
      labels = next((e[k] for k in ("intents", "labels", "label") if k in e), None)
      if labels is None:
        raise DataError(f"{config.data.builder}/{split}, example {e['index']}: no intents/labels/label field")
      texts.append(e["text"])
      label_sets.append(tuple(labels) if isinstance(labels, (list, tuple)) else (labels,))
  return LabelSetSplit(texts, label_sets, f"{config.data.builder}/{'+'.join(splits)}")


def _as_split(examples: list[dict], where: str) -> IntentSplit:
  texts, labels = [], []
  for e in examples:
    label = next((e[k] for k in ("label", "labels", "intents") if k in e), None)
    if isinstance(label, list):
      if len(label) != 1:
        raise DataError(f"{where}, example {e['index']}: {len(label)} labels {label}; this method is "
                         "single-label (multi-label data belongs to Multi-ConvFiT)")
      label = label[0]
    texts.append(e["text"])
    labels.append(label)
  return IntentSplit(texts, labels, where)


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


def warn_unseen_labels(train_split: IntentSplit, eval_split: IntentSplit) -> None:
  unknown = sorted(set(eval_split.labels) - set(train_split.labels))
  if unknown:
    log.warning("%d eval intents never occur in training (always wrong under 1-NN): %s", len(unknown),
                unknown[:5])
