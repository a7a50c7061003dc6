"""Intent accuracy of a model over a labelled split, with the evidence behind each prediction written to TSV;
1-NN by cosine over a training pool (the k-NN evaluation every intent method reports)."""

from __future__ import annotations

import dataclasses
import pathlib

import jax
import numpy as np

from fewshot_nlu.data.intent_folder import IntentSplit
from fewshot_nlu.data.tsv import write_tsv
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.models.intent_model import IntentModel


@dataclasses.dataclass(frozen=True)
class Evaluation:
  results: dict  # accuracy, num_eval, num_pool
  predictions: list  # one protocol.Prediction per eval utterance
  vectors: np.ndarray | None  # the eval utterances encoded by an IntentModel's encoder (None for other models)


def evaluate(model, queries: IntentSplit, workdir: pathlib.Path, name: str = "predictions") -> Evaluation:
  """Accuracy of ``model`` on ``queries``; writes ``<name>.tsv`` (text, gold, predicted, score and the
  nearest training utterances with their labels and cosines: the evidence behind each prediction). An
  ``IntentModel``'s query vectors are kept (encoded once) for the report's embedding plot."""
  vectors = None
  if isinstance(model, IntentModel):
    vectors = model.encoder.encode(queries.texts, show_progress=True)
    predictions = model.predict_from(vectors)
  else:
    predictions = model.predict(queries.texts, show_progress=True)
  correct = np.array([p.label == g for p, g in zip(predictions, queries.labels)])
  if jax.process_index() == 0:
    write_tsv(workdir / f"{name}.tsv", ("text", "gold", "predicted", "score", "nearest_training_utterances"),
              ((text, gold, p.label, f"{p.score:.4f}",
                " | ".join(f"{n.text} [{n.label} {n.score:.3f}]" for n in p.neighbours))
               for text, gold, p in zip(queries.texts, queries.labels, predictions)))
  results = {"accuracy": float(correct.mean()), "num_eval": len(queries.texts), "num_pool": len(model)}
  return Evaluation(results, predictions, vectors)


def evaluate_intent_model(model, queries: IntentSplit, workdir: pathlib.Path, name: str = "predictions") -> dict:
  """``evaluate``'s results only."""
  return evaluate(model, queries, workdir, name).results


def nearest_neighbour(encoder: SentenceEncoder, pool: IntentSplit, queries: IntentSplit, workdir: pathlib.Path,
                      name: str = "predictions") -> Evaluation:
  """1-NN by cosine over the training pool, through ``IntentModel`` (see ``evaluate``)."""
  model = IntentModel.from_examples(encoder, pool.texts, pool.labels, show_progress=True)
  return evaluate(model, queries, workdir, name)


def nearest_neighbour_eval(encoder: SentenceEncoder, pool: IntentSplit, queries: IntentSplit,
                           workdir: pathlib.Path, name: str = "predictions") -> dict:
  """``nearest_neighbour``'s results only."""
  return nearest_neighbour(encoder, pool, queries, workdir, name).results
