"""Out-of-scope rejection for single-label intent models: answer ``protocol.OUT_OF_SCOPE`` when the prediction's
rejection score is below a threshold.

The threshold is calibrated on in-scope utterances only, so it needs no out-of-scope examples: held-out ones when
a run has them, else the model's own training rows, out of fold:

    threshold = the ``quantile`` (default 0.1) quantile of those utterances' rejection scores

i.e. the score that about 90% of in-scope utterances reach: rejection is tuned to keep ~90% of in-scope traffic
(whatever the model then predicts for it), and everything scoring lower is called out of scope. Each model
computes its out-of-fold scores on its own scale (``IntentModel``: leave-one-out k-NN votes or nearest cosines;
``QAIDModel``: leave-one-out Score of Eq. 1) and documents where out-of-fold is only
approximate (the encoder itself was trained on those rows, so their scores tend to be higher than those of new
in-scope utterances, which makes the calibrated threshold reject more than ``quantile`` of them).

Which score is thresholded (``Rejection.score``): ``"prediction"``, the prediction's own score (k-NN votes, QAID's
Score), or ``"nearest"``, the cosine of the prediction's nearest indexed example (its first evidence): what an
``IntentModel`` with a softmax head rejects by, since its top probability separates out-of-scope utterances far
worse than that cosine (bench/results/oos_notes.md). When held-out in-scope utterances are at hand (a dataset's
development split), calibrating on them (``IntentModel.calibrate_rejection(texts=...)``) avoids the over-rejection
described above: their scores are those of new in-scope traffic.

A calibration is saved with the model's metadata (``Rejection.to_dict``); an export written before calibration
existed has none, and rejecting with it needs an explicit threshold (``resolve_threshold`` says so).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from fewshot_nlu.index import normalize
from fewshot_nlu.models.protocol import OUT_OF_SCOPE, Prediction

DEFAULT_QUANTILE = 0.1


@dataclasses.dataclass(frozen=True)
class Rejection:
  """A calibrated threshold and how it was obtained (saved in the export's metadata as ``rejection``)."""

  threshold: float
  quantile: float
  rows: int  # out-of-fold (or held-out) scores it was read from
  rule: str  # how those scores were computed, in words
  score: str = "prediction"  # what is thresholded: "prediction" (its own score) | "nearest" (the nearest cosine)

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, meta: dict | None) -> "Rejection | None":
    return None if not meta else cls(float(meta["threshold"]), float(meta["quantile"]), int(meta["rows"]),
                                     str(meta["rule"]), str(meta.get("score", "prediction")))  # older: prediction

  def describe(self) -> str:
    on = "" if self.score == "prediction" else ", on the nearest example's cosine"
    return f"{self.threshold:.4f}, the {100 * self.quantile:g}th percentile of {self.rows} scores ({self.rule}){on}"


SCORES = ("prediction", "nearest")


def score_of(prediction: Prediction, score: str) -> float:
  """The score ``Rejection.score`` names: the prediction's own, or its nearest example's cosine."""
  if score == "prediction":
    return prediction.score
  if not prediction.neighbours:
    raise ValueError("rejecting by the nearest example's cosine needs each prediction's nearest example")
  return prediction.neighbours[0].score


def calibrate(scores: np.ndarray, quantile: float = DEFAULT_QUANTILE, *, rule: str,
              score: str = "prediction") -> Rejection:
  """The ``quantile`` quantile of the out-of-fold ``scores`` (numpy's linear interpolation); -inf scores (no
  evidence at all) count as the lowest."""
  scores = np.asarray(scores, np.float64)
  if not 0.0 <= quantile < 1.0:
    raise ValueError(f"quantile={quantile} must be in [0, 1)")
  if not len(scores):
    raise ValueError("no out-of-fold scores to calibrate a rejection threshold on (the model has no examples)")
  finite = scores[np.isfinite(scores)]
  if not len(finite):
    raise ValueError("no finite out-of-fold score to calibrate a rejection threshold on")
  scores = np.where(np.isfinite(scores), scores, finite.min() - 1.0)
  if score not in SCORES:
    raise ValueError(f"score {score!r} unknown; choose one of {SCORES}")
  return Rejection(float(np.quantile(scores, quantile)), float(quantile), int(len(scores)), rule, score)


