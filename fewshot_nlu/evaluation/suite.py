"""DSE's similarity-based evaluation suite (§4.2, Appendix B), for any ``SentenceEncoder``:

  * intent classification with prototypical networks, k-shot (``suite.shots``), averaged over
    ``suite.samplings`` seeded samplings of the support set from each dataset's training split, scored on its
    full test split (CLINC150: in-scope only);
  * out-of-scope detection on CLINC150 with the same k-shot prototypes: the test split plus its out-of-scope
    test examples, thresholds mean - std and mean of the best-prototype similarities (``prototypes``);
  * response selection, top-1/3/10 of 100, on the held-out pairs of ``dialogue_pairs`` (``consecutive``:
    utterance-level; ``multi_turn``: dialogue-level, two query turns joined by the separator token).

Max lengths follow Appendix B.1: 64 tokens for intents / out-of-scope, 128 for response selection. Every
text is encoded once per run (support sets are drawn first and their union encoded), with progress bars.
The result is a nested dict; ``write`` saves it as ``suite.json`` and a readable ``suite.md``.

Differences from the paper, on purpose or by necessity: the paper's response-selection sets (AmazonQA,
DSTC7-Ubuntu) are not available here, so held-out SGD / Taskmaster-4 dialogues stand in; SNIPS is the
joint-NLU split of Goo et al. (700 test utterances, not 1,447); the paper's number of samplings per shot
(its Table 1) did not survive in our copy, so ``suite.samplings`` defaults to 5.
"""

from __future__ import annotations

import json
import logging
import pathlib
from typing import Any

import ml_collections
import numpy as np

from fewshot_nlu import config_checks
from fewshot_nlu.data import builders
from fewshot_nlu.data import splits as data_splits
from fewshot_nlu.data.builders import base, dialogue
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.models import prototypes
from fewshot_nlu.evaluation.response_selection import response_selection

log = logging.getLogger(__name__)

RESULTS_JSON, RESULTS_MD = "suite.json", "suite.md"


def add_config(config: ml_collections.ConfigDict) -> None:
  """The ``suite`` section with its defaults (DSE §4.2 / Appendix B)."""
  s = config.suite = ml_collections.ConfigDict()
  s.intent_datasets = ("banking77", "clinc150", "hwu64", "snips_joint")
  s.support_split = "train"  # the support sets are drawn from it
  s.eval_split = "test"
  s.shots = (1, 5)
  s.samplings = 5  # seeded support samplings per shot count (seeds suite.seed .. suite.seed + samplings - 1)
  s.seed = 0
  s.oos_dataset = "clinc150"  # "" skips out-of-scope detection; needs an oos_<eval_split> split
  s.response_pairings = ("consecutive", "multi_turn")  # dialogue_pairs configs; () skips response selection
  s.response_split = "heldout"
  s.response_group = 100
  s.intent_max_length = 64
  s.response_max_length = 128
  s.max_eval = 0  # > 0: a fixed random subset of at most this many examples per evaluation split


def _sub_config(config, builder: str) -> ml_collections.ConfigDict:
  sub = ml_collections.ConfigDict(config.to_dict())
  sub.data.builder, sub.data.builder_config, sub.data.raw_dir = builder, "", ""
  sub.data.train_split = sub.data.eval_split = ""
  return sub


def _intent_builder(config, name: str, oos: bool = False):
  sub = _sub_config(config, name)
  builder = data_splits.prepared_builder(sub)
  names = [config.suite.support_split, config.suite.eval_split] + ([f"oos_{config.suite.eval_split}"] if oos
                                                                     else [])
  data_splits.require_splits(sub, builder, "suite", names)
  return sub, builder


def _pairs_builder(config, pairing: str):
  return data_splits.dialogue_pairs_builder(config, pairing, "suite.response_split")


