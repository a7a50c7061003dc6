"""Joint NLU (``config.method = "nlu"``; ``defaults/nlu.py`` says what each part does and why).

A run reads the annotated examples (``data.annotated``), then:
  1. intents: the examples that have an intent, written as an ``intent_table`` under ``<workdir>/data``, train
     the intent method through ``runner.run`` into ``<workdir>/intents`` (its own workdir: checkpoints,
     results, report, export), as ``fit`` would train it; fewer than two intents: no intent classifier;
  2. slots: every example's words (offsets kept) and BIO tags form the slot filler's support set; the span
     encoder learns them for the step count that ``slots.folds``-fold cross-validation on the examples chooses
     with the threshold (``select``), then indexes them all; no entity anywhere: no slot filler;
  3. the ``NLUModel`` of both is exported to ``<workdir>/export``; with ``data.eval`` the run scores it there
     (intent accuracy, slot F1 on character spans, sentence accuracy: intent and every entity right) and writes
     ``predictions.tsv``;
  4. ``<workdir>/report.md`` (``methods.nlu.report``): the examples, both parts, and each entity type's F1 in
     the cross-validation, worst first.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import pathlib
import time

import jax
import ml_collections
import numpy as np

from fewshot_nlu import config_checks, console, workdirs
from fewshot_nlu.data import annotated, tsv, user_examples
from fewshot_nlu.defaults import convfit_base
from fewshot_nlu.defaults import nlu as nlu_defaults
from fewshot_nlu.encoders import pretrained
from fewshot_nlu.evaluation import span_f1
from fewshot_nlu.evaluation.span_f1 import SpanCounts
from fewshot_nlu.methods.nlu import report, span_encoder
from fewshot_nlu.models import registry
from fewshot_nlu.models.nlu_model import NLUModel
from fewshot_nlu.models import span_boundaries
from fewshot_nlu.models.slot_filler import (SlotFillerModel, expected_by_intent, fill_expected, labels_by_intent,
                                            longest_spans)
from fewshot_nlu.models.span_decoding import decode_sweep, to_bio
from fewshot_nlu.models.span_retrieval import SlotRetriever, SpanEncoder, labelled_spans
from fewshot_nlu.methods import span_training

log = logging.getLogger(__name__)

NO_THRESHOLD = 0.75  # the decoding threshold when the examples are too few to choose one (retrieval alone)
FALLBACK_RESAMPLES = 1000  # paired bootstrap resamples that weigh a less preferred setting against the pick


def validate(config: ml_collections.ConfigDict) -> None:
  if not config.data.train:
    raise config_checks.ConfigError("config.data.train: empty; give your annotated examples (a Rasa nlu.yml, a "
                                    ".jsonl / .csv with text, intent and entities, a Dialogflow export .zip, or a "
                                    "seq.in folder)")
  config_checks.require_choice(config, "intent_method", nlu_defaults.INTENT_METHODS)
  s = config.slots
  config_checks.require_positive(config, "slots.max_length", "slots.max_words", "slots.learning_rate",
                                 "slots.encoder_learning_rate", "slots.cosine_scale", "slots.folds", "slots.beam_size")
  config_checks.require_non_negative(config, "slots.encoder_layers", "slots.threshold_retries")
  if not s.support_steps or any(n < 0 for n in s.support_steps):
    raise config_checks.ConfigError(f"config.slots.support_steps: {tuple(s.support_steps)} must be step counts >= 0")
  if not s.thresholds or any(not 0 <= t <= 1 for t in s.thresholds):
    raise config_checks.ConfigError(f"config.slots.thresholds: {tuple(s.thresholds)} must be values in [0, 1]")
  if any(not 0 <= m < 1 for m in s.get("none_margins", ())):
    raise config_checks.ConfigError(f"config.slots.none_margins: {tuple(s.none_margins)} must be margins in [0, 1) "
                                    "(or empty: no unlabelled spans)")
  if any(not 0 <= b <= 1 for b in (*s.get("requested_bonuses", ()), s.get("requested_bonus_prior", 0.0))):
    raise config_checks.ConfigError(f"config.slots.requested_bonuses {tuple(s.requested_bonuses)} and "
                                    f"requested_bonus_prior {s.requested_bonus_prior} must be score bonuses in [0, 1]")
  if any(not 0 < x <= 1 for x in s.get("expected_shares", ())):
    raise config_checks.ConfigError(f"config.slots.expected_shares: {tuple(s.expected_shares)} must be shares in "
                                    "(0, 1] (or empty: no expected slots)")
  if not s.modes or any(m not in span_training.MODES for m in s.modes):
    raise config_checks.ConfigError(f"config.slots.modes: {tuple(s.modes)} must be one or more of "
                                    f"{span_training.MODES}")
  if s.frozen_layers < -1:
    raise config_checks.ConfigError(f"config.slots.frozen_layers: {s.frozen_layers} must be -1 (none) or >= 0")
  data = annotated.read(config.data.train)  # fails here, naming the file and line, before anything trains
  if config.data.eval:
    annotated.read(config.data.eval)
  if not data.slot_labels and len(data.intents) < 2:
    raise config_checks.ConfigError(
        f"config.data.train: {data.source} has {len(data.intents)} intent(s) and no entities: nothing to learn "
        "(a joint model needs 2+ intents, or annotated entities)")


def resolve(config: ml_collections.ConfigDict, explicit: frozenset[str] | None) -> None:
  """ConvFiT's row of §3 (epochs, negatives) by the examples per intent, as ``fit`` chooses it, unless the
  caller set ``intents.train.epochs`` / ``intents.stage2.negatives``."""
  if config.intent_method != "convfit":
    return
  data = annotated.read(config.data.train)
  counts = {}
  for e in data.examples:
    if e.intent is not None:
      counts[e.intent] = counts.get(e.intent, 0) + 1
  if len(counts) < 2:
    return
  median = float(np.median(list(counts.values())))
  _, epochs, negatives = convfit_base.SHOTS["10" if median <= 10 else "30" if median <= 30 else "full"]
  given = explicit if explicit is not None else {"intents.train.epochs", "intents.stage2.negatives"}
  if "intents.train.epochs" not in given:
    config.intents.train.epochs = epochs
  if "intents.stage2.negatives" not in given:
    config.intents.stage2.negatives = negatives


def run(config: ml_collections.ConfigDict, workdir: pathlib.Path) -> dict:
  data = annotated.read(config.data.train)
  results: dict = {"method": "nlu", "num_train": len(data.examples), "intents": data.intents,
                   "slot_labels": data.slot_labels}
  start = time.perf_counter()
  intents = train_intents(config, workdir, data, results)
  results["intents_seconds"] = round(time.perf_counter() - start, 1)
  start = time.perf_counter()
  slots = train_slots(config, data, results, workdir / SLOTS_CV_DIR)
  results["slots_seconds"] = round(time.perf_counter() - start, 1)
  model = NLUModel(intents, slots, synonyms=data.value_synonyms(),
                   slots_by_intent=config.slots.get("by_intent", False))  # configs before it: independent
  if jax.process_index() == 0:
    with workdirs.atomic_folder(workdir / "export") as export:
      model.save(export)
  if config.data.eval:
    results.update(evaluate(model, annotated.read(config.data.eval).examples, workdir))
  results = workdirs.write_results(workdir, results)
  if jax.process_index() == 0:
    log.info("report: %s%s", report.write_report(workdir, results, data.examples), report.weakest(results))
  return results


# ---------------------------------------------------------------------------------------------- intents

def train_intents(config, workdir: pathlib.Path, data: annotated.Annotated, results: dict):
  """The intent model (``runner.run`` of ``config.intents`` in ``<workdir>/intents``), or None for fewer than two
  intents."""
  from fewshot_nlu.methods import runner
  rows = [e for e in data.examples if e.intent is not None]
  if len(data.intents) < 2:
    log.info("no intent classifier: the examples hold %d intent(s)", len(data.intents))
    return None
  table = user_examples.Examples(tuple(e.text for e in rows), tuple(e.intent for e in rows), False, data.source)
  folder = user_examples.write_table({"train": table}, workdir / "data")
  sub = ml_collections.ConfigDict(config.intents.to_dict())
  sub.seed = config.seed
  sub.data.builder, sub.data.raw_dir = "intent_table", str(folder)
  sub.data.tfds_dir = str(workdir / "data" / "tfds")
  sub.data.train_split = sub.data.eval_split = "train"
  intent_dir = workdir / INTENTS_DIR
  done = intent_dir / "results.json"
  if done.exists() and (intent_dir / "export").is_dir():
    log.info("intents trained already (%s): kept", intent_dir)
    results["intent_training"] = json.loads(done.read_text())
  else:
    results["intent_training"] = runner.run(sub, intent_dir, explicit=())
  return registry.load(intent_dir / "export")


INTENTS_DIR = "intents"
SLOTS_CV_DIR = "slots_cross_validation"  # each fold's counts (``select``'s cache): a rerun resumes there


# ------------------------------------------------------------------------------------------------ slots

def base_encoder(config) -> tuple[pretrained.Pretrained, str]:
  """The span encoder to start from and what it is (``slots.encoder``: the installed general one where it is built on
  ``slots.model``, else the untouched ``slots.model`` cut at ``slots.encoder_layers``; or a folder)."""
  s = config.slots
  if s.encoder == "general":
    installed = span_encoder.installed(s.model)
    if installed is not None:
      return pretrained.load_pretrained(str(installed)), f"general span encoder ({installed})"
    others = span_encoder.installed_models()
    held = f": it holds {'one' if len(others) == 1 else 'ones'} built on {', '.join(others)}" if others else ""
    if s.model == pretrained.DEFAULT_MODEL:  # the build command's default model
      build = ("; build one (about 40 minutes on 2 CPU cores: 1,500 steps of ~1.5 s; from the public slot corpora "
               "in $FEWSHOT_NLU_DATA) with `python -m fewshot_nlu.main --config=configs/span_encoder.py "
               "--workdir=runs/span_encoder`")
    elif s.model == "mpnet-base":  # the setting measured on it (defaults/span_encoder.py)
      build = ("; build one (about 55 minutes on 2 CPU cores) with `python -m fewshot_nlu.main "
               "--config=configs/span_encoder.py --workdir=runs/span_encoder_mpnet --config.model.name=mpnet-base "
               f"--config.retriever.encoder_layers={s.encoder_layers} --config.train.frozen_prefix_layers=3 "
               "--config.train.max_steps=400`")
    else:
      build = ""
    log.warning("no general span encoder built on %s is installed (%s%s): the slot filler starts from %s cut at "
                "layer %d%s", s.model, span_encoder.install_root(), held, s.model, s.encoder_layers, build)
  if s.encoder in ("general", ""):
    model = pretrained.lower_layers(pretrained.load_pretrained(s.model), s.encoder_layers)
    return model, f"{s.model} (untouched, layers 0-{s.encoder_layers - 1})"
  return pretrained.load_pretrained(s.encoder), s.encoder


def tuning_of(config, mode: str) -> span_training.SupportTuning:
  """How the examples are learnt in ``mode`` (``slots.modes``), up to the largest candidate step count."""
  s = config.slots
  return span_training.SupportTuning(steps=max(s.support_steps), mode=mode,
                                     learning_rate=s.learning_rate if mode == "metric" else s.encoder_learning_rate,
                                     cosine_scale=s.cosine_scale, frozen_layers=s.frozen_layers,
                                     max_words=s.max_words)


def decoding_of(config) -> dict:
  s = config.slots
  return {"beam_size": s.beam_size, "merge_threshold": s.merge_threshold, "threshold_step": s.threshold_step,
          "threshold_retries": s.threshold_retries}


def train_slots(config, data: annotated.Annotated, results: dict, cache: pathlib.Path | None = None
                ) -> SlotFillerModel | None:
  """The slot filler (module docstring), or None when no example holds an entity; ``cache``: where ``select``
  keeps each cross-validation fold's counts."""
  if not data.slot_labels:
    log.info("no slot filler: no example holds an entity")
    return None
  s = config.slots
  model, source = base_encoder(config)
  base = SpanEncoder(model.config, model.params, model.tokenizer, max_length=s.max_length,
                     batch_size=config.eval.batch_size)
  support = annotated.support_rows(data.examples)
  weights = hashlib.sha1()  # the cache's key names the base encoder by its weights, not only its path
  for leaf in jax.tree.leaves(jax.device_get(base.params)):
    weights.update(np.ascontiguousarray(leaf).tobytes())
  mode, steps, margin, bonus, share, threshold, selection = select(base, support, config, cache,
                                                                  cache_id=f"{source} {weights.hexdigest()}")
  encoder = (span_training.learn_support(base, support, dataclasses.replace(tuning_of(config, mode), steps=steps),
                                         seed=config.seed)[0] if steps else base)
  learner = "the span metric" if mode == "metric" else "the encoder layers"
  notes = {"encoder": source, "learnt": f"{learner}, {steps} steps on its support set" if steps else
           "nothing (retrieval alone)", "threshold": selection["how"]}
  if margin is not None:
    notes["none_margin"] = f"{margin}: a span nearer an unlabelled span of the examples than a labelled one is no slot"
  if bonus:
    notes["requested_bonus"] = f"{bonus}: a requested slot's value scores that much more (parse's requested_slots)"
  if share is not None:
    notes["expected_share"] = (f"{share:g}: a slot that this share of an intent's examples hold is expected of its "
                               "texts; where decoding leaves it out, its best span is added")
  results["slots"] = {"encoder": source, "support_mode": mode if steps else None, "support_steps": steps,
                      "none_margin": margin, "requested_bonus": bonus, "expected_share": share,
                      "threshold": threshold, **selection}
  return SlotFillerModel(SlotRetriever(encoder, max_words=s.max_words, none_margin=margin), support,
                         threshold=threshold, requested_bonus=bonus, expected_share=share,
                         words="offsets", notes=notes, **decoding_of(config))


