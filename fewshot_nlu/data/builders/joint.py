"""Joint intent + slot datasets in the line-aligned BIO layout: ``<split>/seq.in`` (one whitespace-tokenised
utterance per line), ``<split>/seq.out`` (one BIO tag per token of the same line) and ``<split>/label`` (its
intent; multi-intent labels joined by ``#``).

  * ``JointNluFolder``: a user's own folder in that layout (``raw_dir=``); its splits are the subfolders holding
    the three files.
  * ``SnipsJoint``: SNIPS, the joint-NLU split of Goo et al. (2018), 7 intents; splits ``train`` (13,084),
    ``valid`` (700), ``test`` (700).
  * ``Mixatis``: MixATIS_clean (Qin et al., 2020), 1-3 ATIS intents per utterance; splits ``train`` (13,162),
    ``dev`` (759), ``test`` (828).

Features: ``index`` (line number - 1), ``text`` (the ``seq.in`` line, stripped), ``tokens`` (its whitespace
tokens), ``tags`` (the ``seq.out`` tags), ``intents`` (the label split on ``#``).

Validation, with errors naming file and line: the three files differ in line count; a line's tag count is not
its token count; a tag is not ``O`` / ``B-<slot>`` / ``I-<slot>``; an ``I-X`` follows neither ``B-X`` nor ``I-X``
(strict BIO). Invalid BIO is an error, not a warning: the shipped SNIPS_BIO and MixATIS_clean files were checked
and hold no such sequence. The BIO helpers themselves live in ``data.bio`` (shared with the few-shot slot builder,
the span scorers and the Retriever).
"""

from __future__ import annotations

import pathlib
from typing import ClassVar

import tensorflow_datasets as tfds

from fewshot_nlu.data.builders.base import UserFolderBuilder, check_split_name, indexed_features
from fewshot_nlu.data.joint_folder import FILES, read_joint_split
from fewshot_nlu.errors import MissingDataFile

_SNIPS_REPO = ("https://raw.githubusercontent.com/jianguoz/Few-Shot-Intent-Detection/"
               "fa9553312b1dba54b1be0aae2d30b13171f898e5/Datasets/SNIPS")
_MIXATIS_REPO = ("https://raw.githubusercontent.com/yizhen20133868/GL-GIN/"
                 "df2bcaf0e9229838707dc9d63a4fe6934b9be307/data/MixATIS_clean")


def joint_split_names(raw: pathlib.Path) -> list[str]:
  """The subfolders of ``raw`` holding ``seq.in``, ``seq.out`` and ``label``; one holding only some of them is
  an error (never skipped)."""
  names = []
  for folder in sorted(p for p in raw.iterdir() if p.is_dir()):
    missing = [name for name in FILES if not (folder / name).is_file()]
    if len(missing) == len(FILES):
      continue
    if missing:
      raise MissingDataFile(f"{folder / missing[0]}: missing (split folder {folder.name} needs "
                              f"{', '.join(FILES)})")
    names.append(check_split_name(folder.name, folder))
  if not names:
    raise MissingDataFile(f"{raw}: no split subfolder holding {', '.join(FILES)}")
  return names


class JointNluFolder(UserFolderBuilder):
  """A user's own joint intent + BIO slot data: ``raw_dir=`` holds one subfolder per split."""
  VERSION = tfds.core.Version("1.0.0")
  SPLITS: ClassVar[tuple[str, ...]] = ()  # empty: every subfolder holding the three files

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(features=indexed_features(("text",), ("tokens", "tags", "intents")))


  def _split_generators(self, dl_manager):
    raw = self.raw_dir(dl_manager)
    return {name: self._generate_examples(raw / name) for name in self.SPLITS or joint_split_names(raw)}

  def _generate_examples(self, directory):
    for example in read_joint_split(directory):
      yield example["index"], example


class SnipsJoint(JointNluFolder):
  """SNIPS joint intent + slot data (Goo et al., 2018 split), 7 intents, 72 BIO tags in train."""
  RAW_FOLDER = "SNIPS_BIO"
  SPLITS = ("train", "valid", "test")
  DOWNLOAD_URLS = {f"{s}/{f}": f"{_SNIPS_REPO}/{s}/{f}" for s in SPLITS for f in FILES}


class Mixatis(JointNluFolder):
  """MixATIS_clean multi-intent ATIS (Qin et al., 2020): 1-3 intents per utterance, labels joined by ``#``."""
  RAW_FOLDER = "MixATIS_clean"
  SPLITS = ("train", "dev", "test")
  DOWNLOAD_URLS = {f"{s}/{f}": f"{_MIXATIS_REPO}/{s}/{f}" for s in SPLITS for f in FILES}
