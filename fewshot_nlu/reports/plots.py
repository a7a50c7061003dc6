"""The report's two pictures, drawn headless (matplotlib's ``Figure`` renders through Agg without touching the
global pyplot backend, so a notebook's own backend is left alone):

  * ``confusion_png``: the confusion matrix cut to the ``top`` intents most involved in errors (readable at
    77-150 intents), rows = gold, columns = predicted, an "other" column for predictions into intents not shown;
    cells show counts, shaded by the share of the gold intent's utterances;
  * ``embeddings_png``: a 2-D PCA of utterance embeddings coloured by intent, one panel per encoder (untouched
    vs specialised), each titled with its cosine silhouette score (computed on the full vectors, not the 2-D
    projection).

``pca_2d`` and ``silhouette_cosine`` are numpy.
"""

from __future__ import annotations

import io
from typing import Sequence

import numpy as np

from fewshot_nlu.index import normalize
from fewshot_nlu.reports.metrics import NONE, Report

MARKERS = "os^Dv<>PX*"


def pca_2d(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """([N, 2] coordinates on the top two principal axes of the L2-normalised ``vectors``, [2] the share of the
  variance each explains)."""
  x = normalize(np.asarray(vectors, np.float32))
  x = x - x.mean(axis=0)
  values, axes = np.linalg.eigh((x.T @ x).astype(np.float64))
  top = np.argsort(values)[::-1][:2]
  coords = x @ axes[:, top]
  signs = np.sign(coords[np.abs(coords).argmax(0), np.arange(coords.shape[1])])  # the largest coordinate > 0
  coords = coords * np.where(signs == 0, 1.0, signs)
  total = values.sum()
  return coords, values[top] / total if total > 0 else np.zeros(2)


def silhouette_cosine(vectors: np.ndarray, labels: Sequence[str], *, chunk: int = 1024) -> float:
  """The mean silhouette (Rousseeuw 1987) under cosine distance 1 - cos: per point, (b - a) / max(a, b) with a
  its mean distance to the rest of its intent and b the smallest mean distance to another intent; 0 for a point
  alone in its intent (scikit-learn's convention). NaN with fewer than 2 intents or no intent of 2+ points."""
  labels = np.asarray(labels)
  names, ids = np.unique(labels, return_inverse=True)
  if len(names) < 2 or len(names) >= len(labels):
    return float("nan")
  x = normalize(np.asarray(vectors, np.float32))  # float32: distances to ~1e-6, half the time of float64
  onehot = np.eye(len(names), dtype=np.float32)[ids]
  counts = onehot.sum(0)
  out = np.zeros(len(x), np.float64)
  for start in range(0, len(x), chunk):
    rows = np.arange(start, min(start + chunk, len(x)))
    distance = np.clip(1.0 - x[rows] @ x.T, 0.0, None)
    distance[np.arange(len(rows)), rows] = 0.0
    sums = distance @ onehot  # [B, C]
    own = ids[rows]
    alone = counts[own] <= 1
    a = sums[np.arange(len(rows)), own] / np.maximum(counts[own] - 1, 1)
    means = sums / counts
    means[np.arange(len(rows)), own] = np.inf
    b = means.min(1)
    s = (b - a) / np.maximum(np.maximum(a, b), 1e-12)
    out[rows] = np.where(alone, 0.0, s)
  return float(out.mean())


def _png(fig) -> bytes:
  buffer = io.BytesIO()
  fig.savefig(buffer, format="png")
  return buffer.getvalue()


def shown_labels(report: Report, top: int) -> list[int]:
  """Indices into ``report.axis`` of the ``top`` labels most involved in errors (gold or predicted side), most
  first; the largest-support labels when there are no errors."""
  off = report.matrix.copy()
  np.fill_diagonal(off, 0)
  involvement = off.sum(0) + off.sum(1)
  if involvement.any():
    order = [i for i in np.argsort(-involvement, kind="stable") if involvement[i] > 0]
  else:
    order = list(np.argsort(-report.matrix.sum(1), kind="stable"))
  return [int(i) for i in order[:top]]


def confusion_png(report: Report, *, top: int = 30, title: str = "") -> bytes:
  """The confusion matrix of ``report`` restricted to ``shown_labels`` (see the module docstring), as PNG bytes."""
  from matplotlib.figure import Figure
  shown = shown_labels(report, top)
  names = [report.axis[i] for i in shown]
  counts = report.matrix[np.ix_(shown, shown)]
  other = report.matrix[shown].sum(1) - counts.sum(1)  # predicted into intents not shown
  counts = np.concatenate([counts, other[:, None]], axis=1)
  share = counts / np.maximum(report.matrix[shown].sum(1, keepdims=True), 1)
  n = len(names)
  side = max(4.0, 0.32 * n + 3.0)
  fig = Figure(figsize=(side + 0.4, side), dpi=100)
  ax = fig.subplots()
  ax.imshow(share, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
  for i, j in zip(*np.nonzero(counts)):
    ax.text(j, i, str(counts[i, j]), ha="center", va="center", fontsize=7,
            color="white" if share[i, j] > 0.5 else "black")
  ax.set_xticks(range(n + 1), labels=names + ["other"], rotation=90, fontsize=7)
  ax.set_yticks(range(n), labels=names, fontsize=7)
  ax.set_xlabel("predicted" + (" (none: no intent predicted)" if NONE in names else ""))
  ax.set_ylabel("gold")
  total = len(report.axis) - (NONE in report.axis)
  what = "all" if n >= len(report.axis) else f"the {n} of {total} intents most involved in errors"
  ax.set_title(f"{title}\n{what}: counts, shaded by share of the gold intent".strip(), fontsize=9)
  fig.tight_layout()
  return _png(fig)


def embeddings_png(panels: dict[str, np.ndarray], labels: Sequence[str | None], *, title: str = ""
                   ) -> tuple[bytes, dict[str, float]]:
  """(PNG bytes, silhouette per panel): one PCA scatter per ``panels`` entry (name -> [N, d] vectors of the same
  N utterances), coloured by ``labels`` (None: an utterance without one intent, drawn grey and left out of the
  silhouette)."""
  from matplotlib import colormaps
  from matplotlib.figure import Figure
  labels = list(labels)
  keep = np.array([l is not None for l in labels], bool)
  names = sorted({l for l in labels if l is not None})
  colour_of = {l: i for i, l in enumerate(names)}
  palette = colormaps["tab20"]
  fig = Figure(figsize=(6.0 * len(panels), 6.2), dpi=100)
  axes = np.atleast_1d(fig.subplots(1, len(panels)))
  silhouettes = {}
  for ax, (name, vectors) in zip(axes, panels.items()):
    coords, explained = pca_2d(vectors)
    silhouettes[name] = silhouette_cosine(np.asarray(vectors)[keep], [l for l in labels if l is not None])
    if (~keep).any():
      ax.scatter(coords[~keep, 0], coords[~keep, 1], s=5, c="lightgrey", marker=".", label="several intents")
    for label in names:  # colour cycles through tab20, the marker every 20 intents
      at = np.array([l == label for l in labels])
      c = colour_of[label]
      ax.scatter(coords[at, 0], coords[at, 1], s=9, color=palette(c % 20), marker=MARKERS[(c // 20) % len(MARKERS)],
                 label=label, linewidths=0)
    ax.set_title(f"{name}\nsilhouette (cosine) {silhouettes[name]:.3f}".replace("nan", "n/a"), fontsize=10)
    ax.set_xlabel(f"PC1 ({100 * explained[0]:.1f}% of variance)", fontsize=8)
    ax.set_ylabel(f"PC2 ({100 * explained[1]:.1f}% of variance)", fontsize=8)
    ax.tick_params(labelsize=7)
    if len(names) <= 20:
      ax.legend(fontsize=6, markerscale=1.5, loc="best")
  if title:
    fig.suptitle(title, fontsize=11)
  fig.tight_layout()
  return _png(fig), silhouettes