def select(base: SpanEncoder, support: list[dict], config, cache: pathlib.Path | None = None, cache_id: str = ""
           ) -> tuple[str, int, float | None, float, float | None, float, dict]:
  """(mode, step count, none margin, requested-slot bonus, expected share, threshold, a record) chosen by
  cross-validation on the support set: each of ``slots.folds`` folds of its utterances with entities is decoded from
  the rest (which learns in each mode of ``slots.modes`` for each candidate step count, snapshots of one run; 0 steps,
  retrieval alone, once), for each margin of ``slots.none_margins`` (and None: no unlabelled spans;
  ``SlotRetriever``), each bonus of ``slots.requested_bonuses`` where some examples name the slot asked for before
  them (``requested``; none: 0; fewer than ``slots.requested_min_examples``: ``slots.requested_bonus_prior`` alone;
  ``span_retrieval.requested_scores``), each expected share of ``slots.expected_shares`` and None (with
  ``slots.by_intent`` and intents: the slots that share of an intent's examples in the rest hold are filled in where
  decoding left them out; ``slot_filler.fill_expected``) and each threshold, with ``slots.by_intent`` each from its
  own intent's labels in the rest, and each decoded span's end after the rest's punctuation convention (as a
  prediction's: ``span_boundaries``); span counts pooled over folds. Which setting wins: ``preferred_setting`` over
  the learners of ``slots.modes`` in their order of preference, then retrieval alone — each candidate's best micro F1
  (ties: fewer steps, no margin before the smaller ones, the smaller bonus, the larger expected share before none —
  asked for, it stands unless the held-out examples say otherwise —, the first threshold), a less preferred one taking
  over only where it leads in at least ``slots.fallback_confidence`` of the paired bootstrap resamples of the held-out
  utterances. Fewer than two utterances with entities: retrieval alone at ``NO_THRESHOLD``. With ``cache`` (a folder)
  each fold's counts are saved there as it ends (``fold<k>.npz``), under a key of the examples, ``config.slots``, the
  seed and ``cache_id`` (the base encoder), and a fold whose key matches is read back, not run again: an interrupted
  fit loses one fold at most."""
  s = config.slots
  labelled = [i for i, u in enumerate(support) if any(t != "O" for t in u["tags"])]
  steps_grid = sorted(set(s.support_steps))
  learnt = [n for n in steps_grid if n > 0]
  candidates = [(s.modes[0], 0)] * (0 in steps_grid) + [(mode, n) for mode in s.modes for n in learnt]
  margins = [None, *sorted(set(s.get("none_margins", ())))]
  asked = sum(bool(u.get("requested")) for u in support)
  if asked and asked < s.get("requested_min_examples", 0):  # too few to tell bonuses apart: the prior alone
    bonuses = [float(s.requested_bonus_prior)]
  else:
    bonuses = sorted({0.0, *(s.get("requested_bonuses", ()) if asked else ())})
  with_intents = s.get("by_intent", False) and any(u.get("intent") is not None for u in support)
  # expected slots are opt-in: a share asked for goes first, so it wins a tie with none
  shares = [*sorted(set(s.get("expected_shares", ())), reverse=True), None] if with_intents else [None]
  if len(labelled) < 2:
    return s.modes[0], 0, None, 0.0, None, NO_THRESHOLD, {
        "how": f"{len(labelled)} utterance(s) with entities: too few to choose; retrieval alone at {NO_THRESHOLD}"}
  # folds over every utterance (those without entities score the spans a model finds where there are none),
  # each holding some with entities
  rng = np.random.default_rng(config.seed)
  others = [i for i in range(len(support)) if i not in set(labelled)]
  count = min(s.folds, len(labelled))
  folds = [np.concatenate(parts) for parts in zip(np.array_split(rng.permutation(labelled), count),
                                                  np.array_split(rng.permutation(others).astype(int), count))]
  # per held-out utterance and setting: (correct, gold, predicted) spans; and per setting and entity type
  counts = np.zeros((len(candidates), len(margins), len(bonuses), len(shares), len(s.thresholds), len(support), 3),
                    np.int64)
  entity_types = {l: i for i, l in enumerate(sorted({l for u in support for _, _, l in labelled_spans(u["tags"])}))}
  by_type = np.zeros((*counts.shape[:5], len(entity_types), 3), np.int64)
  cache_key = [support, config.slots.to_dict(), config.seed, cache_id, [str(x) for x in shares]]
  for f, held in enumerate(console.bar(folds, desc="slots: cross-validation on your examples", unit="fold",
                                       leave=False)):
    order = sorted(int(i) for i in held)
    saved = cache / f"fold{f}.npz" if cache is not None else None
    key = hashlib.sha1(json.dumps([cache_key, f, order], default=str).encode()).hexdigest()
    if saved is not None and saved.exists():
      with np.load(saved) as done:
        if str(done["key"]) == key:  # this fold's counts from an interrupted (or earlier) run of the same fit
          counts[..., order, :] = done["counts"]
          by_type += done["by_type"]
          continue
    fold_counts, fold_by_type = _fold_counts(base, support, order, f, config, steps_grid=steps_grid, learnt=learnt,
                                             candidates=len(candidates), margins=margins, bonuses=bonuses,
                                             shares=shares, entity_types=entity_types)
    counts[..., order, :] = fold_counts
    by_type += fold_by_type
    if saved is not None and jax.process_index() == 0:
      saved.parent.mkdir(parents=True, exist_ok=True)
      partial = saved.with_suffix(".partial.npz")
      np.savez_compressed(partial, key=key, counts=fold_counts, by_type=fold_by_type)
      partial.replace(saved)
  f1 = span_f1.f1_of(counts.sum(-2))
  groups = {mode: [k for k, (m, n) in enumerate(candidates) if m == mode and n] for mode in s.modes}
  groups["retrieval"] = [k for k, (_, n) in enumerate(candidates) if not n]
  best, record = preferred_setting(f1, counts, {name: g for name, g in groups.items() if g},
                                   s.fallback_confidence, rng)
  k, j, b, e, t = best
  mode, steps = candidates[k]
  return mode, steps, margins[j], float(bonuses[b]), shares[e], float(s.thresholds[t]), {
      "how": f"{count}-fold cross-validation on the {len(support)} training utterances ({len(labelled)} with entities)",
      "cv_f1_by_steps": {(f"{m}:{n}" if n else "0"): round(float(row.max()), 2)
                         for (m, n), row in zip(candidates, f1)},
      "cv_f1_by_none_margin": {str(m): round(float(f1[:, i].max()), 2) for i, m in enumerate(margins)},
      "cv_f1_by_requested_bonus": {str(x): round(float(f1[:, :, i].max()), 2) for i, x in enumerate(bonuses)},
      "cv_f1_by_expected_share": {str(x): round(float(f1[:, :, :, i].max()), 2) for i, x in enumerate(shares)},
      "cv_by_entity": cv_by_entity(support, entity_types, by_type[k, j, b, e, t]),
      **record}


