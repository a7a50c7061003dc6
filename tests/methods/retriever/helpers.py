"""The Retriever's SNIPS config and a toy SNIPS episode folder (shared by methods/retriever/test_slots,
methods/test_span_training, test_predict, test_multiprocess and multiprocess_configs)."""

from __future__ import annotations

import json
import pathlib

import numpy as np


def _config(reduction="max"):
  from configs import retriever_snips
  config = retriever_snips.get_config()
  config.retriever.reduction = reduction
  config.retriever.per_label_batch = 4
  return config


def _toy_episodes(domain: str, rng) -> list[dict]:
  templates = [("play {x} please", "O B-artist O"), ("set an alarm for {x}", "O O O O B-time"),
               ("book a table at {x}", "O O O O B-place")]
  values = ["jazz", "seven", "boston", "money", "music"]

  def utterance():
    text, tags = templates[rng.integers(len(templates))]
    return {"seq": text.format(x=values[rng.integers(len(values))]).split(), "tags": tags.split()}

  episodes = []
  for _ in range(2):
    sets = {}
    for part, size in (("support", 4), ("query", 3)):
      rows = [utterance() for _ in range(size)]
      sets[part] = {"seq_ins": [r["seq"] for r in rows], "seq_outs": [r["tags"] for r in rows],
                    "labels": ["intent"] * size}
    episodes.append(sets)
  return {domain: episodes}


def write_toy_snips(root: pathlib.Path) -> pathlib.Path:
  from fewshot_nlu.data.builders.slots import FOLDS, PARTS, episode_file
  rng = np.random.default_rng(0)
  for shots in (1, 5):
    for fold in FOLDS:
      for part in PARTS:
        path = root / episode_file(shots, part, fold)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_toy_episodes(f"Domain{fold}{part}", rng)))
  return root
