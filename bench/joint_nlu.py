"""Joint few-shot NLU on SNIPS: intents + slots from a few annotated utterances, scored on the full SNIPS test set;
and slots in NLU++'s low-data setting.

A cell is ``snips:k<K>`` (K annotated utterances per intent, 7 intents) or ``snips:n<N>`` (N utterances drawn at
random from the whole training split, slots only: the learning curve of the slot filler). For each seed the
utterances are drawn from SNIPS ``train`` (never ``test``) and ``fewshot_nlu.fit(..., method="nlu")`` trains on
them with the shipped defaults; the model then parses all 700 ``test`` utterances (never cut):
  * intent accuracy (no rejection), slot F1 over exact spans (label, start, end: conlleval's rule on SNIPS's own
    tokens), sentence accuracy (the intent and every slot right; the joint literature's "overall accuracy").

The slot filler starts from a general span encoder that has never seen SNIPS (leave-one-dataset-out):
``--span-encoder`` is the export of ``configs/span_encoder.py`` with ``--config.data.exclude='("snips",)'``
(MixATIS, NLU++ and SGD only). Variants (``--variant``): ``learned`` (the default: the slot filler learns the
examples, steps and threshold chosen by cross-validation on them), ``retrieval`` (retrieval alone,
``slots.support_steps=(0,)``), ``untouched`` (retrieval with the untouched MiniLM cut at 3 layers); each also
as ``<variant>-threshold``: without the unlabelled spans of the examples as "no slot" (``slots.none_margins=()``);
``learned-mpnet-intents``: ``learned`` with the intent model on MPNet-base; ``learned-mpnet-slots`` /
``untouched-mpnet-slots``: the slot filler on the untouched MPNet-base cut at 6 layers (no general span encoder),
learning the examples / retrieval alone; ``learned-mpnet``: both, the intents and the slot filler, on MPNet-base.
``learned-mpnet-slots-expected`` / ``learned-mpnet-expected``: those two with expected slots
(``slots.expected_shares=(1.0,)``, opt-in: ``models.slot_filler.fill_expected``).
``learned-mpnet-general-slots`` / ``retrieval-mpnet-general-slots``: the slot filler on a general span encoder
built on MPNet-base (``--span-encoder``, the export of ``configs/span_encoder.py`` with
``--config.model.name=mpnet-base --config.retriever.encoder_layers=6``), learning the examples / retrieval alone;
``learned-mpnet-general-slots-expected``: the first with expected slots.
Rows record the span encoder's training steps (its ``results.json``); the table keeps them apart.

A cell ``nlupp-banking:f<k>`` / ``nlupp-hotels:f<k>`` is NLU++'s "low" (20-fold) setting for slots: fold k of the
domain (~100 / ~50 utterances) is the training data (slots only, NLU++'s intents unused), the other 19 folds the
test set; the paper averages the 20 folds. Its span encoder leaves NLU++ out
(``--config.data.exclude='("nlupp",)'``, ``--span-encoder runs/span_encoder_no_nlupp/export``). NLU++ can give
two slots nested spans (a date inside a time period); the slot filler predicts one slot per word, so gold keeps
one of them (``data.slot_corpora``: the one that starts first, the longer of two that start together).

  python -m fewshot_nlu.main --config=configs/span_encoder.py --workdir=runs/span_encoder_no_snips \\
      --config.data.exclude='("snips",)'
  python bench/joint_nlu.py --cells snips:k5,snips:k10 --seeds 0,1,2
  python bench/joint_nlu.py --cells snips:n8,snips:n16,snips:n32,snips:n64,snips:n128 --variant retrieval
  python bench/joint_nlu.py --cells nlupp-banking:f0-19,nlupp-hotels:f0-19 --seeds 0 \
      --span-encoder runs/span_encoder_no_nlupp/export
  python bench/joint_nlu.py --table

A cell ``restaurants8k:n<N>`` is Restaurants-8k (Coope et al., 2020; 5 slots: people, date, time, first_name,
last_name), the setting of the Span-ConveRT and ConVEx papers' few-shot tables: the shipped training file of N
utterances (``train_<i>.json``, 1/2^i of the 8,198; N = 32, 64, 128, 256, ...) as the slot-annotated examples,
all 3,731 ``test.json`` utterances scored against every gold span (18 pairs of gold spans overlap there; the
slot filler predicts one slot per word, so at most one of each pair can be found), exact (slot, start, end) match.
The data is PolyAI's (github.com/PolyAI-LDN/task-specific-datasets, ``span_extraction/restaurant8k``; not in
``$FEWSHOT_NLU_DATA``): ``--restaurants8k-dir`` or ``$RESTAURANTS8K_DIR`` names a checkout's folder. The training
file is fixed, so seeds differ only in the cross-validation folds (and the encoder learner's dropout). The
SNIPS-excluded span encoder never saw it (MixATIS, NLU++, SGD), so it is held out too. A cell
``restaurants8k-ctx:n<N>`` is the same with each utterance's context: the slots the system had asked for
(``requestedSlots``, 897 of the 3,731 test utterances and 17 of the 64 training ones), as Span-ConveRT's
requested-slot feature uses them; the examples carry them as ``requested_slot`` and ``parse`` gets them
(``requested_slots=``).

  python bench/joint_nlu.py --cells restaurants8k:n64 --seeds 0 --restaurants8k-dir DIR \
      --span-encoder runs/span_encoder_no_snips_1500/export

Rows go to ``bench/results/joint_nlu.jsonl`` (each with the command that repeats it), the table to
``bench/results/joint_nlu.md``. One process at a time (fit times are reported).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import re
import statistics
import sys
import time

import numpy as np

from runner import REPO, RESULTS, load_rows, machine, mean_std

ROWS = RESULTS / "joint_nlu.jsonl"
DEFAULT_DATA = os.environ.get("FEWSHOT_NLU_DATA", str(REPO.parent / "shared" / "data"))
DEFAULT_SPAN_ENCODER = REPO / "runs" / "span_encoder_no_snips" / "export"
VARIANTS = {"learned": {}, "retrieval": {"slots.support_steps": (0,)},
            "untouched": {"slots.support_steps": (0,), "slots.encoder": ""}}
# the same three without the unlabelled spans of the examples (slots.none_margins = (): the threshold alone
# rejects, as in the Retriever's §5.2; the shipped default before 2026-11-26 evening)
VARIANTS.update({f"{name}-threshold": {**overrides, "slots.none_margins": ()} for name, overrides in
                 list(VARIANTS.items())})
# learned / retrieval with the slot filler blind to the intent (slots.by_intent = False: every span retrieves from
# every label; the shipped default before 2026-11-27). Slots-only cells have no intents: the same as without
VARIANTS.update({f"{name}-independent": {**VARIANTS[name], "slots.by_intent": False}
                 for name in ("learned", "retrieval")})
# learned, with the intents on MPNet-base (the papers' model size; ConvFiT with the embeddings + 4 layers frozen,
# as bench/models.py's rows); the slot filler's span encoder stays the MiniLM one
VARIANTS["learned-mpnet-intents"] = {"intents.model.name": "mpnet-base", "intents.train.frozen_prefix_layers": 4}
# the slot filler learning the examples as a span metric only (slots.modes = ("metric",); the shipped default before
# 2026-11-27 midday, when the cross-validation also got the encoder's layers to choose): every learned variant
# above ran that way, so each keeps it
for _name in [n for n in VARIANTS if n.startswith("learned") and n != "learned"]:
  VARIANTS[_name] = {**VARIANTS[_name], "slots.modes": ("metric",)}
VARIANTS["learned-metric"] = {"slots.modes": ("metric",)}
# the slot filler on MPNet-base (all-mpnet-base-v2, the papers' model size) instead of MiniLM, from the untouched
# model cut after 6 of its 12 layers (slots.encoder = "": no general span encoder; the *-general-slots rows use
# one). The depth is the one the cross-validation on the examples preferred (SNIPS N = 64, seed 0, retrieval
# alone: CV F1 62.1 / 62.9 / 60.9 / 42.0 at 4 / 6 / 8 / 12 layers; joint_nlu_notes.md)
MPNET_SLOTS = {"slots.encoder": "", "slots.model": "mpnet-base", "slots.encoder_layers": 6}
VARIANTS["learned-mpnet-slots"] = MPNET_SLOTS
VARIANTS["untouched-mpnet-slots"] = {**MPNET_SLOTS, "slots.support_steps": (0,)}
# both parts on MPNet-base: the slot filler as learned-mpnet-slots, the intents as learned-mpnet-intents (ConvFiT, the
# embeddings + 4 layers frozen)
VARIANTS["learned-mpnet"] = {**MPNET_SLOTS, "intents.model.name": "mpnet-base", "intents.train.frozen_prefix_layers": 4}
# the slot filler on MPNet-base from a general span encoder built on it (``--span-encoder``: configs/span_encoder.py
# with --config.model.name=mpnet-base --config.retriever.encoder_layers=6; joint_nlu_notes.md has its command):
# learning the examples / retrieval alone
MPNET_GENERAL_SLOTS = {"slots.model": "mpnet-base", "slots.encoder_layers": 6}
VARIANTS["learned-mpnet-general-slots"] = MPNET_GENERAL_SLOTS
VARIANTS["retrieval-mpnet-general-slots"] = {**MPNET_GENERAL_SLOTS, "slots.support_steps": (0,)}
# expected slots (opt-in: a slot every example of an intent holds is filled in where decoding left it out, if the
# cross-validation prefers it; models.slot_filler.fill_expected)
for _name in ("learned-mpnet-slots", "learned-mpnet", "learned-mpnet-general-slots"):
  VARIANTS[f"{_name}-expected"] = {**VARIANTS[_name], "slots.expected_shares": (1.0,)}


def uses_span_encoder(variant: str) -> bool:
  """Whether ``variant``'s slot filler starts from the general span encoder (``--span-encoder``)."""
  return VARIANTS[variant].get("slots.encoder") != ""


