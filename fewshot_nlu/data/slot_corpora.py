"""The public slot-annotated corpora a general span encoder learns from, as annotated examples
(``data.annotated.Example``): only splits meant for training, never a test split.

  * ``snips``: SNIPS_BIO ``train`` (13,084 utterances, 39 slot types; ``valid`` for development);
  * ``mixatis``: MixATIS_clean ``train`` (13,162, ATIS's slot types; ``dev`` for development);
  * ``nlupp``: NLU++ banking and hotels, every fold (3,080 utterances, 17 slot types; NLU++ ships no test split,
    its folds are its evaluation: leave it out when NLU++ is scored);
  * ``sgd``: the user turns of the shipped SGD training dialogues that carry slot spans (26 services).

``examples(name, data_dir, split)`` reads one; ``SOURCES`` names them. Slot labels are prefixed by the corpus
(``snips/city``), so two corpora's like-named slots are not forced together.
"""

from __future__ import annotations

import json
import pathlib

from fewshot_nlu.data import annotated
from fewshot_nlu.errors import MissingDataFile

SOURCES = ("snips", "mixatis", "nlupp", "sgd")
FOLDERS = {"snips": "SNIPS_BIO", "mixatis": "MixATIS_clean", "nlupp": "NLUPP", "sgd": "SGD"}
DEV_SPLITS = {"snips": "valid", "mixatis": "dev"}  # development data for the ones that have some


def examples(name: str, data_dir: str | pathlib.Path, split: str = "train") -> list[annotated.Example]:
  """The annotated utterances of corpus ``name``'s ``split`` (``train``, or its ``DEV_SPLITS`` entry)."""
  root = pathlib.Path(data_dir).expanduser() / FOLDERS[name]
  if not root.is_dir():
    raise MissingDataFile(f"{root}: no such folder (the {name} corpus; set config.data.dir)")
  if name in ("snips", "mixatis"):
    rows = annotated.read_joint_folder(root / split, multi_intent=True).examples
  elif name == "nlupp":
    rows = list(_nlupp(root))
  else:
    rows = list(_sgd(root))
  return [annotated.Example(e.text, e.intent, tuple(annotated.Entity(x.start, x.end, f"{name}/{x.entity}", x.value,
                                                                      x.role) for x in e.entities), e.where)
          for e in rows]


def _nlupp(root: pathlib.Path):
  for path in sorted((root / "data").glob("*/fold*.json"), key=lambda p: (p.parent.name, int(p.stem[4:]))):
    yield from _nlupp_fold(path)


def _nlupp_fold(path: pathlib.Path):
  for i, row in enumerate(json.loads(path.read_text(encoding="utf-8"))):
    entities = [{"start": slot["span"][0], "end": slot["span"][1], "entity": f"{path.parent.name}_{name}"}
                for name, slot in (row.get("slots") or {}).items()]
    yield annotated.example(row["text"], None, without_overlaps(entities), f"{path}[{i}]")


def nlupp_folds(data_dir: str | pathlib.Path, domain: str) -> list[list[annotated.Example]]:
  """NLU++'s 20 shipped folds of ``domain`` (``banking`` | ``hotels``), each a list of slot-annotated examples
  (labels ``<domain>_<slot>``, without intents; nested slots resolved as ``examples`` does). Its "low" (20-fold)
  setting trains on one fold and tests on the other 19."""
  root = pathlib.Path(data_dir).expanduser() / FOLDERS["nlupp"] / "data" / domain
  paths = sorted(root.glob("fold*.json"), key=lambda p: int(p.stem[4:]))
  if not paths:
    raise MissingDataFile(f"{root}: no NLU++ folds (fold0.json ... fold19.json; set the data folder)")
  return [list(_nlupp_fold(path)) for path in paths]


def _sgd(root: pathlib.Path):
  for path in sorted((root / "train").glob("dialogues_*.json")):
    for d, dialogue in enumerate(json.loads(path.read_text(encoding="utf-8"))):
      for t, turn in enumerate(dialogue.get("turns", ())):
        if turn.get("speaker") != "USER":
          continue
        entities = [{"start": s["start"], "end": s["exclusive_end"], "entity": s["slot"]}
                    for frame in turn.get("frames", ()) for s in frame.get("slots", ())]
        if entities:
          yield annotated.example(turn["utterance"], None, without_overlaps(entities), f"{path}[{d}].turns[{t}]")


def without_overlaps(entities: list[dict]) -> list[dict]:
  """One entity per character: SGD marks a value once per frame (twice when two frames share it), NLU++ can
  give two slots nested spans (a date and a time period); keep one of each span, and of overlapping spans the
  one that starts first (the longer of two that start together)."""
  kept = []
  for e in sorted({(e["start"], e["end"]): e for e in entities}.values(), key=lambda e: (e["start"], -e["end"])):
    if not kept or e["start"] >= kept[-1]["end"]:
      kept.append(e)
  return kept