def _fold_counts(base: SpanEncoder, support: list[dict], order: list[int], f: int, config, *, steps_grid: list,
                 learnt: list, candidates: int, margins: list, bonuses: list, shares: list,
                 entity_types: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
  """One cross-validation fold of ``select``: the utterances ``order`` held out, decoded by every setting from the
  rest; (counts [candidates, margins, bonuses, shares, thresholds, len(order), 3], the same pooled per entity type
  [candidates, margins, bonuses, shares, thresholds, types, 3])."""
  s = config.slots
  held = set(order)
  train = [u for i, u in enumerate(support) if i not in held]
  queries = [support[i] for i in order]
  counts = np.zeros((candidates, len(margins), len(bonuses), len(shares), len(s.thresholds), len(order), 3), np.int64)
  by_type = np.zeros((*counts.shape[:5], len(entity_types), 3), np.int64)
  if not any(t != "O" for u in train for t in u["tags"]):
    return counts, by_type
  allowed = labels_by_intent(train) if s.get("by_intent", False) else None
  labels = [allowed.get(q.get("intent")) for q in queries] if allowed is not None else None
  known = sorted({l for u in train for _, _, l in labelled_spans(u["tags"])})
  boundaries = span_boundaries.count(train)
  longest = longest_spans(train)
  by_share = [expected_by_intent(train, share) if share is not None else {} for share in shares]
  expected = [[of.get(q.get("intent")) for of in by_share] for q in queries]  # per query and share
  requested = [annotated.labels_named(q.get("requested"), known) for q in queries]
  decoding = decoding_of(config)
  encoders = [base] * (0 in steps_grid)
  for mode in s.modes:
    if learnt:
      encoders += span_training.learn_support(base, train, tuning_of(config, mode), seed=config.seed + f,
                                              snapshots=learnt)
  for k, encoder in enumerate(encoders):
    retriever = SlotRetriever(encoder, max_words=s.max_words, none_margin=margins[-1])
    retriever.set_support(train)
    scored = retriever.score([q["tokens"] for q in queries], labels=labels, requested=requested)
    for j, margin in enumerate(margins):
      retriever.none_margin = margin
      for b, bonus in enumerate(bonuses):  # one scoring of the queries, each margin and bonus applied to it
        for u, (q, one) in enumerate(zip(queries, scored)):
          row = retriever.answer(one, requested_bonus=bonus)
          for t, decoded in enumerate(decode_sweep([c for c, _ in row], s.thresholds, **decoding)):
            for e, wanted in enumerate(expected[u]):
              spans = fill_expected(decoded, one, retriever, wanted, longest)[0] if wanted else decoded
              spans = [dataclasses.replace(span, end=end) for span, end in
                       zip(spans, span_boundaries.ends(boundaries, spans, q["tokens"], q.get("offsets")))]
              # every label here is one of the support's: the types' counts sum to the utterance's
              typed = span_f1.counts_by_label(q["tags"], to_bio(spans, len(q["tokens"])), entity_types)
              counts[k, j, b, e, t, u] = typed.sum(0)
              by_type[k, j, b, e, t] += typed
  return counts, by_type


def cv_by_entity(support: list[dict], entity_types: dict[str, int], counts: np.ndarray) -> dict[str, dict]:
  """Per entity type, at the chosen setting: the training utterances holding it, its held-out gold spans, the
  spans predicted with its label, the right ones, precision / recall / F1 (%): which types want more examples."""
  holding = {l: sum(any(x == l for _, _, x in labelled_spans(u["tags"])) for u in support) for l in entity_types}
  out = {}
  for label, i in entity_types.items():
    c = SpanCounts(*map(int, counts[i]))
    out[label] = {"examples": holding[label], "gold": c.gold, "predicted": c.predicted, "correct": c.correct,
                  "precision": round(c.precision, 2), "recall": round(c.recall, 2), "f1": round(c.f1, 2)}
  return out


def preferred_setting(f1: np.ndarray, counts: np.ndarray, groups: dict[str, list[int]], confidence: float,
                      rng: np.random.Generator) -> tuple[tuple[int, ...], dict]:
  """The winning setting of the cross-validation and the evidence weighed: ``groups`` names the candidates
  (first axis of ``f1``) of each learner in order of preference, retrieval alone last; the first group's best
  setting (pooled micro F1 ``f1``; ties: the first) is taken, and each later group's best takes over only where
  its F1 is higher and it leads the current pick in at least ``confidence`` of ``FALLBACK_RESAMPLES`` paired
  bootstrap resamples of the held-out utterances (``counts``: [..., utterances, 3]; ``span_f1.
  paired_bootstrap_lead``; 0: wherever its F1 is higher). A difference of a span or two between learners or
  against retrieval is no evidence: on Restaurants-8k two such coin flips (50-56% of resamples) chose retrieval
  alone where the learners were 8-11 points ahead on test, and between the learners they went either way on test
  (bench/results/joint_nlu_notes.md). Returns (the setting's index, ``{"<group>_lead_share": share}`` for each
  later group that had the higher F1)."""
  def best_of(group: list[int]) -> tuple[int, ...]:
    inner = np.unravel_index(int(np.argmax(f1[group])), f1[group].shape)
    return (group[inner[0]], *(int(i) for i in inner[1:]))
  names = list(groups)
  pick, record = best_of(groups[names[0]]), {}
  for name in names[1:]:
    rival = best_of(groups[name])
    if f1[rival] > f1[pick]:
      lead = span_f1.paired_bootstrap_lead(counts[rival], counts[pick], FALLBACK_RESAMPLES, rng)
      record[f"{name}_lead_share"] = round(lead, 3)
      if lead >= confidence:
        pick = rival
  return pick, record


# -------------------------------------------------------------------------------------------- evaluation

def evaluate(model: NLUModel, examples, workdir: pathlib.Path) -> dict:
  """Intent accuracy (without rejection), slot F1 over character spans (an entity is right when its label,
  start and end are), and sentence accuracy (the intent and every entity right) on held-out ``examples``."""
  parses = model.predict([e.text for e in examples], reject=False)
  counts, intent_right, sentence_right, rows = SpanCounts(), 0, 0, []
  for e, p in zip(examples, parses):
    gold = {(x.label, x.start, x.end) for x in e.entities}
    predicted = {(x["entity"] + (f"{annotated.ROLE_SEPARATOR}{x['role']}" if "role" in x else ""), x["start"],
                  x["end"]) for x in p.entities}
    counts.add_spans(gold, predicted)
    intent_ok = e.intent is None or p.intent == e.intent
    intent_right += e.intent is not None and intent_ok
    sentence_right += intent_ok and gold == predicted
    rows.append((e.text, e.intent or "", p.intent or "", _spans(e.text, gold), _spans(e.text, predicted)))
  if jax.process_index() == 0:
    tsv.write_tsv(workdir / "predictions.tsv", ("text", "gold_intent", "intent", "gold_entities", "entities"), rows)
  n = len(examples)
  with_intent = sum(e.intent is not None for e in examples)
  return {"num_eval": n, "intent_accuracy": intent_right / with_intent if with_intent else None,
          "slot_f1": counts.f1 / 100,
          "slot_precision": counts.precision / 100, "slot_recall": counts.recall / 100,
          "sentence_accuracy": sentence_right / n, "accuracy": sentence_right / n}


def _spans(text: str, spans: set) -> str:
  return " | ".join(f"{label}={text[a:b]!r}" for label, a, b in sorted(spans, key=lambda s: s[1]))
