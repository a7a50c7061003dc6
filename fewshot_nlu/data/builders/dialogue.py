"""Dialogue pairs for contrastive dialogue-representation pretraining (DSE, ConvFiT Stage 1) and
response-selection evaluation, from the Schema-Guided Dialogue (SGD) and Taskmaster-4 dialogues.

Raw files (the layout of ``shared/data``; see each folder's PROVENANCE.md):
  * ``SGD/train/dialogues_*.json``: JSON lists of ``{"dialogue_id", "turns": [{"speaker", "utterance"}]}``
    (``schema.json`` is not a dialogue file and is not read);
  * ``Taskmaster4/TM-4-2024/data/*.json``: JSON lists of ``{"conversation_id", "utterances": [{"index",
    "speaker", "text"}]}``.
The builder spans two raw folders, so ``raw_dir=`` (or ``$FEWSHOT_NLU_DATA``) names the *root* holding ``SGD/``
and ``Taskmaster4/``, not one dataset folder. There is no download: SGD and Taskmaster-4 are published whole,
while these folders hold chosen subsets.

Every example is one (query, response) pair of turns of one dialogue. Features:
  * ``index``: position among all pairs of the config (train and heldout numbered together), in raw order:
    sources in ``config.sources`` order, files by name, dialogues and turns in file order;
  * ``source``: ``"sgd"`` or ``"taskmaster4"``; ``dialogue_id``: SGD ``dialogue_id`` / TM-4 ``conversation_id``;
  * ``turn``: position of the response turn in its dialogue (0-based); the query turns are the turns right
    before it, so ``query == turns[turn - len(query):turn]``;
  * ``query``: the query turns, oldest first, as a sequence: the tokenizer-specific separator (``[SEP]``,
    ``</s>``) is applied when they are joined at tokenization time;
  * ``response``: the turn that follows the query.

Configs (``pairing``):
  * ``consecutive``: DSE's positive pairs of consecutive utterances (u_i, u_{i+1}) of the same dialogue
    (paper §3.1; ``query == [anchor]``, ``response`` is the positive). DSE Appendix A.1: "We filter out
    sentences with less or equal to 3 words" (words = whitespace-separated tokens). The paper does not say
    whether utterances are removed before pairing; here a pair is dropped when either of its two utterances
    has <= ``short_words`` words, so that every pair is truly consecutive in the dialogue.
  * ``multi_turn``: DSE §4.4's multi-utterance queries, (u_i [SEP] u_{i+1}, u_{i+2}) for ``query_turns=2``
    ((u_i [SEP] u_{i+1} [SEP] u_{i+2}, u_{i+3}) for 3); the same short-utterance rule applies to every turn.
  * ``context_response``: ConvFiT Stage 1 style (context, response): every turn but the first is a response,
    its context the up to ``context_window`` turns before it. No word filter (``short_words=-1``): ConvFiT
    takes (context, response) pairs as they are, and short answers ("Yes please.") are real responses.
A candidate pair containing a short turn is dropped as a whole; the numbers of short utterances and dropped
pairs are logged per source.

Splits: ``train`` and ``heldout``. A dialogue is held out when the first 8 bytes of
``sha256("<source>/<dialogue_id>")``, read as a big-endian integer and divided by 2**64, are below
``heldout_fraction``: deterministic, independent of file order, and no dialogue contributes to both splits.
``heldout`` serves response-selection evaluation (rank each query's response among 100 candidates).

Counts on the full ``shared/data`` subsets (SGD 4,509 dialogues / 71,646 turns, 6,726 of <= 3 words; TM-4
1,000 dialogues / 3,766 utterances, 586 of <= 3 words); 245 dialogues (SGD 204, TM-4 41) are held out:
  * ``consecutive``: 56,653 pairs (SGD 55,030 of 67,137 candidates, TM-4 1,623 of 2,766; 12,107 + 1,143
    dropped for a short utterance); train 54,088 pairs, heldout 2,565.
  * ``multi_turn`` (2 query turns): 47,843 pairs (SGD 47,209 of 62,628, TM-4 634 of 1,766); train 45,665,
    heldout 2,178.
  * ``context_response`` (window 3): 69,903 pairs (SGD 67,137, TM-4 2,766; none dropped); train 66,774,
    heldout 3,129.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import logging
import pathlib
from typing import Any, Callable, Iterator

import numpy as np
import tensorflow_datasets as tfds

from fewshot_nlu.data.builders.base import DATA_ENV, RawFolderBuilder, raw_root
from fewshot_nlu.data.builders.base import indexed_features, read_json
from fewshot_nlu.errors import DataError, MissingDataFile

log = logging.getLogger(__name__)

PAIRINGS = ("consecutive", "multi_turn", "context_response")


@dataclasses.dataclass(eq=False)
class DialoguePairsConfig(tfds.core.BuilderConfig):
  pairing: str = "consecutive"  # one of PAIRINGS
  query_turns: int = 2  # multi_turn: number of query turns before the response
  context_window: int = 3  # context_response: at most this many context turns before the response
  short_words: int = 3  # pairs with a turn of <= this many words are dropped; -1 keeps all
  heldout_fraction: float = 0.05  # expected share of dialogues in the heldout split
  sources: tuple[str, ...] = ("sgd", "taskmaster4")
  # Reads only the first ``max_files`` raw files (by name) of each source: for quick tests. None reads all.
  max_files: int | None = None


@dataclasses.dataclass(frozen=True)
class Dialogue:
  source: str
  dialogue_id: str
  turns: tuple[str, ...]
  where: str  # "<file>: dialogue #<n>", for error messages


def _load_json_list(path: pathlib.Path) -> list[Any]:
  data = read_json(path)
  if not isinstance(data, list):
    raise DataError(f"{path}: expected a JSON list of dialogues, got {type(data).__name__}")
  return data


def _field(record: Any, key: str, kind: type, where: str) -> Any:
  """``record[key]``, checked to be a ``kind``; errors name ``where`` and the field."""
  if not isinstance(record, dict):
    raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}")
  if key not in record:
    raise DataError(f"{where}: missing field {key!r}")
  value = record[key]
  if not isinstance(value, kind):
    raise DataError(f"{where}: field {key!r} must be {kind.__name__}, got {type(value).__name__}")
  return value


def _read_dialogues(path: pathlib.Path, source: str, id_key: str, turns_key: str,
                    text_key: str) -> Iterator[Dialogue]:
  for number, record in enumerate(_load_json_list(path)):
    where = f"{path}: dialogue #{number}"
    dialogue_id = _field(record, id_key, str, where)
    turns = _field(record, turns_key, list, where)
    texts = []
    for position, turn in enumerate(turns):
      turn_where = f"{where} ({dialogue_id}) {turns_key}[{position}]"
      texts.append(_field(turn, text_key, str, turn_where))
      if "index" in turn and turn["index"] != position:
        raise DataError(f"{turn_where}: field 'index' is {turn['index']!r}, expected {position} "
                         "(turns out of order)")
    yield Dialogue(source, dialogue_id, tuple(texts), where)


def read_sgd(path: pathlib.Path) -> Iterator[Dialogue]:
  return _read_dialogues(path, "sgd", "dialogue_id", "turns", "utterance")


def read_taskmaster(path: pathlib.Path) -> Iterator[Dialogue]:
  return _read_dialogues(path, "taskmaster4", "conversation_id", "utterances", "text")


@dataclasses.dataclass(frozen=True)
class Source:
  folder: str  # below the raw root
  pattern: str  # dialogue files below the folder
  read: Callable[[pathlib.Path], Iterator[Dialogue]]


SOURCES = {
    "sgd": Source("SGD", "train/dialogues_*.json", read_sgd),
    "taskmaster4": Source("Taskmaster4", "TM-4-2024/data/*.json", read_taskmaster),
}


def source_files(root: pathlib.Path, name: str, max_files: int | None = None) -> list[pathlib.Path]:
  source = SOURCES[name]
  files = sorted((root / source.folder).glob(source.pattern))
  if not files:
    raise MissingDataFile(f"{root / source.folder}: no files match {source.pattern!r}")
  return files[:max_files]


def read_source(root: pathlib.Path, name: str, max_files: int | None = None) -> Iterator[Dialogue]:
  """Dialogues of one source in raw order; a dialogue id seen twice is an error."""
  seen: dict[str, str] = {}
  for path in source_files(root, name, max_files):
    for dialogue in SOURCES[name].read(path):
      if dialogue.dialogue_id in seen:
        raise DataError(f"{dialogue.where}: duplicate dialogue id {dialogue.dialogue_id!r} "
                         f"(first in {seen[dialogue.dialogue_id]})")
      seen[dialogue.dialogue_id] = dialogue.where
      yield dialogue


def is_heldout(source: str, dialogue_id: str, fraction: float) -> bool:
  digest = hashlib.sha256(f"{source}/{dialogue_id}".encode("utf-8")).digest()
  return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def query_turn_range(config: DialoguePairsConfig) -> tuple[int, int]:
  """(fewest, most) query turns before a response."""
  return {"consecutive": (1, 1), "multi_turn": (config.query_turns, config.query_turns),
          "context_response": (1, config.context_window)}[config.pairing]


def check_config(config: DialoguePairsConfig) -> None:
  problems = []
  if config.pairing not in PAIRINGS:
    problems.append(f"pairing {config.pairing!r} is not one of {PAIRINGS}")
  if config.query_turns < 1 or config.context_window < 1:
    problems.append(f"query_turns ({config.query_turns}) and context_window ({config.context_window}) "
                    "must be >= 1")
  if not 0.0 <= config.heldout_fraction < 1.0:
    problems.append(f"heldout_fraction {config.heldout_fraction} is not in [0, 1)")
  unknown = sorted(set(config.sources) - set(SOURCES))
  if unknown or not config.sources:
    problems.append(f"sources {config.sources} must be a non-empty subset of {sorted(SOURCES)}")
  if config.max_files is not None and config.max_files < 1:
    problems.append(f"max_files {config.max_files} must be >= 1 or None")
  if problems:
    raise DataError(f"DialoguePairsConfig {config.name!r}: " + "; ".join(problems))


def dialogue_pairs(dialogue: Dialogue, config: DialoguePairsConfig,
                   counts: collections.Counter) -> Iterator[tuple[int, int]]:
  """(first query turn, response turn) of the dialogue's kept pairs; ``counts`` gets the utterances,
  short utterances, candidate and dropped pairs."""
  fewest, most = query_turn_range(config)
  short = [len(text.split()) <= config.short_words for text in dialogue.turns]
  counts["dialogues"] += 1
  counts["utterances"] += len(short)
  counts["short_utterances"] += sum(short)
  for response in range(fewest, len(short)):
    first = max(0, response - most)
    counts["candidates"] += 1
    if any(short[first:response + 1]):
      counts["dropped"] += 1
      continue
    yield first, response


def make_examples(dialogues: Iterator[Dialogue], config: DialoguePairsConfig
                  ) -> tuple[list[tuple[bool, dict[str, Any]]], dict[str, collections.Counter]]:
  """(heldout?, example) for every kept pair in raw order, and per-source counts."""
  examples = []
  counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  for dialogue in dialogues:
    source_counts = counts[dialogue.source]
    heldout = is_heldout(dialogue.source, dialogue.dialogue_id, config.heldout_fraction)
    split = "heldout" if heldout else "train"
    pairs = list(dialogue_pairs(dialogue, config, source_counts))
    source_counts[f"{split}_pairs"] += len(pairs)
    source_counts[f"{split}_dialogues"] += bool(pairs)
    for first, response in pairs:
      examples.append((heldout, {
          "index": len(examples), "source": dialogue.source, "dialogue_id": dialogue.dialogue_id,
          "turn": response, "query": list(dialogue.turns[first:response]),
          "response": dialogue.turns[response]}))
  return examples, counts


class DialoguePairs(RawFolderBuilder):
  """(query turns, response) pairs of SGD and Taskmaster-4 dialogues (see module docstring)."""

  VERSION = tfds.core.Version("1.0.0")
  BUILDER_CONFIGS = [
      DialoguePairsConfig(name="consecutive", description="DSE: consecutive utterances, both > 3 words"),
      DialoguePairsConfig(name="multi_turn", pairing="multi_turn",
                          description="DSE §4.4: 2 consecutive query utterances -> the next one"),
      DialoguePairsConfig(name="context_response", pairing="context_response", short_words=-1,
                          description="ConvFiT Stage 1: up to 3 context turns -> the response"),
  ]
  MANUAL_DOWNLOAD_INSTRUCTIONS = (
      "Point raw_dir= (or $FEWSHOT_NLU_DATA) at the folder holding SGD/ and Taskmaster4/; see "
      "shared/data/README.md for the layout.")

  def raw_dir(self, dl_manager: tfds.download.DownloadManager | None = None) -> pathlib.Path:
    """The root holding the source folders (``raw_dir=``, else ``$FEWSHOT_NLU_DATA``); no download."""
    root = self._raw_dir_arg if self._raw_dir_arg is not None else raw_root()
    missing = [SOURCES[s].folder for s in self.builder_config.sources
               if s in SOURCES and not (root / SOURCES[s].folder).is_dir()]
    if missing:
      raise MissingDataFile(
          f"{self.name}: {str(root)!r} lacks {', '.join(f'{m}/' for m in missing)}. Pass raw_dir= (the folder "
          f"holding {', '.join(f'{SOURCES[s].folder}/' for s in self.builder_config.sources)}) or set "
          f"${DATA_ENV} to it")
    return root

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
        features=indexed_features(texts=("source", "dialogue_id", "response"), text_lists=("query",),
                                  turn=tfds.features.Scalar(np.int64)),
        homepage="https://github.com/google-research-datasets/dstc8-schema-guided-dialogue",
    )

  def _split_generators(self, dl_manager):
    config = self.builder_config
    check_config(config)
    root = self.raw_dir(dl_manager)
    dialogues = (d for s in config.sources for d in read_source(root, s, config.max_files))
    examples, counts = make_examples(dialogues, config)
    for source, c in counts.items():
      log.info("%s/%s %s: %d dialogues, %d utterances (%d of <= %d words); %d of %d candidate pairs dropped; "
               "train %d pairs / %d dialogues, heldout %d pairs / %d dialogues", self.name, config.name, source,
               c["dialogues"], c["utterances"], c["short_utterances"], config.short_words, c["dropped"],
               c["candidates"], c["train_pairs"], c["train_dialogues"], c["heldout_pairs"],
               c["heldout_dialogues"])
    return {"train": self._generate_examples(examples, heldout=False),
            "heldout": self._generate_examples(examples, heldout=True)}

  def _generate_examples(self, examples, heldout: bool):
    for example_heldout, example in examples:
      if example_heldout == heldout:
        yield example["index"], example
