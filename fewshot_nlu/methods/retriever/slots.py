"""Retriever for few-shot slot filling (Yu et al., 2021, §5-6.2, App. A.1-A.2) on Hou et al.'s SNIPS episodes.

For each fold k in ``data.folds`` (test domain = fold k's, development domain = fold k+1's test domain, Table 5):
  1. Train (``retriever.train``; False = Retriever^frz / Proto^frz, the untouched encoder) on the gold slot spans
     of the source domains (every distinct utterance of ``fold{k}_train``, support and query sets alike), with
     the batch softmax (``retriever.reduction``: ``max`` = Retriever, ``mean`` = Proto), B =
     ``retriever.per_label_batch`` spans per label, lr 2e-5 with 10% warm-up; early stopping on the
     development domain's F1 (``retriever.dev_episodes`` episodes of ``fold{k}_valid``, best threshold).
  2. Choose the domain's threshold on the development domain by grid search over ``retriever.thresholds``
     (App. A.1: [0.85, 0.97] in steps of 0.05; the config's grid is wider, see its docstring). With
     ``retriever.episode_threshold = "support"``: each episode's own threshold from its support set instead
     (``support_threshold``).
  3. Test on ``retriever.test_episodes`` episodes of ``fold{k}_test`` (0 = all 100): per episode, the support
     set's labelled spans are indexed and every query utterance decoded (``models.span_retrieval.SlotRetriever``,
     ``decoding``); F1 per episode (conlleval-style, ``evaluation.span_f1``), averaged over episodes.

``retriever.encoder_layers`` > 0 cuts the encoder after that many layers before anything runs (span vectors
from that layer; training, evaluation and the export use the cut model). Evaluation encodes each distinct
utterance of a domain's episodes once (``models.span_retrieval.SpanEncoder``), so all 100 development episodes
cost about as much as one pass over the domain's ~1,300 utterances.

Writes ``fold{k}/`` (checkpoints, ``best/``, ``results.json``, ``predictions.tsv``, ``export/``) per fold, then
``results.json`` and ``results.md`` (per-domain and average F1, Table 2's layout) in the workdir, and prints
the table. A finished fold is not redone when the run is restarted; where each episode's support set is learnt
first (``retriever.support_steps``, tens of seconds an episode with ``support_mode = "encoder"``), neither is a
finished episode: ``fold{k}/dev_episodes.jsonl`` / ``test_episodes.jsonl`` journal them as they finish.

``fold{k}/export`` is a ready-to-use slot filler (``retriever.model.SlotFillerModel``; ``python -m
fewshot_nlu.predict --model .../fold{k}/export "play jazz please"``): the fold's encoder, the development-chosen
threshold and decoding settings, and as support set the support utterances of the FIRST test episode of the
test domain. The test domain is the one whose slots the encoder was kept for, and an episode's support set is
the few-shot labelled data the protocol itself gives a model (one episode, not the union of all: episodes
repeat utterances and the export should stay a K-shot model); ``add_examples`` / ``predict --add`` grow it.
Building it costs one encoding of that support set.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import pathlib
import time
from typing import Sequence

import jax
import ml_collections
import numpy as np

from fewshot_nlu import config_checks, console, workdirs
from fewshot_nlu.data import splits, tsv
from fewshot_nlu.data.builders.slots import FOLDS, load_episodes
from fewshot_nlu.encoders import pretrained
from fewshot_nlu.encoders.transformer import DTYPES
from fewshot_nlu.evaluation.span_f1 import SpanCounts
from fewshot_nlu.models.slot_filler import SlotFillerModel
from fewshot_nlu.models.span_decoding import decode_sweep, to_bio
from fewshot_nlu.models.span_retrieval import INFERENCE, SIMILARITIES, SlotRetriever, SpanEncoder
from fewshot_nlu.methods import span_training

log = logging.getLogger(__name__)

# where an episode's decoding threshold comes from (``retriever.episode_threshold``): the development domain's best
# (the paper's: one per fold) or the episode's own support set (``support_threshold``)
EPISODE_THRESHOLDS = ("development", "support")
# Table 2's column order and abbreviations (Hou et al. name FindScreeningEvent "SearchScreeningEvent").
DOMAIN_ABBREVIATIONS = {"GetWeather": "GW", "PlayMusic": "PM", "AddToPlaylist": "ATP", "RateBook": "RB",
                        "SearchScreeningEvent": "FSE", "BookRestaurant": "BR", "SearchCreativeWork": "SCW"}


def validate(config: ml_collections.ConfigDict) -> None:
  r = config.retriever
  span_training.validate(config)
  config_checks.require_choice(config, "retriever.inference", INFERENCE)
  config_checks.require_choice(config, "retriever.similarity", SIMILARITIES)
  config_checks.require_non_negative(config, "retriever.encoder_layers")
  config_checks.require_positive(config, "retriever.max_words", "retriever.beam_size")
  config_checks.require_non_negative(config, "retriever.dev_episodes", "retriever.test_episodes",
                                     "retriever.threshold_retries")
  if not r.support_steps or any(n < 0 for n in r.support_steps):
    raise config_checks.ConfigError(f"config.retriever.support_steps: {tuple(r.support_steps)} must be step counts "
                                    ">= 0 ((0,): retrieval alone)")
  config_checks.require_positive(config, "retriever.support_learning_rate")
  config_checks.require_choice(config, "retriever.support_mode", span_training.MODES)
  if r.support_frozen_layers < -1:
    raise config_checks.ConfigError(f"config.retriever.support_frozen_layers: {r.support_frozen_layers} must be -1 "
                                    "(none frozen) or >= 0")
  config_checks.require_choice(config, "retriever.episode_threshold", EPISODE_THRESHOLDS)
  if r.episode_threshold == "support" and tuple(r.support_steps) != (0,):
    raise config_checks.ConfigError("config.retriever.episode_threshold: 'support' only with retrieval alone "
                                    f"(support_steps (0,)), not {tuple(r.support_steps)}")
  if not r.thresholds or any(not 0 <= t <= 1 for t in r.thresholds):
    raise config_checks.ConfigError(f"config.retriever.thresholds: {tuple(r.thresholds)} must be values in [0, 1]")
  if not 0 <= r.merge_threshold <= 1:
    raise config_checks.ConfigError(f"config.retriever.merge_threshold: {r.merge_threshold} must be in [0, 1]")
  bad = [f for f in config.data.folds if f not in FOLDS]
  if not config.data.folds or bad:
    raise config_checks.ConfigError(f"config.data.folds: {tuple(config.data.folds)}; folds are {tuple(FOLDS)}")
  splits.prepared_builder(config)


def _decoding(config) -> dict:
  r = config.retriever
  return {"beam_size": r.beam_size, "merge_threshold": r.merge_threshold, "threshold_step": r.threshold_step,
          "threshold_retries": r.threshold_retries}


def episode_f1(retriever: SlotRetriever, episodes: list[dict], thresholds, decoding: dict, *,
               predictions: list | None = None, desc: str = "episodes") -> np.ndarray:
  """[episodes, thresholds] F1 of every episode at every threshold (candidates are retrieved once per episode).
  With ``predictions`` (a list), appends one row per query utterance at the first threshold."""
  scores = np.zeros((len(episodes), len(thresholds)))
  for e, episode in enumerate(console.bar(episodes, desc=desc, unit="episode", leave=False)):
    retriever.set_support(episode["support"])
    queries = episode["query"]
    candidates = retriever.candidates([q["tokens"] for q in queries])
    counts = [SpanCounts() for _ in thresholds]
    for q, row in zip(queries, candidates):
      for t, spans in enumerate(decode_sweep([c for c, _ in row], thresholds, **decoding)):
        predicted = to_bio(spans, len(q["tokens"]))
        counts[t].add(q["tags"], predicted)
        if predictions is not None and t == 0:
          evidence = {(c.start, c.end, c.label): p for c, p in row}
          shown = [f"{' '.join(q['tokens'][s.start:s.end])} [{s.label} {s.score:.3f}"
                   + (f" <- {evidence[(s.start, s.end, s.label)]['text']}]" if (s.start, s.end, s.label) in evidence
                      else " merged]") for s in spans]
          predictions.append((e, " ".join(q["tokens"]), " ".join(q["tags"]), " ".join(predicted), " | ".join(shown)))
    scores[e] = [c.f1 for c in counts]
  return scores


def support_threshold(retriever: SlotRetriever, support: list[dict], thresholds, decoding: dict) -> float:
  """The threshold an episode's own support set prefers: each support utterance decoded from the others
  (leave-one-out) at every threshold of the grid, the spans pooled over utterances, the best F1's threshold (ties:
  the lower median of the tied ones). Not in the paper (one threshold per fold, from the development domain):
  the joint NLU model picks its threshold the same way, from the user's examples (``methods.nlu.train.select``).
  Leaves ``retriever`` indexing the last leave-one-out support: ``set_support`` before decoding with it."""
  counts = [SpanCounts() for _ in thresholds]
  for i, held in enumerate(support):
    others = support[:i] + support[i + 1:]
    if not any(t != "O" for u in others for t in u["tags"]):
      continue  # no labelled span to retrieve from
    retriever.set_support(others)
    row = retriever.candidates([held["tokens"]])[0]
    for t, spans in enumerate(decode_sweep([c for c, _ in row], thresholds, **decoding)):
      counts[t].add(held["tags"], to_bio(spans, len(held["tokens"])))
  f1 = np.array([c.f1 for c in counts])
  tied = np.flatnonzero(f1 == f1.max())
  return float(thresholds[int(tied[(len(tied) - 1) // 2])])


def support_threshold_f1(retriever: SlotRetriever, episodes: list[dict], thresholds, decoding: dict, *,
                         predictions: list | None = None, desc: str = "episodes") -> tuple[np.ndarray, np.ndarray]:
  """Per episode, its F1 at the threshold its own support set prefers (``support_threshold``), and that
  threshold. ``predictions``: as ``episode_f1``'s, each episode's at its threshold."""
  f1, chosen = np.zeros(len(episodes)), np.zeros(len(episodes))
  for e, episode in enumerate(console.bar(episodes, desc=desc, unit="episode", leave=False)):
    chosen[e] = support_threshold(retriever, episode["support"], thresholds, decoding)
    rows: list | None = [] if predictions is not None else None
    f1[e] = episode_f1(retriever, [episode], [chosen[e]], decoding, predictions=rows, desc="")[0, 0]
    if predictions is not None:
      predictions.extend((e, *row[1:]) for row in rows)  # episode_f1 numbers its one episode 0
  return f1, chosen


def tuned_episode_f1(encoder: SpanEncoder, episodes: list[dict], steps: Sequence[int], thresholds, decoding: dict,
                     make_retriever, tuning: span_training.SupportTuning, *, seed: int,
                     predictions: list | None = None, desc: str = "episodes",
                     journal: pathlib.Path | None = None) -> np.ndarray:
  """[episodes, len(steps), thresholds] F1 when ``encoder`` first learns each episode's support set
  (``span_training.learn_support``, a snapshot after each of ``steps``; 0: the encoder as given), then
  retrieves from it (``make_retriever(encoder)``). ``predictions``: as ``episode_f1``, for the first step
  count. ``journal`` (a local file): each finished episode's F1 and predictions are appended there, and an
  episode already there under the same steps, thresholds, seed and tuning is read back instead of learnt
  again, so an interrupted fold (tens of seconds an episode) resumes where it stopped (episode e's randomness
  is seed + e: the same either way). The key does not hold ``encoder``'s parameters: one journal belongs to
  one encoder (a fold folder's, fixed by its config identity)."""
  key = {"steps": [int(n) for n in steps], "thresholds": [float(t) for t in thresholds], "seed": seed,
         "tuning": {k: v for k, v in dataclasses.asdict(tuning).items() if k != "steps"}}
  done = {r["episode"]: r for r in workdirs.read_records(journal) if r.get("key") == key} if journal else {}
  if done:
    log.info("%s: %d of %d episodes read back from %s", desc, len(done), len(episodes), journal)
  scores = np.zeros((len(episodes), len(steps), len(thresholds)))
  for e, episode in enumerate(console.bar(episodes, desc=desc, unit="episode", leave=False)):
    if e in done:
      scores[e] = done[e]["scores"]
      if predictions is not None:
        predictions.extend(tuple(row) for row in done[e]["predictions"])
      continue
    rows: list = []
    learnt = span_training.learn_support(encoder, episode["support"], dataclasses.replace(tuning, steps=max(steps)),
                                         seed=seed + e, snapshots=steps)
    for k, tuned in enumerate(learnt):
      scores[e, k] = episode_f1(make_retriever(tuned), [episode], thresholds, decoding,
                                predictions=rows if k == 0 else None, desc="")[0]
    rows = [(e, *row[1:]) for row in rows]  # episode_f1 numbers its one episode 0
    if predictions is not None:
      predictions.extend(rows)
    if journal is not None and jax.process_index() == 0:
      workdirs.append_record(journal, {"key": key, "episode": e, "scores": scores[e].tolist(), "predictions": rows})
  return scores


def support_tuning(config) -> span_training.SupportTuning:
  """How an episode's support set is learnt (``retriever.support_*``; the step count is chosen per fold)."""
  r = config.retriever
  return span_training.SupportTuning(learning_rate=r.support_learning_rate, mode=r.support_mode,
                                     cosine_scale=r.cosine_scale or 20.0,
                                     frozen_layers=r.support_frozen_layers, max_words=r.max_words)


def _episodes(builder, split: str, count: int) -> list[dict]:
  episodes = load_episodes(builder, split)
  return episodes[:count] if count else episodes


def source_utterances(train_episodes: list[dict]) -> list[dict]:
  """Every distinct (tokens, tags) utterance of the source-domain episodes, support and query sets alike."""
  seen = {}
  for episode in train_episodes:
    for u in episode["support"] + episode["query"]:
      seen.setdefault((tuple(u["tokens"]), tuple(u["tags"])), u)
  return list(seen.values())


def run_fold(config, workdir: pathlib.Path, fold: int, model: pretrained.Pretrained, builder) -> dict:
  r = config.retriever
  dev = _episodes(builder, f"fold{fold}_valid", r.dev_episodes)
  test = _episodes(builder, f"fold{fold}_test", r.test_episodes)
  domain = test[0]["domain"]
  decoding = _decoding(config)

  def span_encoder(params) -> SpanEncoder:
    return SpanEncoder(model.config, params, model.tokenizer, max_length=config.model.max_length,
                       batch_size=config.eval.batch_size, dtype=DTYPES[config.model.dtype])

  def retriever_of(encoder: SpanEncoder) -> SlotRetriever:
    return SlotRetriever(encoder, max_words=r.max_words, inference=r.inference, backend=r.index_backend,
                         similarity=r.similarity)

  def slot_retriever(params) -> SlotRetriever:
    return retriever_of(span_encoder(params))

  def dev_f1(params) -> np.ndarray:
    return episode_f1(slot_retriever(params), dev, r.thresholds, decoding, desc="dev episodes").mean(0)

  def journal(name: str) -> pathlib.Path | None:  # episodes finished so far (local workdirs)
    return None if workdirs.is_remote(workdir) else pathlib.Path(workdir) / name

  def dev_evaluation(params) -> tuple[float, dict]:
    if r.episode_threshold == "support":
      f1, chosen = support_threshold_f1(slot_retriever(params), dev, r.thresholds, decoding,
                                        desc="dev episodes (thresholds from their supports)")
      return float(f1.mean()), {"dev_thresholds": chosen.tolist()}
    per_threshold = dev_f1(params)
    return float(per_threshold.max()), {"dev_f1_by_threshold": per_threshold.tolist()}

  results = {"fold": fold, "test_domain": domain, "dev_domain": dev[0]["domain"], "dev_episodes": len(dev),
             "test_episodes": len(test)}
  params, best_f1 = model.params, None
  if r.train:
    utterances = source_utterances(load_episodes(builder, f"fold{fold}_train"))
    items = span_training.slot_items(model.tokenizer, utterances, config.model.max_length,
                                          negatives=r.negative_spans, max_words=r.max_words, seed=config.seed)
    log.info("fold %d: training on %d slot spans of %d source utterances (%d slot labels)", fold, len(items),
             len(utterances), len(items.label_names))
    start = time.perf_counter()
    params, record = span_training.train(config, workdir, model, items, span=True,
                                              evaluate=dev_evaluation if dev else None)
    best_f1 = (record.pop("best_details", None) or {}).get("dev_f1_by_threshold")
    results.update(training=record, train_seconds=round(time.perf_counter() - start, 1))
  start = time.perf_counter()
  predictions: list = []
  tuning = support_tuning(config)
  if r.episode_threshold == "support":  # retrieval alone, each episode at its support's own threshold
    if not r.train:  # the untouched encoder's development F1 (the trained one's was measured when it was kept)
      results.update(dev_f1=round(dev_evaluation(params)[0], 2))
    f1, chosen = support_threshold_f1(slot_retriever(params), test, r.thresholds, decoding, predictions=predictions,
                                      desc=f"test episodes ({domain}, thresholds from their supports)")
    results.update(test_thresholds={"median": float(np.median(chosen)), "min": float(chosen.min()),
                                    "max": float(chosen.max())})
    threshold, steps = float(chosen[0]), 0  # the export's support is test episode 0's
  elif tuple(r.support_steps) == (0,):  # retrieval alone (the paper's inference)
    # the kept encoder's development F1 was measured when it was kept; the untouched one's is measured here
    per_threshold = np.array(best_f1) if best_f1 else dev_f1(params)
    threshold, steps = float(r.thresholds[int(np.argmax(per_threshold))]), 0
    results.update(dev_f1_by_threshold={f"{t:.2f}": round(float(f), 2) for t, f in zip(r.thresholds, per_threshold)})
    f1 = episode_f1(slot_retriever(params), test, [threshold], decoding, predictions=predictions,
                    desc=f"test episodes ({domain})")[:, 0]
  else:  # each episode's support set is learnt first; steps and threshold chosen on development
    base = span_encoder(params)
    grid = tuned_episode_f1(base, dev, r.support_steps, r.thresholds, decoding, retriever_of, tuning,
                            seed=config.seed, desc="dev episodes (learning the support)",
                            journal=journal("dev_episodes.jsonl")).mean(0)
    best_steps, best_threshold = np.unravel_index(int(np.argmax(grid)), grid.shape)
    steps, threshold = int(r.support_steps[best_steps]), float(r.thresholds[best_threshold])
    results.update(dev_f1_by_steps={str(n): round(float(row.max()), 2) for n, row in zip(r.support_steps, grid)})
    f1 = tuned_episode_f1(base, test, (steps,), [threshold], decoding, retriever_of, tuning, seed=config.seed,
                          predictions=predictions, desc=f"test episodes ({domain}, learning the support)",
                          journal=journal("test_episodes.jsonl"))[:, 0, 0]
  results.update(threshold=threshold, support_steps=steps, f1=round(float(f1.mean()), 2),
                 f1_std=round(float(f1.std()), 2), eval_seconds=round(time.perf_counter() - start, 1))
  retriever = slot_retriever(params)
  if steps:  # the export holds the encoder that learnt test episode 0's support set, as the test ran it
    retriever = retriever_of(span_training.learn_support(
        retriever.encoder, test[0]["support"], dataclasses.replace(tuning, steps=steps), seed=config.seed)[0])
  if jax.process_index() == 0:
    tsv.write_tsv(workdir / "predictions.tsv", ("episode", "utterance", "gold", "predicted",
                                                "predicted_slots [label score <- retrieved span]"), predictions)
    notes = {"threshold": (f"best development F1 on {results['dev_domain']} (fold{fold}_valid)"
                           if r.episode_threshold == "development" else
                           "the support set's own: leave-one-out decoding of its utterances (support_threshold)"),
             "support": f"the support set of test episode 0 of fold{fold}_test ({domain})"}
    if steps:
      notes["encoder"] = f"learnt that support set for {steps} steps (retriever.support_steps, chosen on development)"
    with workdirs.atomic_folder(workdir / "export") as export:
      SlotFillerModel(retriever, test[0]["support"], threshold=threshold, **decoding, notes=notes).save(
          export, encoder_heads=model.heads)
    workdirs.write_results(workdir, results)
  return results


def table(rows: list[dict]) -> str:
  """Table 2's layout: one F1 column per test domain and their average."""
  names = [DOMAIN_ABBREVIATIONS.get(r["test_domain"], r["test_domain"]) for r in rows]
  f1 = [r["f1"] for r in rows]
  head = "| " + " | ".join(names + ["Average F1"]) + " |"
  rule = "|" + "---:|" * (len(names) + 1)
  return "\n".join([head, rule, "| " + " | ".join(f"{v:.2f}" for v in f1 + [float(np.mean(f1))]) + " |"])


def run(config: ml_collections.ConfigDict, workdir: pathlib.Path) -> dict:
  model = pretrained.lower_layers(pretrained.load_pretrained(config.model.name), config.retriever.encoder_layers)
  if config.model.max_length > model.config.max_length:
    raise config_checks.ConfigError(f"config.model.max_length: {config.model.max_length} exceeds the model's "
                                    f"{model.config.max_length} positions")
  builder = splits.prepared_builder(config)
  rows = []
  for fold in config.data.folds:
    fold_dir = workdir / f"fold{fold}"
    done = fold_dir / "results.json"
    if done.exists():
      log.info("fold %d already evaluated (%s): kept", fold, done)
      rows.append(json.loads(done.read_text()))
      continue
    fold_dir.mkdir(parents=True, exist_ok=True)
    rows.append(run_fold(config, fold_dir, fold, model, builder))
    log.info("fold %d (%s): F1 %.2f", fold, rows[-1]["test_domain"], rows[-1]["f1"])
  r = config.retriever
  variant = ("Retriever" if r.inference == "nearest" else "Proto") + ("" if r.train else "^frz")
  results = {"method": config.method, "variant": variant, "reduction": r.reduction, "inference": r.inference,
             "model": config.model.name, "shots": config.data.builder_config,
             "average_f1": round(float(np.mean([row["f1"] for row in rows])), 2), "folds": rows}
  markdown = f"## {variant} on SNIPS ({config.data.builder_config}), F1 per test domain\n\n{table(rows)}\n"
  if jax.process_index() == 0:
    workdirs.write_results(workdir, results)
    (workdir / "results.md").write_text(markdown)
    print(markdown)
  return {k: v for k, v in results.items() if k != "folds"} | {
      "f1": {row["test_domain"]: row["f1"] for row in rows}}