def span_encoder_mismatch(variant: str, span_encoder: pathlib.Path) -> str | None:
  """Why ``span_encoder`` does not suit ``variant`` (a variant naming ``slots.model`` wants an encoder built on that
  model: its ``span_encoder.json``'s ``base_model``), or None."""
  wanted = VARIANTS[variant].get("slots.model")
  marker = span_encoder / "span_encoder.json"
  built_on = json.loads(marker.read_text()).get("base_model") if marker.is_file() else None
  if wanted and built_on != wanted:
    return (f"{span_encoder}: a span encoder built on {built_on}, but --variant {variant} puts the slot filler on "
            f"{wanted}: pass --span-encoder with one built on {wanted} (module docstring)")
  return None


def draw(data_dir: str, cell: str, seed: int) -> list[dict]:
  """The annotated training utterances of ``cell`` for ``seed`` (module docstring), as fit's JSON-lines rows."""
  from fewshot_nlu.data import annotated
  examples = annotated.read_joint_folder(pathlib.Path(data_dir) / "SNIPS_BIO" / "train").examples
  rng = np.random.default_rng(seed)
  kind, n = cell[0], int(cell[1:])
  if kind == "k":
    by_intent = collections.defaultdict(list)
    for i, e in enumerate(examples):
      by_intent[e.intent].append(i)
    chosen = [i for intent in sorted(by_intent) for i in rng.choice(by_intent[intent], n, replace=False)]
  else:
    chosen = list(rng.choice(len(examples), n, replace=False))
  return [{"text": examples[i].text, "intent": examples[i].intent if kind == "k" else None,
           "entities": [{"start": x.start, "end": x.end, "entity": x.label} for x in examples[i].entities]}
          for i in sorted(chosen)]


