"""Retriever for few-shot intents on CLINC (Yu et al., 2021, §6.1, §7.1, App. A.1, A.3).

Split: ``retriever.categories`` (n_c) of CLINC's 10 categories are sampled (``config.seed``) and
``retriever.intents_per_category`` (n_i) intents of each; those are the source intents, with all their training
examples; the other 150 - n_c n_i intents are the target, with ``retriever.shots`` training examples each
(sampled). Categories come from CLINC's ``domains.json`` (``<raw>/oos-eval_data/domains.json``).

Stages (``retriever.stage``), Table 1's sections:
  * ``frz``: the untouched encoder (Retriever^frz / Proto^frz);
  * ``pretrain``: trained on the source intents only (per-label batch 8, lr 5e-5);
  * ``finetune_tgt``: trained on the target few-shot examples (per-label batch = shots, lr 1e-5), starting from
    ``model.name`` (e.g. a ``pretrain`` run's ``export``);
  * ``finetune_tgt_src``: as ``finetune_tgt`` with ``shots`` examples of every source intent added;
  * ``all`` (your own intents, e.g. ``fewshot_nlu.fit(..., method="retriever_intents")``; no categories): trained
    on every training example of every intent (``retriever.train = False``: the untouched encoder), the support
    set is every training example, accuracy on ``data.eval_split``, and ``export/`` is an intent model
    (``models.intent_model``, kind ``intent_model``) that answers by the nearest support utterance's intent by
    dot product of [CLS] vectors, with the support utterances as evidence.
Training is the batch softmax on [CLS] vectors (``retriever.training``) for ``train.max_steps`` steps (the paper
tunes on a development set; there is no development domain here).

Inference (§5.2): the test utterance's [CLS] vector retrieves its nearest support utterance by dot product and
takes its intent; ``retriever.inference = "prototype"`` (Proto) retrieves the nearest intent mean instead.
Support sets: ``all`` (every source training example + the target shots), ``balance`` (``shots`` examples of
every intent), ``tgt`` (the target shots only, scored on target test utterances). Accuracy on the test
utterances of target intents (tgt), source intents (src) and all (avg; CLINC's test set has 30 per intent, so
this is the macro average over intents). New intents need no retraining: they are support-set rows.
"""

from __future__ import annotations

import json
import logging
import pathlib
import time

import jax
import ml_collections
import numpy as np

from fewshot_nlu import config_checks, reports, workdirs
from fewshot_nlu.data import splits, tsv
from fewshot_nlu.encoders import pretrained, st_modules
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.evaluation import knn
from fewshot_nlu.models.prototypes import label_means
from fewshot_nlu.index import Index
from fewshot_nlu.methods import span_training as retriever_training
from fewshot_nlu.models.span_retrieval import INFERENCE
from fewshot_nlu.models.intent_model import IntentModel
from fewshot_nlu.train import run as train_run
from fewshot_nlu.train.metrics import MetricWriter

log = logging.getLogger(__name__)

STAGES = ("frz", "pretrain", "finetune_tgt", "finetune_tgt_src", "all")
SUPPORT_SETS = ("all", "balance", "tgt")


def validate(config: ml_collections.ConfigDict) -> None:
  r = config.retriever
  config_checks.require_choice(config, "retriever.stage", STAGES)
  config_checks.require_choice(config, "retriever.inference", INFERENCE)
  if r.stage == "all":
    retriever_training.validate(config)
    splits.prepared_builder(config)
    if r.inference != "nearest":
      raise config_checks.ConfigError(
          f"config.retriever.inference: {r.inference!r}; stage 'all' exports an intent model that retrieves "
          "support utterances, so it needs 'nearest'")
    return
  config_checks.require_positive(config, "retriever.categories", "retriever.intents_per_category",
                                 "retriever.shots")
  for s in r.support_sets:
    config_checks.require_value_in("retriever.support_sets", s, SUPPORT_SETS)
  retriever_training.validate(config)
  splits.prepared_builder(config)
  categories = read_categories(config)
  if r.categories > len(categories) or r.intents_per_category > min(len(v) for v in categories.values()):
    raise config_checks.ConfigError(
        f"config.retriever.categories / intents_per_category: ({r.categories}, {r.intents_per_category}) exceeds "
        f"the {len(categories)} categories of {min(len(v) for v in categories.values())} intents")
  if r.categories * r.intents_per_category == sum(len(v) for v in categories.values()):
    raise config_checks.ConfigError("config.retriever: every intent is a source intent; no target intent is left")


def categories_file(config) -> pathlib.Path:
  if config.retriever.categories_file:
    return pathlib.Path(config.retriever.categories_file).expanduser()
  raw = pathlib.Path(config.data.raw_dir or pathlib.Path(config.data.dir) / "CLINC150").expanduser()
  return raw / "oos-eval_data" / "domains.json"


