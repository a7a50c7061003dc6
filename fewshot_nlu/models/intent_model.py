"""An intent classifier ready to use: a sentence encoder, the labelled examples it retrieves from, and the
decision rule.

  * ``knn`` (ConvFiT §2.2 "Similarity-Based Inference"): the k nearest labelled examples by cosine
    (``fewshot_nlu.index``); with k = 1 the prediction is I_c(argmax_{t in Pool} cos(t, u)); with k > 1 each
    label scores the sum of its neighbours' cosines among the k. The neighbours are the explanation.
  * ``mlp`` (``heads.mlp``): a classifier on the encodings; the nearest examples are still returned as
    evidence.

Neighbours are found by cosine (the default) or, with ``metric="dot"``, by the dot product of unnormalised
vectors (the Retriever's utterance retrieval, Yu et al. 2021 §5.2).

The pool can grow after training (``add_examples``; ConvFiT Figure 6, inference-time augmentation) without
touching the encoder. ``save``/``load`` write one folder: the encoder in Hugging Face layout (with the
down-projection if any), ``index/``, ``mlp.safetensors`` if any, and ``intent_model.json`` (kind
``intent_model``). A ``models.protocol.Model``.
"""

from __future__ import annotations

import collections
import pathlib
from typing import Sequence

import numpy as np

from fewshot_nlu.encoders import pretrained
from fewshot_nlu.encoders import projection as projection_head
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.index import Index
from fewshot_nlu.index import normalize as l2_normalize
from fewshot_nlu.models import protocol
from fewshot_nlu.models.protocol import Neighbour, Prediction

META_FILE = "intent_model.json"
CLASSIFIERS = ("knn", "mlp")