def nlupp_split(data_dir: str, domain: str, fold: int) -> tuple[list[dict], list[dict]]:
  """NLU++ "low" (20-fold): fold ``fold`` of ``domain`` as training rows, the other 19 as test rows (fit's
  JSON-lines form, slots only)."""
  from fewshot_nlu.data import slot_corpora
  folds = slot_corpora.nlupp_folds(data_dir, domain)

  def rows(examples):
    return [{"text": e.text, "entities": [{"start": x.start, "end": x.end, "entity": x.label} for x in e.entities]}
            for e in examples]

  return rows(folds[fold]), rows([e for k, f in enumerate(folds) if k != fold for e in f])


RESTAURANTS8K_TRAIN = 8198  # train_0.json; train_<i>.json holds 1/2^i of it
RESTAURANTS8K = ("restaurants8k", "restaurants8k-ctx")  # -ctx: the rows carry the requested slots (context)


def restaurants8k_rows(path: pathlib.Path, keep_overlaps: bool, context: bool = False) -> list[dict]:
  """A Restaurants-8k file (``[{"userInput": {"text"}, "context": {"requestedSlots"}, "labels": [{"slot",
  "valueSpan": {"startIndex", "endIndex"}}]}]``; a zero ``startIndex`` is omitted, as protobuf's JSON does) as
  fit's JSON-lines rows, slots only. Overlapping gold spans are kept (scoring) or reduced to one per character
  (training: ``without_overlaps``). ``context``: each row's ``requested_slot``, the slots the system had asked
  for (Span-ConveRT's requested-slot feature; ``restaurants8k-ctx`` cells)."""
  from fewshot_nlu.data.slot_corpora import without_overlaps
  rows = []
  for i, record in enumerate(json.loads(path.read_text())):
    entities = [{"start": int(label["valueSpan"].get("startIndex", 0)), "end": int(label["valueSpan"]["endIndex"]),
                 "entity": label["slot"]} for label in record.get("labels", [])]
    rows.append({"text": record["userInput"]["text"],
                 "entities": entities if keep_overlaps else without_overlaps(entities)})
    requested = record.get("context", {}).get("requestedSlots")
    if context and requested:
      rows[-1]["requested_slot"] = list(dict.fromkeys(requested))
  return rows