def read_categories(config) -> dict[str, list[str]]:
  path = categories_file(config)
  if not path.is_file():
    raise config_checks.ConfigError(f"config.retriever.categories_file: {str(path)!r} is not a file "
                                    "(CLINC's domains.json: {category: [intent, ...]})")
  data = json.loads(path.read_text(encoding="utf-8"))
  if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
    raise config_checks.ConfigError(f"{path}: expected a JSON object {{category: [intent, ...]}}")
  return {k: sorted(v) for k, v in data.items()}


def split_intents(categories: dict[str, list[str]], n_c: int, n_i: int, seed: int) -> tuple[list[str], list[str]]:
  """(source intents, target intents): n_i sampled intents of each of n_c sampled categories are the source."""
  rng = np.random.default_rng(seed)
  names = sorted(categories)
  chosen = [names[i] for i in rng.choice(len(names), n_c, replace=False)]
  source = sorted(i for c in chosen for i in rng.choice(categories[c], n_i, replace=False).tolist())
  target = sorted(i for c in names for i in categories[c] if i not in set(source))
  return source, target


def sample_shots(texts, labels, intents, shots: int, seed: int) -> tuple[list[str], list[str]]:
  """``shots`` training examples of each of ``intents`` (all, if it has fewer)."""
  rng = np.random.default_rng(seed)
  by_label: dict[str, list[int]] = {}
  for i, label in enumerate(labels):
    by_label.setdefault(label, []).append(i)
  picked = [j for intent in intents
            for j in sorted(rng.permutation(by_label.get(intent, []))[:shots].tolist())]
  return [texts[j] for j in picked], [labels[j] for j in picked]


def support_accuracy(encoder: SentenceEncoder, support: tuple[list[str], list[str]], test_vectors: np.ndarray,
                     test_labels: np.ndarray, inference: str, backend: str) -> tuple[np.ndarray, list]:
  """Per test utterance: whether its nearest support row (dot product) has its intent; and the hits."""
  vectors = encoder.encode(support[0])
  payloads = [{"text": t, "label": l} for t, l in zip(*support)]
  if inference == "prototype":
    labels, vectors = label_means(vectors, support[1])
    payloads = [{"text": f"<prototype of {l}>", "label": l} for l in labels]
  hits = Index.build(vectors, payloads, metric="dot", backend=backend).query(test_vectors, 1)
  predicted = np.array([h[0].payload["label"] for h in hits])
  return predicted == test_labels, hits


def write_reports(config, model, rows: list[tuple], test_texts: list[str], test_vectors: np.ndarray,
                  workdir: pathlib.Path) -> dict:
  """A report per support set from the predictions' ``rows`` (``reports``): the first set's is ``report.md`` /
  ``confusion.png``, the others' ``report_<set>.md`` / ``confusion_<set>.png``; ``embeddings.png`` shows every
  test utterance's [CLS] vector, the untouched encoder's beside the trained one (one more encoding pass of the
  test split; the frozen stage has one panel)."""
  out = {}
  untouched = SentenceEncoder.from_config(config, model.config, model.params, model.tokenizer, pooling_mode="cls",
                                        normalize=False)
  for n, name in enumerate(config.retriever.support_sets):
    chosen = [row for row in rows if row[0] == name]
    embeddings = None
    if n == 0:
      embeddings = {reports.UNTOUCHED: test_vectors}
      if config.retriever.stage != "frz":
        embeddings = {reports.UNTOUCHED: lambda: untouched.encode(test_texts, show_progress=True),
                      f"{reports.SPECIALISED} (Retriever {config.retriever.stage})": test_vectors}
    out[name] = reports.write_run_report(
        workdir, [row[2] for row in chosen], [row[3] for row in chosen], texts=[row[1] for row in chosen],
        title=f"Retriever {config.retriever.stage} on {config.data.builder}, support set {name!r}",
        embeddings=embeddings, suffix="" if n == 0 else f"_{name}")
  return out


def run_all(config: ml_collections.ConfigDict, workdir: pathlib.Path) -> dict:
  """Stage ``all`` (module docstring): every training intent, the training examples as the support set."""
  r = config.retriever
  model = pretrained.load_pretrained(config.model.name)
  train_split, eval_split = splits.read_splits(config)
  splits.warn_unseen_labels(train_split, eval_split)
  params, results = model.params, {"stage": r.stage, "inference": r.inference, "reduction": r.reduction}
  steps = 0
  if r.train:
    items = retriever_training.utterance_items(model.tokenizer, train_split.texts, train_split.labels,
                                               config.model.max_length)
    start = time.perf_counter()
    params, record = retriever_training.train(config, workdir, model, items, span=False, evaluate=None)
    steps = record["steps"]
    results.update(training=record, train_seconds=round(time.perf_counter() - start, 1))
  encoder = SentenceEncoder.from_config(config, model.config, params, model.tokenizer, pooling_mode="cls",
                                        normalize=False)
  intent_model = IntentModel.from_examples(encoder, train_split.texts, train_split.labels, metric="dot",
                                           show_progress=True)
  results.update(knn.evaluate_intent_model(intent_model, eval_split, workdir, "predictions"))
  results["rejection"] = intent_model.calibrate_rejection().to_dict()  # leave-one-out votes: no extra encoding
  if jax.process_index() == 0:
    with workdirs.atomic_folder(workdir / "export") as export:
      intent_model.save(export)
  writer = MetricWriter(workdir)
  results = train_run.finish(config, workdir, results, steps, writer)
  writer.close()
  return results


