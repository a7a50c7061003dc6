"""An intent classifier ready to use: a sentence encoder, the labelled examples it retrieves from, and the
decision rule.

  * ``knn`` (ConvFiT §2.2 "Similarity-Based Inference"): the k nearest labelled examples by cosine
    (``fewshot_nlu.index``); with k = 1 the prediction is I_c(argmax_{t in Pool} cos(t, u)); with k > 1 each
    label scores the sum of its neighbours' cosines among the k. The neighbours are the explanation.
  * ``mlp`` (``heads.mlp``): a classifier on the encodings; the nearest examples are still returned as
    evidence.

The pool can grow after training (``add_examples``; ConvFiT Figure 6, inference-time augmentation) without
touching the encoder. ``save``/``load`` write one folder: the encoder in Hugging Face layout (with the
down-projection if any), ``index/``, ``mlp.safetensors`` if any, and ``intent_model.json``.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import pathlib
from typing import Sequence

import numpy as np

from fewshot_nlu.encoders import pretrained
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.heads import projection as projection_head
from fewshot_nlu.index import Index

META_FILE = "intent_model.json"
CLASSIFIERS = ("knn", "mlp")


@dataclasses.dataclass(frozen=True)
class Neighbour:
  text: str
  label: str
  score: float


@dataclasses.dataclass(frozen=True)
class Prediction:
  label: str
  score: float  # k-NN: the label's summed cosine over the k neighbours (k = 1: the cosine); MLP: probability
  neighbours: tuple[Neighbour, ...]  # nearest labelled examples, best first (the explanation)


class IntentModel:

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
                    **kwargs) -> "IntentModel":
    """Indexes the labelled examples; ``label_names`` (the classifier's label order, e.g. the MLP's
    outputs) defaults to the sorted labels."""
    index = Index(encoder.dim, metric="cosine")
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
    """Writes the (possibly grown) index back into a saved model's folder."""
    self.index.save(pathlib.Path(directory) / "index")

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
    meta = {"classifier": self.classifier, "k": self.k, "labels": self.labels, "pooling": enc.pooling_mode,
            "max_length": enc.max_length}
    (directory / META_FILE).write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    return directory

  @classmethod
  def load(cls, directory: str | pathlib.Path, **encoder_kwargs) -> "IntentModel":
    directory = pathlib.Path(directory)
    if not (directory / META_FILE).exists():
      raise FileNotFoundError(f"{directory}: no {META_FILE}; is this the export/ folder of a training run?")
    meta = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
    encoder = SentenceEncoder.from_pretrained(str(directory), pooling_mode=meta["pooling"],
                                              max_length=meta["max_length"], **encoder_kwargs)
    index = Index.load(directory / "index")
    if index.dim != encoder.dim:
      raise ValueError(f"{directory}: index vectors are {index.dim}-d but the encoder gives {encoder.dim}-d")
    return cls(encoder, index, meta["labels"], classifier=meta["classifier"], k=meta["k"],
               mlp=mlp_head.load(directory))


def vote(neighbours: Sequence[Neighbour]) -> tuple[str, float]:
  """The label with the largest summed cosine among ``neighbours`` (ties: the one met first, i.e. holding
  the nearer neighbour)."""
  totals: dict[str, float] = collections.OrderedDict()
  for n in neighbours:
    totals[n.label] = totals.get(n.label, 0.0) + n.score
  label = max(totals, key=lambda l: totals[l])  # max keeps the first of equal totals
  return label, totals[label]
