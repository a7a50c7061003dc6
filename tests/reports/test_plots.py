"""``reports.plots``: the silhouette against a brute-force reference, the PCA, and the confusion plot's choice of
intents."""

import numpy as np
import pytest

from fewshot_nlu.reports import metrics, plots


def test_silhouette_matches_a_brute_force_reference():
  rng = np.random.default_rng(0)
  vectors = rng.normal(size=(13, 4))
  labels = list("aaaabbbbcccd") + ["b"]  # "d" stands alone: its silhouette is 0
  unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
  distance = 1 - unit @ unit.T
  values = []
  for i, l in enumerate(labels):
    same = [j for j, m in enumerate(labels) if m == l and j != i]
    if not same:
      values.append(0.0)
      continue
    a = distance[i, same].mean()
    b = min(distance[i, [j for j, m in enumerate(labels) if m == other]].mean() for other in set(labels) - {l})
    values.append((b - a) / max(a, b))
  assert plots.silhouette_cosine(vectors, labels, chunk=5) == pytest.approx(np.mean(values), abs=1e-5)
  assert np.isnan(plots.silhouette_cosine(vectors, ["a"] * 13))


def test_pca_finds_the_two_widest_directions():
  rng = np.random.default_rng(1)
  x = np.zeros((200, 5))
  x[:, 0] = 5.0  # an offset, so the unit vectors spread around (1, 0, 0, 0, 0)
  x[:, 3] = rng.normal(scale=2.0, size=200)
  x[:, 1] = rng.normal(scale=0.5, size=200)
  coords, explained = plots.pca_2d(x)
  unit = x / np.linalg.norm(x, axis=1, keepdims=True)
  assert abs(np.corrcoef(coords[:, 0], unit[:, 3])[0, 1]) > 0.99
  assert abs(np.corrcoef(coords[:, 1], unit[:, 1])[0, 1]) > 0.9 and explained[0] > explained[1] > 0


def test_confusion_plot_shows_the_intents_most_involved_in_errors():
  gold = [f"i{n}" for n in range(40) for _ in range(3)]
  predicted = list(gold)
  predicted[0], predicted[3], predicted[4] = "i5", "i5", "i7"  # i0 -> i5, i1 -> i5 and i1 -> i7
  r = metrics.single_label(gold, predicted)
  shown = [r.axis[i] for i in plots.shown_labels(r, top=30)]
  assert shown == ["i1", "i5", "i0", "i7"]  # involvement 2, 2, 1, 1; ties kept in label order
  assert len(plots.shown_labels(metrics.single_label(gold, gold), top=30)) == 30  # no errors: the largest