def validate(config: ml_collections.ConfigDict) -> None:
  """Checks the ``suite`` fields and prepares every dataset it reads (no model, no compile)."""
  s = config.suite
  for name in s.intent_datasets:
    config_checks.require_value_in(f"suite.intent_datasets ({name!r})", name, tuple(builders.BUILDERS))
  if s.oos_dataset:
    config_checks.require_value_in("suite.oos_dataset", s.oos_dataset, tuple(s.intent_datasets))
  for pairing in s.response_pairings:
    config_checks.require_value_in(f"suite.response_pairings ({pairing!r})", pairing, dialogue.PAIRINGS)
  if not s.shots or any(int(k) < 1 for k in s.shots):
    raise config_checks.ConfigError(f"config.suite.shots: {tuple(s.shots)} must be a non-empty list of ints >= 1")
  config_checks.require_positive(config, "suite.samplings", "suite.response_group", "suite.intent_max_length",
                                 "suite.response_max_length")
  if s.max_eval < 0:
    raise config_checks.ConfigError(f"config.suite.max_eval: {s.max_eval} must be >= 0")
  for name in s.intent_datasets:
    _intent_builder(config, name, oos=name == s.oos_dataset)
  for pairing in s.response_pairings:
    _pairs_builder(config, pairing)


def fixed_subset(n: int, max_n: int) -> np.ndarray:
  """Sorted indices of a fixed random subset (seed 1) of at most ``max_n`` of ``n`` items; all when max_n = 0."""
  if not max_n or n <= max_n:
    return np.arange(n)
  return np.sort(np.random.default_rng(1).choice(n, max_n, replace=False))


def _mean_std(values: list[float]) -> dict:
  return {"mean": float(np.mean(values)), "std": float(np.std(values)), "runs": [float(v) for v in values]}


def prototype_tasks(encoder: SentenceEncoder, config, name: str) -> dict[str, Any]:
  """Intent accuracy per shot count on ``name``, and (for ``suite.oos_dataset``) out-of-scope detection."""
  s = config.suite
  with_oos = name == s.oos_dataset
  sub, builder = _intent_builder(config, name, oos=with_oos)
  pool = data_splits.read_split(sub, s.support_split, builder)
  test = data_splits.read_split(sub, s.eval_split, builder)
  keep = fixed_subset(len(test.texts), s.max_eval)
  test_texts, test_labels = [test.texts[i] for i in keep], [test.labels[i] for i in keep]
  supports = {(int(k), r): prototypes.sample_support(pool.labels, int(k), s.seed + r)
              for k in s.shots for r in range(s.samplings)}
  needed = np.unique(np.concatenate(list(supports.values())))
  log.info("suite %s: %d support utterances (%s-shot x %d samplings) from %d, %d test", name, len(needed),
           "/".join(map(str, s.shots)), s.samplings, len(pool.texts), len(test_texts))
  support_vectors = dict(zip(needed.tolist(), encoder.encode([pool.texts[i] for i in needed], show_progress=True)))
  test_vectors = encoder.encode(test_texts, show_progress=True)
  results: dict[str, Any] = {"num_test": len(test_texts), "num_intents": len(set(pool.labels))}
  oos_vectors, oos_count = None, 0
  if with_oos:
    oos = data_splits.read_split(sub, f"oos_{s.eval_split}", builder)
    oos_keep = fixed_subset(len(oos.texts), s.max_eval)
    oos_vectors = encoder.encode([oos.texts[i] for i in oos_keep], show_progress=True)
    oos_count = len(oos_keep)
  for k in sorted({int(k) for k in s.shots}):
    accuracies, oos_runs = [], {}
    for r in range(s.samplings):
      idx = supports[(k, r)]
      names, protos = prototypes.prototypes(np.stack([support_vectors[i] for i in idx]),
                                            [pool.labels[i] for i in idx])
      predicted, best = prototypes.best_prototype(test_vectors, names, protos)
      accuracies.append(float(np.mean(predicted == np.asarray(test_labels))))
      if with_oos:
        oos_predicted, oos_best = prototypes.best_prototype(oos_vectors, names, protos)
        all_predicted = np.concatenate([predicted, oos_predicted])
        all_best = np.concatenate([best, oos_best])
        gold = test_labels + [prototypes.OOS] * oos_count
        for rule, threshold in prototypes.oos_thresholds(all_best).items():
          metrics = prototypes.oos_metrics(all_predicted, all_best, gold, threshold)
          for metric, value in metrics.items():
            oos_runs.setdefault(rule, {}).setdefault(metric, []).append(value)
    results[f"{k}_shot"] = _mean_std(accuracies)
    if with_oos:
      results.setdefault("oos", {"num_in_scope": len(test_texts), "num_oos": oos_count})[f"{k}_shot"] = {
          rule: {metric: _mean_std(values) for metric, values in by_metric.items()}
          for rule, by_metric in oos_runs.items()}
  return results