class IntentModel:
  """Prediction scores: k-NN, the label's summed cosine over the k neighbours (k = 1: the cosine); MLP, the
  label's probability."""

  kind = "intent_model"

  def __init__(self, encoder: SentenceEncoder, index: Index, labels: Sequence[str], *, classifier: str = "knn",
               k: int = 1, mlp: list[dict] | None = None):
    if classifier not in CLASSIFIERS:
      raise ValueError(f"classifier {classifier!r} unknown; choose one of {CLASSIFIERS}")
    if classifier == "mlp" and mlp is None:
      raise ValueError("classifier 'mlp' needs the trained MLP layers")
    if k < 1:
      raise ValueError(f"k must be >= 1, got {k}")
    self.encoder, self.index, self.labels = encoder, index, list(labels)
    self.classifier, self.k, self.mlp = classifier, k, mlp

  @classmethod
  def from_examples(cls, encoder: SentenceEncoder, texts: Sequence[str], labels: Sequence[str], *,
                    label_names: Sequence[str] | None = None, show_progress: bool = False,
                    metric: str = "cosine", **kwargs) -> "IntentModel":
    """Indexes the labelled examples; ``label_names`` (the classifier's label order, e.g. the MLP's
    outputs) defaults to the sorted labels; ``metric``: how neighbours are found ("cosine" | "dot")."""
    index = Index(encoder.dim, metric=metric)
    model = cls(encoder, index, label_names or sorted(set(labels)), **kwargs)
    model.add_examples(texts, labels, show_progress=show_progress)
    return model

  def add_examples(self, texts: Sequence[str], labels: Sequence[str], *, show_progress: bool = False) -> None:
    """Indexes more labelled examples (new labels become predictable under k-NN; the MLP's label set is
    fixed at training)."""
    if len(texts) != len(labels):
      raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
    self.index.add(self.encoder.encode(texts, show_progress=show_progress),
                   [{"text": t, "label": l} for t, l in zip(texts, labels)])
    if self.classifier == "knn":
      self.labels.extend(sorted(set(labels) - set(self.labels)))

  def __len__(self) -> int:
    """Indexed labelled examples."""
    return len(self.index)

  def save_rows(self, directory: str | pathlib.Path) -> None:
    """Writes the (possibly grown) index and label list back into a saved model's folder."""
    self.index.save(pathlib.Path(directory) / "index")
    self._write_meta(pathlib.Path(directory))

  def predict(self, texts: Sequence[str], *, neighbours: int = 3, show_progress: bool = False
              ) -> list[Prediction]:
    if not len(self.index):
      raise ValueError("the model has no labelled examples to retrieve from")
    vectors = self.encoder.encode(texts, show_progress=show_progress)
    depth = min(max(self.k, neighbours), len(self.index))
    rows = self.index.query(vectors, depth)
    probs = (mlp_head.predict_proba(self.mlp, vectors) if self.classifier == "mlp" else None)
    out = []
    for i, hits in enumerate(rows):
      evidence = tuple(Neighbour(h.payload["text"], h.payload["label"], h.score) for h in hits)
      if probs is not None:
        best = int(np.argmax(probs[i]))
        label, score = self.labels[best], float(probs[i][best])
      else:
        label, score = vote(evidence[: self.k])
      out.append(Prediction(label, score, evidence[:neighbours]))
    return out

  def scores(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
    """[len(texts), len(labels)]: with the MLP, its probabilities (rows sum to 1); with k-NN, per label the
    cosine of its nearest indexed example, in [-1, 1] (-inf for a label without examples), or under
    ``metric="dot"`` its largest dot product (unbounded). With k = 1 the argmax is ``predict``'s label; with
    k > 1 ``predict`` votes over the k nearest examples and may differ."""
    vectors = self.encoder.encode(texts, show_progress=show_progress)
    if self.classifier == "mlp":
      return np.asarray(mlp_head.predict_proba(self.mlp, vectors), np.float32)
    if not len(self.index):
      raise ValueError("the model has no labelled examples to retrieve from")
    queries, rows = np.asarray(vectors, np.float32), self.index.vectors
    if self.index.metric == "cosine":
      queries, rows = l2_normalize(queries), l2_normalize(rows)
    similarities = queries @ rows.T
    column = {l: c for c, l in enumerate(self.labels)}
    out = np.full((len(self.labels), len(texts)), -np.inf, np.float32)
    np.maximum.at(out, [column[p["label"]] for p in self.index.payloads], similarities.T)
    return out.T

  # ------------------------------------------------------------------------------------------- storage

  def save(self, directory: str | pathlib.Path, *, encoder_heads: dict | None = None) -> pathlib.Path:
    directory = pathlib.Path(directory)
    enc = self.encoder
    pretrained.save_pretrained(directory, enc.cfg, enc.params, enc.tokenizer, encoder_heads)
    if enc.projection is not None:
      projection_head.save(directory, enc.projection)
    if self.mlp is not None:
      mlp_head.save(directory, self.mlp)
    self.index.save(directory / "index")
    self._write_meta(directory)
    return directory

  def _write_meta(self, directory: pathlib.Path) -> None:
    meta = {"kind": self.kind, "classifier": self.classifier, "k": self.k, "labels": self.labels,
            "pooling": self.encoder.pooling_mode, "normalize": self.encoder.normalize,
            "max_length": self.encoder.max_length}
    protocol.write_meta(directory, META_FILE, meta)

  @classmethod
  def load(cls, directory: str | pathlib.Path, **encoder_kwargs) -> "IntentModel":
    directory = pathlib.Path(directory)
    meta = protocol.read_meta(directory, META_FILE, "the export/ folder of a training run")
    encoder_kwargs.setdefault("normalize", meta.get("normalize", True))
    encoder = SentenceEncoder.from_pretrained(str(directory), pooling_mode=meta["pooling"],
                                              max_length=meta["max_length"], **encoder_kwargs)
    index = Index.load(directory / "index")
    if index.dim != encoder.dim:
      raise ValueError(f"{directory}: index vectors are {index.dim}-d but the encoder gives {encoder.dim}-d")
    labels = meta["labels"]
    if meta["classifier"] == "knn":  # older exports did not record labels added to the index after training
      labels = labels + sorted({p["label"] for p in index.payloads} - set(labels))
    return cls(encoder, index, labels, classifier=meta["classifier"], k=meta["k"], mlp=mlp_head.load(directory))


def vote(neighbours: Sequence[Neighbour]) -> tuple[str, float]:
  """The label with the largest summed cosine among ``neighbours`` (ties: the one met first, i.e. holding
  the nearer neighbour)."""
  totals: dict[str, float] = collections.OrderedDict()
  for n in neighbours:
    totals[n.label] = totals.get(n.label, 0.0) + n.score
  label = max(totals, key=lambda l: totals[l])  # max keeps the first of equal totals
  return label, totals[label]