def restaurants8k_file(directory: pathlib.Path, n: int) -> pathlib.Path:
  """The shipped training file of ``n`` utterances (``train_<i>.json``, 8,198 / 2^i rounded down)."""
  for i in range(14):
    if RESTAURANTS8K_TRAIN >> i == n:
      return directory / f"train_{i}.json"
  raise SystemExit(f"restaurants8k:n{n}: the shipped training files hold 8198 >> i utterances (32, 64, 128, ...)")


def scored_spans(model, rows: list[dict]) -> dict:
  """Slot F1 / precision / recall of ``model.parse`` over ``rows`` (exact (entity, start, end) against every gold
  span, overlapping ones included)."""
  from fewshot_nlu.evaluation.span_f1 import SpanCounts
  counts = SpanCounts()
  context = [r.get("requested_slot") for r in rows]
  options = {"requested_slots": context} if any(context) else {}
  for row, answer in zip(rows, model.parse([r["text"] for r in rows], **options)):
    counts.add_spans({(e["entity"], e["start"], e["end"]) for e in row["entities"]},
                     {(e["entity"], e["start"], e["end"]) for e in answer["entities"]})
  return {"slot_f1": counts.f1 / 100, "slot_precision": counts.precision / 100, "slot_recall": counts.recall / 100,
          "num_eval": len(rows)}


def run_cell(data_dir: str, cell: str, seed: int, variant: str, span_encoder: pathlib.Path,
             workdirs: pathlib.Path, dataset: str = "snips", restaurants8k_dir: str | None = None) -> dict:
  import fewshot_nlu as fn
  test_rows = None
  if dataset == "snips":
    rows, validation = draw(data_dir, cell, seed), str(pathlib.Path(data_dir) / "SNIPS_BIO" / "test")
  elif dataset in RESTAURANTS8K:
    directory, context = pathlib.Path(restaurants8k_dir), dataset.endswith("-ctx")
    rows = restaurants8k_rows(restaurants8k_file(directory, int(cell[1:])), keep_overlaps=False, context=context)
    validation, test_rows = None, restaurants8k_rows(directory / "test.json", keep_overlaps=True, context=context)
  else:
    rows, validation = nlupp_split(data_dir, dataset.split("-", 1)[1], int(cell[1:]))
  overrides = {"slots.encoder": str(span_encoder), **VARIANTS[variant]}
  workdir = workdirs / f"{variant}-{dataset}-{cell}-seed{seed}"
  start = time.perf_counter()
  model = fn.fit(rows, validation=validation, method="nlu",
                 workdir=workdir, overwrite=True, seed=seed, **overrides)
  wall = time.perf_counter() - start
  r = model.results
  if test_rows is not None:
    r = {**r, **scored_spans(model, test_rows)}
  text = "a b c d e f g h i j k l m n o p"  # 16 words: parse latency of one utterance, after warm-up
  model.parse([text])
  times = []
  for _ in range(20):
    t = time.perf_counter()
    model.parse([text])
    times.append(time.perf_counter() - t)
  return {"name": variant, "dataset": dataset, "cell": cell, "seed": seed, "split": "test",
          "span_encoder_steps": encoder_steps(span_encoder) if uses_span_encoder(variant) else None,
          "num_train": len(rows), "wall_seconds": round(wall, 1),
          "results": {k: r.get(k) for k in ("intent_accuracy", "slot_f1", "slot_precision", "slot_recall",
                                              "sentence_accuracy", "num_eval", "intents_seconds", "slots_seconds")},
          "slots": r.get("slots"), "parse_ms_p50": round(1000 * statistics.median(times), 1),
          "command": f"python bench/joint_nlu.py --cells {dataset}:{cell} --seeds {seed} --variant {variant}"
                     + (f" --span-encoder {span_encoder}" if span_encoder != DEFAULT_SPAN_ENCODER else ""),
          "machine": machine()}