def run(encoder: SentenceEncoder, config) -> dict[str, Any]:
  """Every task of the suite on ``encoder`` (its pooling; vectors compared by cosine)."""
  s = config.suite
  short = encoder.with_max_length(min(s.intent_max_length, encoder.cfg.max_length))
  results: dict[str, Any] = {"intent": {}, "oos": {}, "response_selection": {}}
  for name in s.intent_datasets:
    tasks = prototype_tasks(short, config, name)
    if "oos" in tasks:
      results["oos"][name] = tasks.pop("oos")
    results["intent"][name] = tasks
  long = encoder.with_max_length(min(s.response_max_length, encoder.cfg.max_length))
  for pairing in s.response_pairings:
    queries, responses = base.read_text_pairs(_pairs_builder(config, pairing), s.response_split,
                                              encoder.tokenizer.separator)
    keep = fixed_subset(len(queries), s.max_eval)
    results["response_selection"][pairing] = response_selection(
        lambda texts: long.encode(texts, show_progress=True), [queries[i] for i in keep],
        [responses[i] for i in keep], group=s.response_group, seed=s.seed)
  return results


def flat_metrics(results: dict) -> dict[str, float]:
  """One number per metric (means), keyed ``task/dataset/...``: for TensorBoard and benchmark tables."""
  flat = {}
  for name, r in results.get("intent", {}).items():
    flat.update({f"intent/{name}/{key}": v["mean"] for key, v in r.items() if isinstance(v, dict)})
  for name, r in results.get("oos", {}).items():
    for shots, rules in ((k, v) for k, v in r.items() if k.endswith("_shot")):
      for rule, metrics in rules.items():
        flat.update({f"oos/{name}/{shots}/{rule}/{m}": v["mean"] for m, v in metrics.items() if m != "threshold"})
  for pairing, r in results.get("response_selection", {}).items():
    flat.update({f"response_selection/{pairing}/{k}": v for k, v in r.items() if k != "num_eval"})
  return flat


def percent(v: dict | None) -> str:
  """A ``{"mean", "std"}`` result as "mean ± std" in %; "–" when missing."""
  return "–" if v is None else f"{100 * v['mean']:.2f} ± {100 * v['std']:.2f}"


def markdown(results: dict, title: str) -> str:
  """The suite's results as Markdown tables (percentages; mean ± std over the support samplings)."""
  lines = [f"# {title}", ""]
  intent = results.get("intent", {})
  shots = sorted({k for r in intent.values() for k in r if k.endswith("_shot")}, key=lambda k: int(k.split("_")[0]))
  if intent:
    lines += ["## Intent classification (prototypes, accuracy %)", "",
              "| dataset | test | " + " | ".join(shots) + " |",
              "| --- | ---: | " + " | ".join("---:" for _ in shots) + " |"]
    lines += [f"| {name} | {r['num_test']} | " + " | ".join(percent(r[k]) for k in shots) + " |"
              for name, r in intent.items()]
    lines.append("")
  for name, r in results.get("oos", {}).items():
    lines += [f"## Out-of-scope detection on {name} ({r['num_in_scope']} in-scope + {r['num_oos']} out-of-scope, %)",
              "", "| support | threshold | accuracy | in-scope accuracy | OOS accuracy | OOS recall |",
              "| --- | --- | ---: | ---: | ---: | ---: |"]
    for shot in (k for k in r if k.endswith("_shot")):
      for rule, m in r[shot].items():
        lines.append(f"| {shot} | {rule} ({m['threshold']['mean']:.3f}) | {percent(m['accuracy'])} | "
                     f"{percent(m['in_accuracy'])} | {percent(m['oos_accuracy'])} | {percent(m['oos_recall'])} |")
    lines.append("")
  selection = results.get("response_selection", {})
  if selection:
    lines += ["## Response selection (held-out dialogues, top-k of 100, %)", "",
              "| pairs | queries | top-1 | top-3 | top-10 | MRR |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for pairing, r in selection.items():
      cells = [f"{100 * r[k]:.2f}" if k in r else "–" for k in ("r1_at_100", "r3_at_100", "r10_at_100")]
      lines.append(f"| {pairing} | {r.get('num_eval', 0)} | " + " | ".join(cells) + f" | {r.get('mrr', 0):.3f} |")
    lines.append("")
  return "\n".join(lines)


def write(results: dict, workdir: pathlib.Path, title: str) -> None:
  (workdir / RESULTS_JSON).write_text(json.dumps(results, indent=2) + "\n")
  (workdir / RESULTS_MD).write_text(markdown(results, title))
