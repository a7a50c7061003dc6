"""Single-label intent datasets in the line-aligned ``<split>/seq.in`` + ``<split>/label`` layout:
BANKING77, CLINC150 (+ out-of-scope), HWU64 (DialoGLUE's processed splits, via jianguoz/Few-Shot-Intent-Detection),
and ``IntentFolder`` for a user's own folder in that layout (splits = its subfolders).

Splits: ``train``, ``valid``, ``test``, the published few-shot ``train_5`` and ``train_10``, and ``train_30``
sampled from ``train`` per intent with ``config.seed`` (as ConvFiT did with DialoGLUE's script: ``k`` examples
per intent drawn uniformly without replacement; intents with fewer than ``k`` keep all). CLINC150 adds
``oos_train``, ``oos_valid``, ``oos_test`` (label ``oos``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow_datasets as tfds

from fewshot_nlu.data.builders.base import RawFolderBuilder, UserFolderBuilder, indexed_features
from fewshot_nlu.data.intent_folder import read_intent_split
from fewshot_nlu.errors import MissingDataFile

_REPO = "https://raw.githubusercontent.com/jianguoz/Few-Shot-Intent-Detection/fa9553312b1dba54b1be0aae2d30b13171f898e5/Datasets"
FIXED_SPLITS = ("train", "valid", "test", "train_5", "train_10")


def _urls(folder: str, oos_splits: tuple[str, ...] = ()) -> dict[str, str]:
  return {f"{s}/{f}": f"{_REPO}/{folder}/{s}/{f}"
          for s in FIXED_SPLITS + tuple(f"oos/{o}" for o in oos_splits) for f in ("seq.in", "label")}


@dataclasses.dataclass(eq=False)
class IntentConfig(tfds.core.BuilderConfig):
  seed: int = 0  # seed of the sampled k-shot splits
  sampled_shots: tuple[int, ...] = (30,)


def sample_k_shot(labels: list[str], k: int, seed: int) -> list[int]:
  """Indices of ``k`` examples per label (all of a label's examples if it has fewer), in file order.
  Per label, a ``numpy`` generator seeded with ``(seed, label index in sorted label order)`` picks them."""
  names = sorted(set(labels))
  by_label = {n: [i for i, l in enumerate(labels) if l == n] for n in names}
  chosen = []
  for label_index, name in enumerate(names):
    pool = by_label[name]
    rng = np.random.default_rng([seed, label_index])
    chosen.extend(pool if len(pool) <= k else rng.choice(pool, size=k, replace=False).tolist())
  return sorted(chosen)


class _IntentBuilder(RawFolderBuilder, skip_registration=True):
  VERSION = tfds.core.Version("1.0.0")
  BUILDER_CONFIGS = [IntentConfig(name="default", description="sampled splits with seed 0")]
  OOS_SPLITS: tuple[str, ...] = ()

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(features=indexed_features(texts=("text", "label")),
                                          homepage="https://github.com/jianguoz/Few-Shot-Intent-Detection")

  def _split_generators(self, dl_manager):
    raw = self.raw_dir(dl_manager)
    splits = {name: self._generate_examples(raw / name) for name in FIXED_SPLITS}
    train = read_intent_split(raw / "train")
    for k in self.builder_config.sampled_shots:
      splits[f"train_{k}"] = self._generate_examples(
          raw / "train", sample_k_shot(train.labels, k, self.builder_config.seed))
    for name in self.OOS_SPLITS:
      splits[f"oos_{name}"] = self._generate_examples(raw / "oos" / name)
    return splits

  def _generate_examples(self, directory, keep=None):
    split = read_intent_split(directory)
    for i in keep if keep is not None else range(len(split.texts)):
      yield i, {"index": i, "text": split.texts[i], "label": split.labels[i]}


class Banking77(_IntentBuilder):
  """BANKING77: 77 intents of one banking domain."""
  RAW_FOLDER = "BANKING77"
  DOWNLOAD_URLS = _urls("BANKING77")


class Clinc150(_IntentBuilder):
  """CLINC150: 150 intents over 10 domains, plus out-of-scope (``oos_*`` splits)."""
  RAW_FOLDER = "CLINC150"
  DOWNLOAD_URLS = _urls("CLINC150", ("train", "valid", "test"))
  OOS_SPLITS = ("train", "valid", "test")


class Hwu64(_IntentBuilder):
  """HWU64: 64 intents over 21 home-assistant scenarios."""
  RAW_FOLDER = "HWU64"
  DOWNLOAD_URLS = _urls("HWU64")


class IntentFolder(UserFolderBuilder, _IntentBuilder):
  """A user's own single-label intent data: ``raw_dir=`` holds one subfolder per split, each with
  ``seq.in`` and ``label``. Sampled ``train_<k>`` splits are added when the folder has a ``train`` split."""
  RAW_FOLDER = ""
  BUILDER_CONFIGS = [IntentConfig(name="default", sampled_shots=())]

  def _split_generators(self, dl_manager):
    raw = self.raw_dir(dl_manager)
    names = sorted(p.name for p in raw.iterdir() if (p / "seq.in").exists() or (p / "label").exists())
    if not names:
      raise MissingDataFile(f"{raw}: no subfolder with seq.in + label files (one subfolder per split)")
    splits = {name: self._generate_examples(raw / name) for name in names}
    if "train" in names:
      train = read_intent_split(raw / "train")
      for k in self.builder_config.sampled_shots:
        splits[f"train_{k}"] = self._generate_examples(
            raw / "train", sample_k_shot(train.labels, k, self.builder_config.seed))
    return splits
