"""NLU++ (Casanueva et al., 2022, "NLU++: A Multi-Label, Slot-Rich, Generalisable Dataset for Natural Language
Understanding in Task-Oriented Dialogue"): multi-label intents and slots in two domains, configs ``banking``
(2,071 examples) and ``hotels`` (1,009).

Splits ``fold0`` .. ``fold19``: the 20 folds as shipped (``data/<domain>/fold<k>.json``, JSON lists of
``{"text", "intents"?, "slots"?}``). Features:
  * ``index``: position in the fold file; ``fold``: the fold number;
  * ``text``; ``intents`` (``Sequence(Text)``, empty where the key is omitted);
  * ``slots``: a JSON string (``json.loads`` it) of the shipped ``{slot: {"text", "span": [start, end],
    "value" | "values"}}`` mapping, ``"{}"`` where omitted. Kept as JSON because values are nested and
    heterogeneous (times, dates, periods, numbers), and kept verbatim, including the shipped ``values`` key of
    some ``date_period`` slots where the others say ``value``. Each span is checked to cut the slot's text.
Errors name the file, the example's position in the list and the field.

``protocol_splits`` gives the train / test folds of the cross-validation protocols: Multi-ConvFiT's 10-fold
low-data / high-data setups, and NLU++'s own 20-fold setup with ``n_folds=20``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

import numpy as np
import tensorflow_datasets as tfds

from fewshot_nlu.data.builders.base import RawFolderBuilder
from fewshot_nlu.data.builders.base import indexed_features, read_json
from fewshot_nlu.errors import DataError

SHIPPED_FOLDS = 20
DOMAINS = ("banking", "hotels")
FIELDS = ("text", "intents", "slots")
_REPO = ("https://raw.githubusercontent.com/PolyAI-LDN/task-specific-datasets/"
         "57ec275d8078af65b7731c2a98be812d844a6d6b/nlupp/data")


def protocol_splits(regime: Literal["low", "high"], fold: int, n_folds: int = 10) -> tuple[list[str], list[str]]:
  """``(train_split_names, test_split_names)`` of fold ``fold`` (0-based) of an ``n_folds`` cross-validation.

  The 20 shipped folds are grouped into ``n_folds`` folds of consecutive shipped folds: for 10, the pairs
  (fold0, fold1), (fold2, fold3), ... as the NLU++ README defines its 10-fold setup. Multi-ConvFiT (Vulić et
  al., 2022, §3): "For the BANKING, HOTELS, and INSURANCE-FAQ datasets (see Table 1), we adopt the standard
  10-fold cross-validation (Casanueva et al., 2022). Then, in low-data setups we use 1 fold as our training
  data [...] and test the model on the remaining 9 folds. The high-data setups are effectively the same, but
  with swapped training and test data: we now use merged data from 9 folds as training data, and test on the
  single held-out fold. All the reported scores are averages over all folds." So ``low`` trains on fold
  ``fold`` and tests on the others; ``high`` is the reverse. ``n_folds=20`` is NLU++'s 20-fold low setup.
  Join the names with ``+`` for a TFDS split (``"+".join(train)``)."""
  if regime not in ("low", "high"):
    raise DataError(f"regime must be 'low' or 'high', got {regime!r}")
  if n_folds < 2 or SHIPPED_FOLDS % n_folds:
    raise DataError(f"n_folds must divide the {SHIPPED_FOLDS} shipped folds (2, 4, 5, 10, 20), got {n_folds}")
  if not 0 <= fold < n_folds:
    raise DataError(f"fold must be in 0..{n_folds - 1}, got {fold}")
  size = SHIPPED_FOLDS // n_folds
  held = [f"fold{k}" for k in range(fold * size, (fold + 1) * size)]
  rest = [f"fold{k}" for k in range(SHIPPED_FOLDS) if f"fold{k}" not in held]
  return (held, rest) if regime == "low" else (rest, held)


@dataclasses.dataclass(eq=False)
class NluppConfig(tfds.core.BuilderConfig):
  domain: str = "banking"


def check_slots(slots: Any, text: str, where: str) -> None:
  if not isinstance(slots, dict):
    raise DataError(f"{where}: field 'slots' is not an object")
  for name, slot in slots.items():
    span = slot.get("span") if isinstance(slot, dict) else None
    if not (isinstance(span, list) and len(span) == 2 and all(isinstance(i, int) for i in span)):
      raise DataError(f"{where}: field 'slots.{name}.span' missing or not [start, end]")
    if text[span[0]:span[1]] != slot.get("text"):
      raise DataError(f"{where}: field 'slots.{name}': span {span} cuts {text[span[0]:span[1]]!r} from the "
                       f"text, not {slot.get('text')!r}")


def nlupp_example(item: Any, index: int, fold: int, where: str) -> dict[str, Any]:
  if not isinstance(item, dict):
    raise DataError(f"{where}: expected an object with {', '.join(FIELDS)}")
  unknown = sorted(set(item) - set(FIELDS))
  if unknown:
    raise DataError(f"{where}: unknown field {unknown[0]!r} (expected {', '.join(FIELDS)})")
  text, intents, slots = item.get("text"), item.get("intents", []), item.get("slots", {})
  if not isinstance(text, str) or not text.strip():
    raise DataError(f"{where}: field 'text' missing or empty")
  if not isinstance(intents, list) or not all(isinstance(i, str) and i for i in intents):
    raise DataError(f"{where}: field 'intents' is not a list of non-empty strings")
  check_slots(slots, text, where)
  return {"index": index, "fold": fold, "text": text, "intents": intents,
          "slots": json.dumps(slots, ensure_ascii=False, sort_keys=True)}


class Nlupp(RawFolderBuilder):
  """NLU++ banking / hotels, 20 shipped folds (see module docstring)."""
  VERSION = tfds.core.Version("1.0.0")
  RAW_FOLDER = "NLUPP"
  BUILDER_CONFIGS = [NluppConfig(name=d, domain=d, description=f"NLU++ {d}") for d in DOMAINS]
  DOWNLOAD_URLS = {f"data/{d}/fold{k}.json": f"{_REPO}/{d}/fold{k}.json"
                   for d in DOMAINS for k in range(SHIPPED_FOLDS)}

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
        features=indexed_features(("text", "slots"), ("intents",), fold=tfds.features.Scalar(np.int64)),
        homepage="https://github.com/PolyAI-LDN/task-specific-datasets/tree/master/nlupp",
    )


  def _split_generators(self, dl_manager):
    folder = self.raw_dir(dl_manager) / "data" / self.builder_config.domain
    return {f"fold{k}": self._generate_examples(folder / f"fold{k}.json", k) for k in range(SHIPPED_FOLDS)}

  def _generate_examples(self, path, fold):
    items = read_json(path)
    if not isinstance(items, list):
      raise DataError(f"{path}: expected a JSON list of examples, got {type(items).__name__}")
    for index, item in enumerate(items):
      yield index, nlupp_example(item, index, fold, f"{path}: example {index}")
