"""Model cards: the ``README.md`` every export carries.

A card says what the export is (method and paper, model kind), what it was made from (base model, data), how
well it did (the run's results), the command that made it, its files, and how to load it: here
(``fewshot_nlu.models.load``, ``python -m fewshot_nlu.predict``, or as a base model of another run) and, where
the export holds sentence-transformers' module files (``encoders.st_modules``), in sentence-transformers.

``write(directory)`` is called by every model's ``save`` (a card from the export alone); ``main.run`` calls
it again once a run's results exist (``write(export, config=..., results=..., command=...)``), so a training
run's export has the full card. The card is written atomically (a temporary file renamed over the old one).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
from typing import Any, Mapping

from fewshot_nlu import workdirs
from fewshot_nlu.model_kinds import KINDS

FILE = "README.md"

_NO_ST = {  # model kind -> why sentence-transformers cannot reproduce what it predicts from
    "qaid": "QAID scores queries against answers by late interaction over token vectors, which "
            "sentence-transformers' pooled vectors do not reproduce",
    "slot_filler": "the slot filler retrieves span vectors (first and last word piece of each span), not "
                   "sentence vectors",
    "multi_label": "the encoder is a bottleneck adapter over its base model, which sentence-transformers does not "
                   "load",
    "nlu": "a joint model of two exports (intents/, slots/); its intents/ export, where it is ConvFiT's, loads in "
           "sentence-transformers on its own",
}
_SKIPPED_RESULTS = ("method", "dataset", "train_split", "eval_split", "model")  # shown elsewhere in the card
MAX_METRICS = 40


def write(directory: str | os.PathLike, *, config: Any = None, results: Mapping | None = None,
          command: str | None = None, paper: str | None = None) -> None:
  """Writes ``directory/README.md`` from the export's files and, when given, the run's resolved ``config``
  (a ConfigDict or dict), ``results``, the ``command`` that ran it and the ``paper`` of its method."""
  text = render(directory, config=config, results=results, command=command, paper=paper)
  path = _path(directory) / FILE
  if isinstance(path, pathlib.Path):
    tmp = path.with_name(f".{FILE}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
  else:  # a remote (gs://) object write is atomic already
    path.write_text(text)


def _path(directory):
  return workdirs.as_path(directory) if workdirs.is_remote(directory) else pathlib.Path(directory)


def _shown(directory) -> str:
  """The folder as the card names it: its path, or for a folder still being written by ``workdirs.atomic_folder``
  (``.export.partial-xyz``) the name it will have."""
  partial = re.fullmatch(r"\.(.+)\.partial-\w+", directory.name)
  return partial.group(1) if partial else os.fspath(directory)


def render(directory, *, config: Any = None, results: Mapping | None = None, command: str | None = None,
           paper: str | None = None) -> str:
  """The card's Markdown (see ``write``)."""
  directory = _path(directory)
  config = _as_dict(config)
  kind, meta = _kind(directory)
  method = config.get("method")
  model = config.get("model", {})
  base = model.get("name") or meta.get("base_model") or _marker_base(directory)
  has_st = (directory / "modules.json").exists()

  lines = [f"# {_title(method, kind)}", ""]
  if paper:
    lines += [f"**Method:** {paper}.", ""]
  lines += [f"**Model kind:** {_describe_kind(kind)}.", ""]
  if base:
    lines += [f"**Base model:** `{base}`.", ""]
  lines += _data_lines(config)
  lines += _metric_lines(results)
  lines += ["## How it was made", ""]
  if command:
    lines += ["```bash", command, "```", ""]
  elif config:
    lines += ["Run from Python (`fewshot_nlu.main.run`); the resolved config is the run's `config.json`.", ""]
  else:
    lines += ["Saved from Python (`save`); no training run is recorded with it.", ""]
  lines += _loading_lines(directory, kind, has_st)
  lines += ["## Files", ""] + [f"- `{name}`" for name in _files(directory)] + [""]
  lines += ["Written by fewshot_nlu (`fewshot_nlu.model_card`)."]
  return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ parts

def _as_dict(config) -> dict:
  if config is None:
    return {}
  if hasattr(config, "to_json_best_effort"):
    return json.loads(config.to_json_best_effort())
  return dict(config)


def _kind(directory) -> tuple[str | None, dict]:
  """The export's model kind and metadata (None, {} for an encoder-only export)."""
  for name, kind in KINDS.items():
    path = directory / kind.meta_file
    if path.exists():
      return name, json.loads(path.read_text())
  return None, {}


def _marker_base(directory) -> str | None:
  """The base model an encoder export's marker file records (ConvFiT Stage 1, DSE, QAID pre-training)."""
  for path in sorted(directory.glob("*.json")):
    if path.name.endswith(("_stage1.json", "dse.json", "qaid_pretrain.json", "span_encoder.json")):
      return json.loads(path.read_text()).get("base_model")
  return None


def _title(method: str | None, kind: str | None) -> str:
  names = {"intent_model": "Intent classifier", "qaid": "QAID intent detector", "multi_label":
           "Multi-label intent classifier", "slot_filler": "Slot filler", "nlu": "Joint NLU model"}
  title = names.get(kind, "Sentence encoder")
  return f"{title} ({method})" if method else title


