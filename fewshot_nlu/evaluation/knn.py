"""Intent accuracy of a model over a labelled split, with the evidence behind each prediction written to TSV;
1-NN by cosine over a training pool (the k-NN evaluation every intent method reports)."""

from __future__ import annotations

import pathlib

import jax
import numpy as np

from fewshot_nlu.data.intent_folder import IntentSplit
from fewshot_nlu.data.tsv import write_tsv
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.models.intent_model import IntentModel


def evaluate_intent_model(model: IntentModel, queries: IntentSplit, workdir: pathlib.Path,
                          name: str = "predictions") -> dict:
  """Accuracy of ``model`` on ``queries``; writes ``<name>.tsv`` (text, gold, predicted, score and the
  nearest training utterances with their labels and cosines: the evidence behind each prediction)."""
  predictions = model.predict(queries.texts, show_progress=True)
  correct = np.array([p.label == g for p, g in zip(predictions, queries.labels)])
  if jax.process_index() == 0:
    write_tsv(workdir / f"{name}.tsv", ("text", "gold", "predicted", "score", "nearest_training_utterances"),
              ((text, gold, p.label, f"{p.score:.4f}",
                " | ".join(f"{n.text} [{n.label} {n.score:.3f}]" for n in p.neighbours))
               for text, gold, p in zip(queries.texts, queries.labels, predictions)))
  return {"accuracy": float(correct.mean()), "num_eval": len(queries.texts), "num_pool": len(model)}


def nearest_neighbour_eval(encoder: SentenceEncoder, pool: IntentSplit, queries: IntentSplit,
                           workdir: pathlib.Path, name: str = "predictions") -> dict:
  """1-NN by cosine over the training pool, through ``IntentModel`` (see ``evaluate_intent_model``)."""
  model = IntentModel.from_examples(encoder, pool.texts, pool.labels, show_progress=True)
  return evaluate_intent_model(model, queries, workdir, name)
