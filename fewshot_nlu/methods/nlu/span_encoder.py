"""The general span encoder (``config.method = "span_encoder"``): the Retriever's batch softmax (Yu et al.,
2021, §5.1, Eq. 4; ``losses.batch_softmax``) over the gold slot spans of the public slot corpora
(``data.slot_corpora``: SNIPS, MixATIS, NLU++, SGD train splits; never a test split), so that a team's slot
filler starts from an encoder that already tells slot values from the words around them. ``data.exclude``
leaves corpora out (a benchmark on one of them uses an encoder that never saw it).

Training (``methods.span_training.train``, the Retriever wing's own loop) follows ``configs/retriever_snips.py``'s
deviations from App. A.1: the model cut after ``retriever.encoder_layers`` layers, its embeddings and layer 0
frozen, "none" spans of each item's utterance in the softmax, s = 20 cos; batches of ``retriever.per_label_batch``
spans of each of ``retriever.labels_per_batch`` labels drawn per step (the corpora hold ~190 slot types), for
``train.max_steps`` steps; at most ``retriever.max_items_per_label`` spans of a label are kept (seeded).

The run exports the encoder (``export/``, with ``span_encoder.json`` recording its corpora and base model) and,
with ``install`` (and nothing excluded), copies it to ``install_dir(model)``
(``$FEWSHOT_NLU_CACHE/span_encoder/<model>``, default ``~/.cache/fewshot_nlu``), where ``fit(..., method="nlu")``
finds it for a slot filler on that model: one installed encoder per base model, so building one on MPNet-base
leaves the MiniLM one in place.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pathlib
import re
import shutil

import jax
import ml_collections
import numpy as np

from fewshot_nlu import config_checks, workdirs
from fewshot_nlu.data import annotated, slot_corpora
from fewshot_nlu.encoders import pretrained
from fewshot_nlu.methods import span_training

log = logging.getLogger(__name__)

MARKER = "span_encoder.json"


def install_root() -> pathlib.Path:
  """Where general span encoders are installed, one folder per base model."""
  return workdirs.cache_root() / "span_encoder"


def install_dir(model_name: str) -> pathlib.Path:
  """The install folder of the general span encoder built on ``model_name``: the name itself where it is a plain
  name (``minilm-l6``, ``mpnet-base``), else its characters kept readable plus a hash of the whole name."""
  slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model_name).strip("_.")
  if slug != model_name:
    slug = f"{slug[-60:]}-{hashlib.sha1(model_name.encode()).hexdigest()[:8]}"
  return install_root() / slug


def installed(model_name: str) -> pathlib.Path | None:
  """The installed general span encoder built on ``model_name``, if any (also one installed by a version that kept a
  single encoder directly in ``install_root()``, where it was built on that model)."""
  for folder in (install_dir(model_name), install_root()):
    if (folder / MARKER).is_file() and base_model(folder) == model_name:
      return folder
  return None


def installed_models() -> list[str]:
  """The base models of every installed general span encoder."""
  root = install_root()
  markers = [root / MARKER, *sorted(root.glob(f"*/{MARKER}"))] if root.is_dir() else []
  return [base_model(m.parent) for m in markers if m.is_file() and not m.parent.name.startswith(".")]


def base_model(folder: pathlib.Path) -> str:
  """The model name a general span encoder export was built on (its marker's ``base_model``)."""
  return json.loads((folder / MARKER).read_text())["base_model"]


def validate(config: ml_collections.ConfigDict) -> None:
  span_training.validate(config)
  config_checks.require_positive(config, "retriever.encoder_layers", "retriever.max_words",
                                 "retriever.max_items_per_label")
  config_checks.require_non_negative(config, "retriever.labels_per_batch")
  unknown = [s for s in (*config.data.sources, *config.data.exclude) if s not in slot_corpora.SOURCES]
  if unknown:
    raise config_checks.ConfigError(f"config.data.sources / exclude: {unknown[0]!r} is no corpus; choose from "
                                    f"{slot_corpora.SOURCES}")
  if not [s for s in config.data.sources if s not in config.data.exclude]:
    raise config_checks.ConfigError("config.data.exclude: leaves no corpus to train on")
  config_checks.require_dir(config, "data.dir")
  if config.train.max_steps <= 0:
    raise config_checks.ConfigError("config.train.max_steps: must be > 0 (the corpora are too large for epochs)")


def corpus_support(config) -> tuple[list[dict], dict[str, int]]:
  """Every utterance of the corpora trained on, as support utterances (words, BIO tags), and their counts."""
  utterances, counts = [], {}
  for name in config.data.sources:
    if name in config.data.exclude:
      continue
    rows = slot_corpora.examples(name, config.data.dir)
    counts[name] = len(rows)
    for e in rows:
      _, tokens, tags = annotated.to_bio(e)
      utterances.append({"tokens": tokens, "tags": tags})
  return utterances, counts


def run(config: ml_collections.ConfigDict, workdir: pathlib.Path) -> dict:
  r = config.retriever
  model = pretrained.lower_layers(pretrained.load_pretrained(config.model.name), r.encoder_layers)
  utterances, counts = corpus_support(config)
  items = span_training.slot_items(model.tokenizer, utterances, config.model.max_length, negatives=r.negative_spans,
                                   max_words=r.max_words, seed=config.seed)
  keep = _cap_per_label(items.label_ids, r.max_items_per_label, config.seed)
  items = span_training.SpanItems(
      [items.token_ids[i] for i in keep], items.first[keep], items.last[keep], items.label_ids[keep],
      items.label_names, *(None if a is None else a[keep]
                           for a in (items.negative_first, items.negative_last, items.negative_valid)))
  log.info("span encoder: %d slot spans of %d labels from %s", len(items), len(items.label_names), counts)
  params, record = span_training.train(config, workdir, model, items, span=True, evaluate=None)
  marker = {"base_model": config.model.name, "encoder_layers": r.encoder_layers, "corpora": counts,
            "excluded": list(config.data.exclude), "spans": len(items), "labels": len(items.label_names),
            "steps": record["steps"]}
  results = {"method": config.method, "model": config.model.name, **marker}
  if jax.process_index() == 0:
    with workdirs.atomic_folder(workdir / "export") as export:
      pretrained.save_pretrained(export, model.config, params, model.tokenizer)
      (export / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
    if config.install and not config.data.exclude:
      target = install_dir(config.model.name)
      with workdirs.atomic_folder(target) as folder:
        shutil.copytree(workdir / "export", folder, dirs_exist_ok=True)
      results["installed"] = str(target)
      log.info("installed the general span encoder built on %s in %s", config.model.name, target)
  return workdirs.write_results(workdir, results)


def _cap_per_label(label_ids: np.ndarray, cap: int, seed: int) -> np.ndarray:
  """Item indices keeping at most ``cap`` items of each label (a seeded draw), in their order."""
  rng = np.random.default_rng(seed)
  keep = []
  for label in np.unique(label_ids):
    members = np.flatnonzero(label_ids == label)
    keep.append(members if len(members) <= cap else rng.choice(members, cap, replace=False))
  return np.sort(np.concatenate(keep))