def _describe_kind(kind: str | None) -> str:
  if kind is None:
    return "encoder only (a Hugging Face checkpoint: config.json, model.safetensors, tokenizer.json)"
  return f"`{kind}`: {KINDS[kind].description}"


def _data_lines(config: dict) -> list[str]:
  data = config.get("data", {})
  if not data.get("builder"):
    return []
  source = f"`{data['builder']}`"
  if data.get("raw_dir"):
    source += f" from `{data['raw_dir']}`"
  splits = [f"trained on `{data['train_split']}`" if data.get("train_split") else None,
            f"evaluated on `{data['eval_split']}`" if data.get("eval_split") else None]
  return [f"**Data:** {source}" + "".join(f", {s}" for s in splits if s) + ".", ""]


def _flatten(results: Mapping, prefix: str = "") -> list[tuple[str, Any]]:
  rows = []
  for key, value in results.items():
    name = f"{prefix}{key}"
    if isinstance(value, Mapping):
      rows += _flatten(value, name + ".")
    elif isinstance(value, (int, float, str, bool)) and not (prefix == "" and key in _SKIPPED_RESULTS):
      rows.append((name, value))
  return rows


def _metric_lines(results: Mapping | None) -> list[str]:
  if not results:
    return []
  rows = _flatten(results)
  lines = ["## Results", "", "From the run's `results.json`:", "", "| metric | value |", "| --- | --- |"]
  lines += [f"| {name} | {value:.4g} |" if isinstance(value, float) else f"| {name} | {value} |"
            for name, value in rows[:MAX_METRICS]]
  if len(rows) > MAX_METRICS:
    lines.append(f"| ... | {len(rows) - MAX_METRICS} more in results.json |")
  return lines + [""]


EXAMPLE_FILES = ("index/payloads.jsonl", "support.jsonl", "intents/index/payloads.jsonl", "slots/support.jsonl")
DEFAULT_EXAMPLE = "I lost my card"


def example_text(directory) -> str:
  """A text for the card's examples: the export's first indexed example (its own domain's words, not a banking
  phrase on a pizza bot), else ``DEFAULT_EXAMPLE``."""
  for name in EXAMPLE_FILES:
    path = directory / name
    if path.exists():
      with path.open(encoding="utf-8") as f:
        line = f.readline()
      text = json.loads(line).get("text") if line.strip() else None
      if isinstance(text, str) and text.strip():
        return " ".join(text.split())
  return DEFAULT_EXAMPLE


def _loading_lines(directory, kind: str | None, has_st: bool) -> list[str]:
  shown = _shown(directory)
  lines = ["## Use it here", ""]
  if kind is not None:
    text = example_text(directory)
    lines += ["```bash", f"python -m fewshot_nlu.predict --model {shown} {shlex.quote(text)}", "```", "",
              "```python", "from fewshot_nlu import models", "",
              f"model = models.load({shown!r})", f"print(model.predict([{json.dumps(text)}]))", "```", ""]
  else:
    lines += [f"As the base model of another run (`--config.model.name={shown}`), or as an encoder:",
              "", "```python", "from fewshot_nlu.encoders.sentence import SentenceEncoder", "",
              f"encoder = SentenceEncoder.from_pretrained({shown!r})",
              "vectors = encoder.encode([\"I lost my card\"])", "```", ""]
  lines += ["## Use it in sentence-transformers", ""]
  if has_st:
    lines += ["The export holds sentence-transformers' module files (`modules.json`, pooling"
              + (", the Dense projection" if any(directory.glob("*_Dense")) else "")
              + ", normalisation as trained), so `SentenceTransformer` computes this model's sentence vectors"
              + (" (the classifier on top of them is this project's)" if kind else "") + ":", "",
              "```python", "from sentence_transformers import SentenceTransformer", "",
              f"encoder = SentenceTransformer({shown!r})",
              "vectors = encoder.encode([\"I lost my card\"])", "```", ""]
  else:
    reason = _NO_ST.get(kind, "the export holds no sentence-transformers module files")
    lines += [f"Not applicable: {reason}.", ""]
  return lines


def _files(directory) -> list[str]:
  names = []
  for path in sorted(directory.iterdir(), key=lambda p: p.name):
    if path.name == FILE or path.name.startswith("."):
      continue
    names.append(path.name + ("/" if path.is_dir() else ""))
  return names


def write_run_cards(workdir, *, config: Any, results: Mapping | None = None, command: str | None = None,
                    paper: str | None = None) -> list:
  """Writes the full card of every export a run left in ``workdir`` (``export/``, and ``*/export/`` of runs
  with one export per fold), each with the results written beside it (``results.json`` next to the export;
  ``results`` when there is none). Returns the export folders."""
  exports = [p for p in [workdir / "export", *sorted(workdir.glob("*/export"))] if p.is_dir()]
  for export in exports:
    beside = export.parent / "results.json"
    written = json.loads(beside.read_text()) if beside.exists() else results
    write(export, config=config, results=written, command=command, paper=paper)
  return exports