def run(config: ml_collections.ConfigDict, workdir: pathlib.Path) -> dict:
  r = config.retriever
  if r.stage == "all":
    return run_all(config, workdir)
  model = pretrained.load_pretrained(config.model.name)
  train_split, test_split = splits.read_splits(config)
  source, target = split_intents(read_categories(config), r.categories, r.intents_per_category, config.seed)
  source_set = set(source)
  src_all = ([t for t, l in zip(train_split.texts, train_split.labels) if l in source_set],
             [l for l in train_split.labels if l in source_set])
  tgt_shots = sample_shots(train_split.texts, train_split.labels, target, r.shots, config.seed)
  src_shots = sample_shots(train_split.texts, train_split.labels, source, r.shots, config.seed + 1)
  results = {"source_intents": len(source), "target_intents": len(target), "shots": r.shots,
             "stage": r.stage, "inference": r.inference, "reduction": r.reduction, "model": config.model.name}
  params = model.params
  if r.stage != "frz":
    texts, labels = {"pretrain": src_all, "finetune_tgt": tgt_shots,
                     "finetune_tgt_src": (tgt_shots[0] + src_shots[0], tgt_shots[1] + src_shots[1])}[r.stage]
    items = retriever_training.utterance_items(model.tokenizer, texts, labels, config.model.max_length)
    log.info("%s: training on %d utterances of %d intents", r.stage, len(items), len(items.label_names))
    start = time.perf_counter()
    params, record = retriever_training.train(config, workdir, model, items, span=False, evaluate=None)
    results.update(training=record, train_seconds=round(time.perf_counter() - start, 1))
    if jax.process_index() == 0:
      with workdirs.atomic_folder(workdir / "export") as export:
        pretrained.save_pretrained(export, model.config, params, model.tokenizer)
        st_modules.write(export, hidden_size=model.config.hidden_size, pooling="cls", normalize=False,
                         max_length=config.model.max_length)  # as the encoder below encodes
  encoder = SentenceEncoder.from_config(config, model.config, params, model.tokenizer, pooling_mode="cls",
                                        normalize=False)
  start = time.perf_counter()
  test_vectors = encoder.encode(test_split.texts, show_progress=True)
  test_labels = np.array(test_split.labels)
  is_target = np.isin(test_labels, target)
  is_known = np.isin(test_labels, source + target)  # CLINC's test set has no oos rows; guard anyway
  supports = {"all": (src_all[0] + tgt_shots[0], src_all[1] + tgt_shots[1]),
              "balance": (src_shots[0] + tgt_shots[0], src_shots[1] + tgt_shots[1]), "tgt": tgt_shots}
  accuracy = {}
  rows = []
  for name in r.support_sets:
    scored = is_target if name == "tgt" else is_known
    correct, hits = support_accuracy(encoder, supports[name], test_vectors[scored], test_labels[scored],
                                     r.inference, r.index_backend)
    target_rows = is_target[scored]
    accuracy[name] = {"tgt": round(100 * float(correct[target_rows].mean()), 2)}
    if name != "tgt":
      accuracy[name].update(src=round(100 * float(correct[~target_rows].mean()), 2),
                            avg=round(100 * float(correct.mean()), 2))
    accuracy[name]["support_rows"] = len(supports[name][0])
    texts = np.array(test_split.texts)[scored]
    rows += [(name, t, g, h[0].payload["label"], f"{h[0].score:.3f}", h[0].payload["text"])
             for t, g, h in zip(texts, test_labels[scored], hits)]
  results.update(accuracy=accuracy, eval_seconds=round(time.perf_counter() - start, 1))
  if jax.process_index() == 0:
    tsv.write_tsv(workdir / "predictions.tsv", ("support_set", "text", "gold", "predicted", "score",
                                                "nearest_support_utterance"), rows)
  results["reports"] = write_reports(config, model, rows, test_split.texts, test_vectors, workdir)
  if jax.process_index() == 0:
    workdirs.write_results(workdir, results)
    (workdir / "split.json").write_text(json.dumps({"source": source, "target": target}, indent=1) + "\n")
  log.info("accuracy: %s", accuracy)
  return results