def encoder_steps(span_encoder: pathlib.Path) -> int | None:
  """The training steps of a span encoder export (its run's results.json), if recorded."""
  results = span_encoder.parent / "results.json"
  return json.loads(results.read_text()).get("steps") if results.exists() else None


# ------------------------------------------------------------------------------------------- table

def write_table() -> None:
  rows = load_rows(ROWS)
  lines = ["# Joint few-shot NLU on SNIPS (bench/joint_nlu.py)", "",
           "K annotated utterances per intent (7 intents) drawn per seed from SNIPS train, or N utterances for the "
           "slot filler alone; `fit(method=\"nlu\")` with the shipped defaults, the slot filler starting from a "
           "general span encoder trained without SNIPS (MixATIS, NLU++, SGD); scored on all 700 SNIPS test "
           "utterances. In %, mean ± std over seeds (n); fit in seconds (intents + slots, median); parse = one "
           "16-word utterance, median of 20 calls. "
           + machine([r for r in rows if r.get("dataset", "snips") == "snips"]), "",
           "| cell | variant | span encoder steps | intent acc | slot F1 | sentence acc | fit s (intents + slots) "
           "| parse ms |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
  groups = collections.defaultdict(list)
  for r in rows:
    if r.get("dataset", "snips") == "snips":
      groups[(r["cell"], r["name"], r.get("span_encoder_steps"))].append(r)

  def order(key):
    cell, name, steps = key
    return (cell[0], int(cell[1:]), -(steps or 0), list(VARIANTS).index(name) if name in VARIANTS else 99, name)

  for (cell, name, steps), rs in sorted(groups.items(), key=lambda kv: order(kv[0])):
    res = [r["results"] for r in rs]
    intent = [x["intent_accuracy"] for x in res] if cell[0] == "k" else []
    fit = [(x.get("intents_seconds") or 0) + (x.get("slots_seconds") or 0) for x in res]
    label = f"K={cell[1:]} per intent" if cell[0] == "k" else f"N={cell[1:]} (slots only)"
    lines.append(f"| {label} | {name} | {steps or '–'} | {mean_std(intent) if intent else '–'} | "
                 f"{mean_std([x['slot_f1'] for x in res])} ({len(rs)}) | "
                 f"{mean_std([x['sentence_accuracy'] for x in res]) if intent else '–'} | "
                 f"{statistics.median(fit):.0f} | {statistics.median(r['parse_ms_p50'] for r in rs):.1f} |")
  lines += nlupp_table(rows)
  lines += restaurants8k_table(rows)
  lines += ["", "## Commands", ""] + [f"- `{c}`" for c in grouped_commands(r["command"] for r in rows)]
  notes = RESULTS / "joint_nlu_notes.md"
  if notes.exists():
    lines += ["", notes.read_text().strip()]
  (RESULTS / "joint_nlu.md").write_text("\n".join(lines) + "\n")


def grouped_commands(commands) -> list[str]:
  """The rows' commands, one per variant and options: the cells that ran with the same seeds joined in one
  ``--cells`` and those seeds in one ``--seeds`` (``main`` runs every cell with every seed), in first-seen order."""
  by_rest: dict[str, dict[str, list[str]]] = {}
  for command in commands:
    cells, seeds = re.search(r"--cells (\S+)", command)[1], re.search(r"--seeds (\S+)", command)[1]
    rest = re.sub(r" --seeds \S+", "", re.sub(r" --cells \S+", "", command))
    seen = by_rest.setdefault(rest, {}).setdefault(cells, [])
    seen.extend(s for s in seeds.split(",") if s not in seen)
  out = []
  for rest, cells in by_rest.items():
    by_seeds: dict[str, list[str]] = {}
    for cell, seeds in cells.items():
      by_seeds.setdefault(",".join(sorted(seeds, key=int)), []).append(cell)
    for seeds, group in by_seeds.items():
      out.append(rest.replace(" --variant", f" --cells {compress_cells(group)} --seeds {seeds} --variant", 1))
  return out


def expand_cells(text: str) -> list[str]:
  """``--cells`` as a list: comma-separated cells, ``<dataset>:f<a>-<b>`` standing for folds a..b."""
  cells = []
  for cell in text.split(","):
    match = re.fullmatch(r"(\S+):f(\d+)-(\d+)", cell)
    cells += ([f"{match[1]}:f{k}" for k in range(int(match[2]), int(match[3]) + 1)] if match else [cell])
  return cells


def compress_cells(cells: list[str]) -> str:
  """``cells`` as ``--cells`` text, each dataset's run of consecutive folds as ``<dataset>:f<a>-<b>``
  (``expand_cells`` reads it back)."""
  out, folds = [], collections.defaultdict(list)
  for cell in cells:
    dataset, kind = cell.split(":")
    if kind[:1] == "f" and kind[1:].isdigit():
      if dataset not in folds:
        out.append(dataset)
      folds[dataset].append(int(kind[1:]))
    else:
      out.append(cell)
  text = []
  for item in out:
    if item not in folds:
      text.append(item)
      continue
    run = sorted(folds[item])
    consecutive = len(run) > 2 and run == list(range(run[0], run[-1] + 1))
    text += [f"{item}:f{run[0]}-{run[-1]}"] if consecutive else [f"{item}:f{k}" for k in run]
  return ",".join(text)


def nlupp_table(rows: list[dict]) -> list[str]:
  """The NLU++ slot rows: per domain and variant, slot F1 mean ± std over the folds run (n of 20)."""
  groups = collections.defaultdict(list)
  for r in rows:
    if r.get("dataset", "snips").startswith("nlupp-"):
      groups[(r["dataset"], r["name"], r.get("span_encoder_steps"))].append(r)
  if not groups:
    return []
  lines = ["", "## NLU++ slots, low-data (20-fold) setting", "",
           "Train on one fold of a domain, test on its other 19; slot F1 (exact spans) in %, mean ± std over the "
           "folds run (n; the paper's protocol averages all 20: fewer is unfinished). The span encoder never saw "
           "NLU++ (SNIPS, MixATIS, SGD). " + machine([r for rs in groups.values() for r in rs]), "",
           "| domain | variant | span encoder steps | folds (n of 20) | slot F1 | precision | recall | fit s "
           "| parse ms |",
           "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
  for (dataset, name, steps), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], list(VARIANTS).index(kv[0][1])
                                                                            if kv[0][1] in VARIANTS else 99)):
    res = [r["results"] for r in rs]
    folds = ",".join(str(int(r["cell"][1:])) for r in sorted(rs, key=lambda r: int(r["cell"][1:])))
    lines.append(f"| {dataset.split('-', 1)[1]} | {name} | {steps or '–'} | {folds} ({len(rs)}) | "
                 f"{mean_std([x['slot_f1'] for x in res])} | {mean_std([x['slot_precision'] for x in res])} | "
                 f"{mean_std([x['slot_recall'] for x in res])} | "
                 f"{statistics.median(x.get('slots_seconds') or 0 for x in res):.0f} | "
                 f"{statistics.median(r['parse_ms_p50'] for r in rs):.1f} |")
  return lines


