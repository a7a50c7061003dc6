"""SNIPS few-shot slot-tagging episodes of Hou et al. (2020), "Few-shot Slot Tagging with Collapsed Dependency
Transfer and Label-enhanced Task-adaptive Projection Network" (ACL 2020): 7 leave-one-domain-out folds over the
7 SNIPS domains, 1-shot (config ``shot_1``, query sets of 20 utterances) and 5-shot (``shot_5``, query sets of 10).

Splits, k = 1..7: ``fold{k}_train`` (500 episodes, 100 from each of 5 domains), ``fold{k}_valid`` and
``fold{k}_test`` (100 episodes of one held-out domain each). Shipped caveat: ``fold{k}_valid`` is byte-identical
to ``fold{k+1}_test`` (``fold7_valid`` to ``fold1_test``), i.e. the valid domain of fold k is the test domain of
fold k+1; episodes are kept as shipped, not de-duplicated.

One example per episode: ``index`` (running number in file order: domains, then episodes), ``domain`` (the
JSON key), ``support`` and ``query``, each a ``Sequence`` of ``{tokens, tags, intent}``. TFDS cannot write
nested ragged sequences without TensorFlow, so ``tokens`` and ``tags`` are stored space-joined (the builder
checks that no token is empty or holds whitespace, so ``str.split`` restores them exactly); ``load_episodes``
returns episodes with ``support`` / ``query`` as lists of ``{"tokens": [...], "tags": [...], "intent": str}``.
Errors name the file, domain, episode, set, utterance and field (the shipped files are one line each).
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import tensorflow_datasets as tfds

from fewshot_nlu.data.bio import validate_bio
from fewshot_nlu.data.builders.base import RawFolderBuilder, indexed_features, load_split, read_json
from fewshot_nlu.errors import DataError

FOLDS = range(1, 8)
PARTS = ("train", "valid", "test")
SET_FIELDS = ("seq_ins", "seq_outs", "labels")
_REPO = ("https://raw.githubusercontent.com/AtmaHou/PromptSlotTagging/"
         "5926b0fe12c8c9e8c075739a9b1bd898d77f4ad2/original_data/snips")


@dataclasses.dataclass(eq=False)
class SlotsConfig(tfds.core.BuilderConfig):
  shots: int = 1


def episode_file(shots: int, part: str, fold: int) -> str:
  """The shipped path of one episode file, relative to the raw folder."""
  if shots == 1:
    return f"xval_snips/snips_{part}_{fold}.json"
  return f"xval_snips_shot_{shots}/snips-{part}-{fold}-shot-{shots}.json"


def utterance(tokens: Any, tags: Any, intent: Any, where: str) -> dict[str, str]:
  for field, values in (("seq_ins", tokens), ("seq_outs", tags)):
    if not isinstance(values, list):
      raise DataError(f"{where}: field {field!r} is not a list")
    bad = next((v for v in values if not isinstance(v, str) or v.split() != [v]), None)
    if bad is not None:
      raise DataError(f"{where}: field {field!r}: token {bad!r} is empty or holds whitespace")
  if len(tags) != len(tokens):
    raise DataError(f"{where}: field 'seq_outs': {len(tags)} tags for {len(tokens)} tokens")
  validate_bio(tags, f"{where}: field 'seq_outs'")
  if not isinstance(intent, str) or not intent:
    raise DataError(f"{where}: field 'labels': {intent!r} is not a non-empty string")
  return {"tokens": " ".join(tokens), "tags": " ".join(tags), "intent": intent}


def episode_set(episode: Any, part: str, where: str) -> list[dict[str, str]]:
  """The ``support`` or ``query`` set of an episode, one dict per utterance."""
  columns = episode.get(part) if isinstance(episode, dict) else None
  if not isinstance(columns, dict):
    raise DataError(f"{where}: field {part!r} missing or not an object")
  missing = [field for field in SET_FIELDS if not isinstance(columns.get(field), list)]
  if missing:
    raise DataError(f"{where} {part}: field {missing[0]!r} missing or not a list")
  sizes = [len(columns[field]) for field in SET_FIELDS]
  if len(set(sizes)) > 1:
    raise DataError(f"{where} {part}: fields {', '.join(SET_FIELDS)} differ in length ({sizes})")
  return [utterance(*row, f"{where} {part} utterance {number}")
          for number, row in enumerate(zip(*(columns[field] for field in SET_FIELDS)))]


def read_episodes(path: pathlib.Path) -> list[dict[str, Any]]:
  """The episodes of one file ``{domain: [{support, query}, ...]}``, validated, in file order."""
  data = read_json(path)
  if not isinstance(data, dict):
    raise DataError(f"{path}: expected a JSON object {{domain: [episode, ...]}}, got {type(data).__name__}")
  examples = []
  for domain, episodes in data.items():
    if not isinstance(episodes, list):
      raise DataError(f"{path}: domain {domain!r}: expected a list of episodes")
    for number, episode in enumerate(episodes):
      where = f"{path}: domain {domain!r} episode {number}"
      examples.append({"index": len(examples), "domain": domain,
                       **{part: episode_set(episode, part, where) for part in ("support", "query")}})
  return examples


def utterances(decoded_set: dict[str, list[str]]) -> list[dict[str, Any]]:
  """A decoded ``support`` / ``query`` (a dict of lists) -> ``[{"tokens", "tags", "intent"}, ...]``."""
  return [{"tokens": tokens.split(), "tags": tags.split(), "intent": intent}
          for tokens, tags, intent in zip(decoded_set["tokens"], decoded_set["tags"], decoded_set["intent"])]


def load_episodes(builder: tfds.core.DatasetBuilder, split: str) -> list[dict[str, Any]]:
  """The episodes of ``split`` in file order, ``support`` / ``query`` as lists of utterance dicts."""
  return [{**episode, "support": utterances(episode["support"]), "query": utterances(episode["query"])}
          for episode in load_split(builder, split)]


class SnipsFewshotSlots(RawFolderBuilder):
  """Hou et al. (2020) SNIPS few-shot slot-tagging episodes (see module docstring)."""
  VERSION = tfds.core.Version("1.0.0")
  RAW_FOLDER = "SNIPS_fewshot_slot"
  BUILDER_CONFIGS = [SlotsConfig(name=f"shot_{k}", shots=k, description=f"{k}-shot episodes") for k in (1, 5)]
  DOWNLOAD_URLS = {path: f"{_REPO}/{path}" for k in (1, 5) for part in PARTS for fold in FOLDS
                   for path in [episode_file(k, part, fold)]}

  def _info(self) -> tfds.core.DatasetInfo:
    utterance_features = {name: tfds.features.Text() for name in ("tokens", "tags", "intent")}
    return self.dataset_info_from_configs(
        features=indexed_features(("domain",), support=tfds.features.Sequence(utterance_features),
                                  query=tfds.features.Sequence(utterance_features)),
        homepage="https://github.com/AtmaHou/FewShotTagging",
    )


  def _split_generators(self, dl_manager):
    raw, shots = self.raw_dir(dl_manager), self.builder_config.shots
    return {f"fold{fold}_{part}": self._generate_examples(raw / episode_file(shots, part, fold))
            for fold in FOLDS for part in PARTS}

  def _generate_examples(self, path):
    for example in read_episodes(path):
      yield example["index"], example