def resolve_threshold(calibrated: Rejection | None, threshold: float | None, what: str) -> float:
  """``threshold`` when given, else the calibrated one; neither is an error saying how to get one (``what``:
  the model, e.g. "this intent_model export")."""
  if threshold is not None:
    threshold = float(threshold)
    if not np.isfinite(threshold):
      raise ValueError(f"threshold={threshold} must be a finite number")
    return threshold
  if calibrated is None:
    raise ValueError(f"{what} has no calibrated out-of-scope threshold (it was exported before thresholds were "
                     "calibrated, or never calibrated); pass threshold= (CLI: --threshold T), or call "
                     "calibrate_rejection() and save the model again")
  return calibrated.threshold


def apply(predictions: Sequence[Prediction], threshold: float, score: str = "prediction") -> list[Prediction]:
  """Predictions whose ``score`` (``score_of``) is below ``threshold`` become ``OUT_OF_SCOPE`` (their score and
  evidence kept, the intent they would have been in ``best_label``); every prediction records the score it was
  judged by (``rejection_score``) and the ``threshold``, which may be on another scale than its own ``score``
  (a logistic regression's probability, judged by its nearest example's cosine)."""
  out = []
  for p in predictions:
    judged = score_of(p, score)
    p = dataclasses.replace(p, rejection_score=judged, threshold=float(threshold))
    out.append(dataclasses.replace(p, label=OUT_OF_SCOPE, best_label=p.label) if judged < threshold else p)
  return out


# ------------------------------------------------------------------------------------- out-of-fold scores

def knn_leave_one_out(vectors: np.ndarray, labels: Sequence[str], k: int, *, chunk: int = 1024) -> np.ndarray:
  """Every row's k-NN score with itself left out: the summed cosine, among its k nearest OTHER rows, of the label
  those rows vote for (``intent_model.vote``: the largest sum, ties to the label of the nearer row). Exact, in
  chunks of ``chunk`` rows against all."""
  vectors = normalize(np.asarray(vectors, np.float32))
  labels = np.asarray(labels)
  n = len(vectors)
  depth = min(k, n - 1)
  if depth < 1:
    return np.full(n, -np.inf, np.float32)
  out = np.empty(n, np.float32)
  for start in range(0, n, chunk):
    sims = vectors[start : start + chunk] @ vectors.T
    rows = np.arange(len(sims))
    sims[rows, start + rows] = -np.inf  # leave the row itself out
    nearest = np.argpartition(-sims, depth - 1, axis=1)[:, :depth]  # the k nearest, then in order of nearness
    nearest = np.take_along_axis(nearest, np.argsort(-np.take_along_axis(sims, nearest, 1), 1, kind="stable"), 1)
    for i, order in enumerate(nearest):
      totals: dict[str, float] = {}
      for j in order:  # in order of nearness: max() keeps the first of equal totals, as vote() does
        totals[labels[j]] = totals.get(labels[j], 0.0) + float(sims[i, j])
      out[start + i] = max(totals.values())
  return out


def out_of_fold(features: np.ndarray, targets: np.ndarray, folds: int, seed: int,
                fit_predict: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
  """Each row's prediction from a model trained without it: the rows are cut into ``folds`` random folds and
  ``fit_predict(train_features, train_targets, held_out_features)`` -> [held, C] runs once per fold."""
  if not 2 <= folds <= len(features):
    raise ValueError(f"out-of-fold calibration needs 2 <= folds <= {len(features)} examples, got {folds}")
  order = np.random.default_rng(seed).permutation(len(features))
  out = np.zeros(targets.shape, np.float32)
  for held in np.array_split(order, folds):
    keep = np.setdiff1d(order, held)
    out[held] = fit_predict(features[keep], targets[keep], features[held])
  return out