def restaurants8k_table(rows: list[dict]) -> list[str]:
  """Restaurants-8k: one row per training size, variant and span encoder."""
  groups = collections.defaultdict(list)
  for r in rows:
    if r.get("dataset") in RESTAURANTS8K:
      groups[(int(r["cell"][1:]), r["name"], r.get("span_encoder_steps"), r["dataset"].endswith("-ctx"))].append(r)
  if not groups:
    return []
  lines = ["", "## Restaurants-8k slots (the Span-ConveRT / ConVEx few-shot setting)", "",
           "The shipped training file of N utterances (`train_<i>.json`), all 3,731 test utterances, exact spans "
           "against every gold span; in %, mean ± std over seeds (n: the file is fixed, seeds vary the "
           "cross-validation folds and the encoder learner's dropout). The span encoder never saw Restaurants-8k "
           "(MixATIS, NLU++, SGD). Requested slot: whether the examples and the test utterances carry the slots "
           "the system had asked for (`restaurants8k-ctx` cells; `parse(..., requested_slots=...)`), as in "
           "Span-ConveRT's setting. " + machine([r for rs in groups.values() for r in rs]), "",
           "| N | variant | requested slot | span encoder steps | slot F1 | precision | recall | fit s | parse ms |",
           "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
  for (n, name, steps, ctx), rs in sorted(groups.items(), key=lambda kv: (
      kv[0][0], kv[0][3], list(VARIANTS).index(kv[0][1]) if kv[0][1] in VARIANTS else 99)):
    res = [r["results"] for r in rs]
    lines.append(f"| {n} | {name} | {'yes' if ctx else 'no'} | {steps or '–'} | "
                 f"{mean_std([x['slot_f1'] for x in res])} ({len(rs)}) | "
                 f"{mean_std([x['slot_precision'] for x in res])} | {mean_std([x['slot_recall'] for x in res])} | "
                 f"{statistics.median(x.get('slots_seconds') or 0 for x in res):.0f} | "
                 f"{statistics.median(r['parse_ms_p50'] for r in rs):.1f} |")
  return lines


def _done(variant: str, cell: str, seed: int, steps: int | None, dataset: str = "snips") -> bool:
  return any(r["name"] == variant and r["cell"] == cell and r["seed"] == seed and r.get("dataset", "snips") == dataset
             and r.get("span_encoder_steps") == steps for r in load_rows(ROWS))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--cells", default="snips:k5,snips:k10")
  parser.add_argument("--seeds", default="0,1,2")
  parser.add_argument("--variant", default="learned", choices=sorted(VARIANTS))
  parser.add_argument("--span-encoder", default=str(DEFAULT_SPAN_ENCODER))
  parser.add_argument("--data-dir", default=DEFAULT_DATA)
  parser.add_argument("--restaurants8k-dir", default=os.environ.get("RESTAURANTS8K_DIR"),
                      help="span_extraction/restaurant8k of a PolyAI-LDN/task-specific-datasets checkout")
  parser.add_argument("--workdirs", default=str(REPO / "runs" / "bench_joint_nlu"))
  parser.add_argument("--table", action="store_true", help="only rewrite bench/results/joint_nlu.md")
  args = parser.parse_args()
  if not args.table:
    span_encoder = pathlib.Path(args.span_encoder)
    general = uses_span_encoder(args.variant)
    if general and not span_encoder.is_dir():
      raise SystemExit(f"{span_encoder}: no span encoder; build it first (module docstring)")
    mismatch = general and span_encoder_mismatch(args.variant, span_encoder)
    if mismatch:
      raise SystemExit(mismatch)
    for cell in expand_cells(args.cells):
      dataset, _, kind = cell.partition(":")
      snips = dataset == "snips" and kind[:1] in ("k", "n")
      nlupp = (dataset in ("nlupp-banking", "nlupp-hotels") and kind[:1] == "f" and kind[1:].isdigit()
               and int(kind[1:]) < 20)
      restaurants8k = dataset in RESTAURANTS8K and kind[:1] == "n"
      if not (snips or nlupp or restaurants8k) or not kind[1:].isdigit():
        raise SystemExit(f"{cell}: cells are snips:k<K>, snips:n<N>, nlupp-banking:f<fold>, nlupp-hotels:f<fold>, "
                         "restaurants8k:n<N> or restaurants8k-ctx:n<N>")
      if restaurants8k and not (args.restaurants8k_dir and pathlib.Path(args.restaurants8k_dir, "test.json").is_file()):
        raise SystemExit(f"{cell}: --restaurants8k-dir (or $RESTAURANTS8K_DIR) must name span_extraction/restaurant8k "
                         "of a github.com/PolyAI-LDN/task-specific-datasets checkout")
      for seed in map(int, args.seeds.split(",")):
        if _done(args.variant, kind, seed, encoder_steps(span_encoder) if general else None, dataset):
          print(f"{args.variant} {cell} seed {seed}: done already")
          continue
        row = run_cell(args.data_dir, kind, seed, args.variant, span_encoder, pathlib.Path(args.workdirs), dataset,
                       args.restaurants8k_dir)
        with open(ROWS, "a", encoding="utf-8") as f:
          f.write(json.dumps(row) + "\n")
        res = row["results"]
        sentence = res["sentence_accuracy"]
        print(f"{args.variant} {cell} seed {seed}: intent {res['intent_accuracy']} slot F1 {res['slot_f1']:.4f} "
              f"sentence {'–' if sentence is None else f'{sentence:.4f}'} in {row['wall_seconds']} s", flush=True)
        write_table()
  write_table()


if __name__ == "__main__":
  sys.path.insert(0, str(REPO / "bench"))
  sys.path.insert(0, str(REPO))
  main()
