"""Nearest-neighbour index over vectors with payloads: one API, two back ends.

  * ``exact``: a jitted matmul + ``lax.top_k`` over the whole store (used automatically below
    ``scann_threshold`` items). The store is padded to ``batching.padded_rows`` capacities, so adding items
    recompiles only when the capacity grows; unused rows are masked out.
  * ``scann``: ScaNN with a partitioning tree, asymmetric hashing and exact re-ordering of the candidates, for
    large indexes. Items added after the tree was trained are searched exactly beside it (the "recent" tail,
    merged with ScaNN's re-ordered candidates), so an added item is always found; once the tail reaches a
    tenth of the tree (``RETRAIN_FRACTION``), the next search retrains the tree on every item. ScaNN's upsert
    into the trained tree was not enough: a tree trained on the earlier items can miss a new item far from
    them -- a new intent's examples -- (4 of 20 such items were not their own nearest neighbour on another
    machine's build of the same tree). With the cosine metric the tree is spherical (unit centroids), so an item's
    leaf (nearest centroid) is also the leaf its own query searches first (highest dot product).

Similarity is the dot product, or cosine (vectors L2-normalised on the way in). Payloads are JSON-able dicts
(e.g. ``{"label": ..., "text": ..., "id": ...}``); a search returns, per query, the k best (score, payload).
``save``/``load`` write a folder (vectors.npy, payloads.jsonl, meta.json, and ScaNN's own files) beside a
model export.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from fewshot_nlu.data.batching import padded_rows

METRICS = ("cosine", "dot")
BACKENDS = ("auto", "exact", "scann")
_QUERY_CHUNK = 256
# Exact search of one query against at most this many items runs on the host (numpy): for a chatbot's single
# utterance against a few thousand examples, one jitted call's dispatch and transfers cost more than the product
# (770 examples: 0.05 ms against 0.24 ms). Several queries run there only while numpy's BLAS (OpenBLAS) keeps
# the product on one thread (at most 65,536 x 4 multiply-adds): a threaded product right after an XLA call, beside
# XLA's threads on 2 cores, took 5-15 ms for 0.1 ms of work (98 span queries x 40 support spans x 768), and
# a server's gathered batches (8 x 770) were slower on the host (bench/results/latency_notes.md).
_HOST_PRODUCTS = 1 << 12
_HOST_MULTIPLY_ADDS = 1 << 18
# A ScaNN tree is retrained (at the next search) once the items added since it was trained reach this fraction
# of it: each retraining costs about as much as the build, so n items added one by one retrain O(log n) times.
RETRAIN_FRACTION = 0.1


@dataclasses.dataclass(frozen=True)
class Hit:
  score: float
  payload: dict[str, Any]


@functools.partial(jax.jit, static_argnames=("k",))
def _exact_top_k(queries, store, size, k):
  scores = queries @ store.T
  scores = jnp.where(jnp.arange(store.shape[0])[None, :] < size, scores, -jnp.inf)
  return jax.lax.top_k(scores, k)


def _host_top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
  """(scores [Q, k], indices [Q, k]) of the k best columns per row, best first, ties by lower index (as
  ``lax.top_k``)."""
  ids = np.argsort(-scores, axis=1, kind="stable")[:, :k]
  return np.take_along_axis(scores, ids, 1).astype(np.float32), ids.astype(np.int64)


def normalize(x: np.ndarray) -> np.ndarray:
  """Rows scaled to unit length (zero rows stay zero)."""
  return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


class Index:

  def __init__(self, dim: int, *, metric: str = "cosine", backend: str = "auto",
               scann_threshold: int = 20_000, scann_leaves: int | None = None):
    if metric not in METRICS:
      raise ValueError(f"metric {metric!r} unknown; choose one of {METRICS}")
    if backend not in BACKENDS:
      raise ValueError(f"backend {backend!r} unknown; choose one of {BACKENDS}")
    self.dim, self.metric, self.requested_backend = dim, metric, backend
    self.scann_threshold, self.scann_leaves = scann_threshold, scann_leaves
    self.vectors = np.zeros((0, dim), np.float32)
    self.payloads: list[dict[str, Any]] = []
    self._searcher = None  # ScaNN searcher, once built
    self._scann_size = 0  # items in the ScaNN tree (the first ones); the rest are searched exactly
    self._store = None  # device copy for exact search, padded (``batching.padded_rows``)

  # ------------------------------------------------------------------------------------------- building

  @classmethod
  def build(cls, vectors: np.ndarray, payloads: Sequence[dict[str, Any]], **kwargs) -> "Index":
    index = cls(np.asarray(vectors).shape[-1], **kwargs)
    index.add(vectors, payloads)
    return index

  @property
  def backend(self) -> str:
    """The back end in use: ``scann`` if requested, or ``auto`` with at least ``scann_threshold`` items."""
    if self.requested_backend == "auto":
      return "scann" if len(self) >= self.scann_threshold else "exact"
    return self.requested_backend

  def __len__(self) -> int:
    return len(self.payloads)

  def add(self, vectors: np.ndarray, payloads: Sequence[dict[str, Any]]) -> None:
    """Adds items; no rebuild (ScaNN: searched exactly beside the tree until ``RETRAIN_FRACTION``)."""
    vectors = np.asarray(vectors, np.float32)
    if vectors.ndim != 2 or vectors.shape[1] != self.dim:
      raise ValueError(f"vectors must be [n, {self.dim}], got {vectors.shape}")
    if len(vectors) != len(payloads):
      raise ValueError(f"{len(vectors)} vectors but {len(payloads)} payloads")
    if self.metric == "cosine":
      vectors = normalize(vectors)
    self.vectors = np.concatenate([self.vectors, vectors])
    self.payloads.extend(dict(p) for p in payloads)
    self._store = None

  def _scann(self):
    """The ScaNN searcher over the first ``_scann_size`` items, (re)trained when missing or when the items added
    since reach ``RETRAIN_FRACTION`` of it."""
    if self._searcher is None or len(self) - self._scann_size >= RETRAIN_FRACTION * self._scann_size:
      import scann  # Imported lazily: a large extension, only needed for big indexes.
      n = len(self)
      leaves = self.scann_leaves or max(2, int(np.sqrt(n)))
      self._searcher = (
          scann.scann_ops_pybind.builder(self.vectors, 10, "dot_product")
          # Search a third of the leaves and re-order 250 candidates exactly: recall@10 ~0.99 on the clustered
          # 5k x 32 test set (a fifth of the leaves / 100 candidates gave 0.89-0.95 from build to build).
          .tree(num_leaves=leaves, num_leaves_to_search=max(1, leaves // 3), training_sample_size=n,
                spherical=self.metric == "cosine")
          .score_ah(2, anisotropic_quantization_threshold=0.2)
          .reorder(250)
          .build(docids=[str(i) for i in range(n)]))
      self._scann_size = n
    return self._searcher

  # ------------------------------------------------------------------------------------------- search

  def search(self, queries: np.ndarray, k: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(scores [Q, k], item indices [Q, k]), best first. ``k`` is capped at the index size."""
    if not len(self):
      raise ValueError("the index is empty")
    queries = np.asarray(queries, np.float32)
    if queries.ndim != 2 or queries.shape[1] != self.dim:
      raise ValueError(f"queries must be [q, {self.dim}], got {queries.shape}")
    if self.metric == "cosine":
      queries = normalize(queries)
    k = min(k, len(self))
    if self.backend == "scann":
      return self._scann_search(queries, k)
    if (len(queries) * len(self) <= _HOST_PRODUCTS if len(queries) == 1
        else len(queries) * len(self) * self.dim <= _HOST_MULTIPLY_ADDS):
      return _host_top_k(queries @ self.vectors.T, k)
    if self._store is None:
      capacity = max(16, padded_rows(len(self), finest=16))
      store = np.zeros((capacity, self.dim), np.float32)
      store[: len(self)] = self.vectors
      self._store = jnp.asarray(store)
    scores, ids = [], []
    for start in range(0, len(queries), _QUERY_CHUNK):
      chunk = queries[start : start + _QUERY_CHUNK]
      padded = np.zeros((padded_rows(len(chunk), finest=16), self.dim), np.float32)
      padded[: len(chunk)] = chunk
      s, i = _exact_top_k(jnp.asarray(padded), self._store, len(self), k)
      scores.append(np.asarray(s)[: len(chunk)])
      ids.append(np.asarray(i)[: len(chunk)])
    return np.concatenate(scores), np.concatenate(ids).astype(np.int64)

  def _scann_search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """ScaNN's k best of the tree's items merged with the exact k best of the recent tail (both scored by the
    exact dot product: ScaNN re-orders its candidates exactly); on a tie the tree's item first, in ScaNN's order."""
    searcher = self._scann()
    tree_k = min(k, self._scann_size)
    ids, scores = searcher.search_batched(queries, final_num_neighbors=tree_k)
    scores = np.asarray(scores, np.float32).reshape(len(queries), tree_k)
    ids = np.asarray([[int(i) for i in row] for row in ids], np.int64).reshape(len(queries), tree_k)
    if len(self) == self._scann_size:
      return scores, ids
    tail = self.vectors[self._scann_size:]
    tail_scores, tail_ids = _host_top_k(queries @ tail.T, min(k, len(tail)))
    scores, order = _host_top_k(np.concatenate([scores, tail_scores], axis=1), k)
    return scores, np.take_along_axis(np.concatenate([ids, tail_ids + self._scann_size], axis=1), order, 1)

  def query(self, queries: np.ndarray, k: int = 1) -> list[list[Hit]]:
    """Per query, the k best hits with their payloads (the evidence behind a prediction)."""
    scores, ids = self.search(queries, k)
    return [[Hit(float(s), self.payloads[int(i)]) for s, i in zip(row_s, row_i)]
            for row_s, row_i in zip(scores, ids)]

  # ------------------------------------------------------------------------------------------- storage

  def save(self, directory: str | pathlib.Path) -> pathlib.Path:
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    np.save(directory / "vectors.npy", self.vectors)
    with open(directory / "payloads.jsonl", "w", encoding="utf-8") as f:
      for payload in self.payloads:
        f.write(json.dumps(payload, ensure_ascii=False) + "\n")
    meta = {"dim": self.dim, "metric": self.metric, "backend": self.requested_backend,
            "scann_threshold": self.scann_threshold, "scann_leaves": self.scann_leaves, "size": len(self)}
    if self._searcher is not None:
      (directory / "scann").mkdir(exist_ok=True)
      self._searcher.serialize(str(directory / "scann"))
      meta["scann_serialized"], meta["scann_size"] = True, self._scann_size
    (directory / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return directory

  @classmethod
  def load(cls, directory: str | pathlib.Path) -> "Index":
    directory = pathlib.Path(directory)
    meta = json.loads((directory / "meta.json").read_text())
    index = cls(meta["dim"], metric=meta["metric"], backend=meta["backend"],
                scann_threshold=meta["scann_threshold"], scann_leaves=meta["scann_leaves"])
    index.vectors = np.load(directory / "vectors.npy")
    with open(directory / "payloads.jsonl", encoding="utf-8") as f:
      index.payloads = [json.loads(line) for line in f]
    if len(index.payloads) != len(index.vectors) or len(index.vectors) != meta["size"]:
      raise ValueError(f"{directory}: {len(index.vectors)} vectors, {len(index.payloads)} payloads, "
                       f"meta.json says {meta['size']}: the index folder is inconsistent")
    if meta.get("scann_serialized"):
      import scann
      index._searcher = scann.scann_ops_pybind.load_searcher(str(directory / "scann"))
      # Folders saved before the recent tail held every item in the tree (upserted).
      index._scann_size = meta.get("scann_size", len(index))
    return index
