"""An intent classifier ready to use: a sentence encoder, the labelled examples it retrieves from, and the
decision rule.

  * ``knn`` (ConvFiT §2.2 "Similarity-Based Inference"): the k nearest labelled examples by cosine
    (``fewshot_nlu.index``); with k = 1 the prediction is I_c(argmax_{t in Pool} cos(t, u)); with k > 1 each
    label scores the sum of its neighbours' cosines among the k. The neighbours are the explanation.
  * ``mlp`` (``heads.mlp``): a softmax classifier on the encodings (logistic regression when it has no hidden
    layer); the nearest examples are still returned as evidence. With its training settings (``head``, saved
    in the metadata) ``add_examples`` retrains it on every indexed example, so new intents become predictable
    here too (seconds for logistic regression on a few thousand examples).
  * ``prototype`` (Prototypical Networks, Snell et al. 2017; ``models.prototypes``): the label whose
    prototype, the unit-length mean of its indexed examples' unit-length vectors, is nearest by cosine (the
    score). Nothing is trained: prototypes follow the index, so added examples count at once. Robust where
    intents have one to three examples (a long-tail pool), where a softmax layer's boundaries are barely
    determined; the nearest examples are still the evidence.

Neighbours are found by cosine (the default) or, with ``metric="dot"``, by the dot product of unnormalised
vectors (the Retriever's utterance retrieval, Yu et al. 2021 §5.2).

The pool can grow after training (``add_examples``; ConvFiT Figure 6, inference-time augmentation) without
touching the encoder. ``save``/``load`` write one folder: the encoder in Hugging Face layout (with the
down-projection if any, and sentence-transformers' module files: ``SentenceEncoder.save``), ``index/``
(``index.<n>/`` once ``save_rows`` has written grown rows, with the retrained ``mlp.safetensors`` inside it; the
metadata names it), ``mlp.safetensors`` if any, ``intent_model.json`` (kind ``intent_model``) and a model card
(``README.md``). A ``models.protocol.Model``.

Out-of-scope rejection (``predict(texts, reject=True)``, ``models.rejection``): an utterance whose rejection score
is below the threshold is answered ``out_of_scope``. The rejection score is the k-NN vote (k-NN), or the cosine of
the nearest indexed example (MLP / logistic regression: its top probability separates out-of-scope utterances far
worse, bench/results/oos_notes.md; prototypes likewise; the decision is still the classifier's).
``calibrate_rejection`` sets the threshold to the 10th percentile (``quantile``) of
  * with ``texts``: those held-out in-scope utterances' rejection scores (e.g. a development split) — the
    calibration to prefer, as they score like new in-scope traffic;
  * else the indexed examples' leave-one-out scores (their k nearest OTHER examples; k = 1 and the MLP's: the
    cosine of the nearest other example). Out-of-fold only as far as the neighbours go: a specialised encoder
    (ConvFiT, the baseline) was trained on these very examples, which pulls same-intent examples together, so
    their leave-one-out scores run higher than those of new in-scope utterances and the threshold rejects more
    than 10% of in-scope traffic (15-23% on CLINC150, 21-59% on small bots: bench/results/oos_bots.md). With an
    untouched encoder it is exactly out-of-fold (with one example fewer per intent than at test). ConvFiT without
    a development split calibrates instead on half of its examples held out of a second Stage 2
    (``methods.convfit.stage2``): their ``scores``.
Exports calibrated before 2026-11-25 thresholded an MLP's top probability (5-fold out-of-fold MLPs); their
``Rejection.score`` says so and they keep rejecting by it.
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
import shutil
from typing import Sequence

import numpy as np

from fewshot_nlu import model_card
from fewshot_nlu import workdirs
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.models import prototypes
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.index import Index
from fewshot_nlu.index import normalize as l2_normalize
from fewshot_nlu.models import protocol, rejection
from fewshot_nlu.models.protocol import Neighbour, Prediction

META_FILE = "intent_model.json"
INDEX_FOLDER = "index"  # save_rows writes index.<n> and records it in META_FILE
CLASSIFIERS = ("knn", "mlp", "prototype")
# what each classifier's out-of-scope rejection thresholds (models.rejection.SCORES; see the module docstring)
REJECTION_SCORES = {"knn": "prediction", "mlp": "nearest", "prototype": "nearest"}


class IntentModel:
  """Prediction scores: k-NN, the label's summed cosine over the k neighbours (k = 1: the cosine, in [-1, 1];
  in [-k, k] in general); MLP, the label's softmax probability, in [0, 1]; prototype, the cosine of the label's
  prototype, in [-1, 1]. ``head``: the MLP's training settings
  (``add_examples`` retrains it with them), or None. ``rejection``: the calibrated out-of-scope threshold
  (``models.rejection.Rejection``), or None."""

  kind = "intent_model"

  def __init__(self, encoder: SentenceEncoder, index: Index, labels: Sequence[str], *, classifier: str = "knn",
               k: int = 1, mlp: list[dict] | None = None, head: mlp_head.MLPConfig | None = None,
               rejection: rejection.Rejection | None = None):
    if classifier not in CLASSIFIERS:
      raise ValueError(f"classifier {classifier!r} unknown; choose one of {CLASSIFIERS}")
    if classifier == "mlp" and mlp is None and head is None:
      raise ValueError("classifier 'mlp' needs the trained MLP layers or the settings to train them (head=)")
    if k < 1:
      raise ValueError(f"k must be >= 1, got {k}")
    self.encoder, self.index, self.labels = encoder, index, list(labels)
    self.classifier, self.k, self.mlp, self.head = classifier, k, mlp, head
    self.rejection = rejection

  @classmethod
  def from_examples(cls, encoder: SentenceEncoder, texts: Sequence[str], labels: Sequence[str], *,
                    label_names: Sequence[str] | None = None, show_progress: bool = False,
                    metric: str = "cosine", vectors: np.ndarray | None = None, **kwargs) -> "IntentModel":
    """Indexes the labelled examples; ``label_names`` (the classifier's label order, e.g. the MLP's
    outputs) defaults to the sorted labels; ``metric``: how neighbours are found ("cosine" | "dot");
    ``vectors``: ``encoder.encode(texts)`` when the caller has it already (not encoded again). An MLP
    model given ``head`` settings but no ``mlp`` layers is trained here on the indexed examples."""
    index = Index(encoder.dim, metric=metric)
    model = cls(encoder, index, label_names or sorted(set(labels)), **kwargs)
    model._index_examples(texts, labels, show_progress, vectors)
    if model.classifier != "mlp":
      model.labels.extend(sorted(set(labels) - set(model.labels)))
    elif model.mlp is None:  # trained here, on the indexed examples
      model.mlp = model.fit_head()
    return model

  def add_examples(self, texts: Sequence[str], labels: Sequence[str], *, show_progress: bool = False) -> None:
    """Indexes more labelled examples; new labels become predictable (k-NN, prototypes: at once; MLP: it is
    retrained on every indexed example with its saved ``head`` settings). An MLP saved without them (exports before
    2026-11-25) keeps its label set: a new label is then an error. Examples are checked as ``fit`` checks its own
    (``protocol.checked_examples``)."""
    texts, labels = protocol.checked_examples(texts, labels)
    new = sorted(set(labels) - set(self.labels))
    if self.classifier == "mlp" and self.head is None and new:
      raise ValueError(f"new labels {new}: this model's MLP was saved without its training settings, so it cannot "
                       "be retrained to predict them (retrain the model, or use a k-NN one)")
    self._index_examples(texts, labels, show_progress)
    self.labels.extend(new)
    if self.classifier == "mlp" and self.head is not None:
      self.mlp = self.fit_head()

  def _index_examples(self, texts: Sequence[str], labels: Sequence[str], show_progress: bool,
                      vectors: np.ndarray | None = None) -> None:
    if len(texts) != len(labels):
      raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
    if vectors is not None and len(vectors) != len(texts):
      raise ValueError(f"{len(vectors)} vectors for {len(texts)} texts")
    self.index.add(self.encoder.encode(texts, show_progress=show_progress) if vectors is None else vectors,
                   [{"text": t, "label": l} for t, l in zip(texts, labels)])

  def fit_head(self) -> list[dict]:
    """The MLP trained with ``head`` on every indexed example, outputs in ``labels`` order."""
    if self.head is None:
      raise ValueError("no MLP settings (head) to train with")
    column = {l: c for c, l in enumerate(self.labels)}
    targets = np.eye(len(self.labels), dtype=np.float32)[[column[p["label"]] for p in self.index.payloads]]
    return mlp_head.train(self.index.vectors, targets, self.head)

  def __len__(self) -> int:
    """Indexed labelled examples."""
    return len(self.index)

  def save_rows(self, directory: str | pathlib.Path) -> None:
    """Writes the (possibly grown) index and label list back into a saved model's folder, atomically: the index
    goes to a new folder (``index.<n>``), then the metadata JSON, replaced in one rename, switches to it and the
    old folder is deleted. A process killed meanwhile leaves the export as it was (the next ``save_rows``
    deletes the unused folder). One writer at a time per export."""
    directory = pathlib.Path(directory)
    current = _index_folder(directory, protocol.read_meta(directory, META_FILE, "the export/ folder of a training run"))
    for stale in directory.glob(f"{INDEX_FOLDER}.*"):
      if stale.name != current:
        shutil.rmtree(stale, ignore_errors=True)  # written by a save_rows killed before its metadata switched
    generation = int(current.rpartition(".")[2]) if current != INDEX_FOLDER else 0
    new = f"{INDEX_FOLDER}.{generation + 1}"
    with workdirs.atomic_folder(directory / new) as folder:
      self.index.save(folder)
      if self.mlp is not None:  # the MLP retrained on the grown rows switches with them
        mlp_head.save(folder, self.mlp)
    self._write_meta(directory, new)  # the switch
    shutil.rmtree(directory / current, ignore_errors=True)

  def predict(self, texts: Sequence[str], *, neighbours: int = 3, show_progress: bool = False,
              reject: bool = False, threshold: float | None = None) -> list[Prediction]:
    """The intent of each text with its nearest examples; with ``reject`` (or a ``threshold``), ``out_of_scope``
    where the score is below ``threshold`` (default: the calibrated ``rejection``); a blank text is answered
    ``protocol.EMPTY``."""
    return protocol.predict_texts(texts, lambda texts: self.predict_from(
        self.encoder.encode(texts, show_progress=show_progress), neighbours=neighbours, reject=reject,
        threshold=threshold))

  def predict_with_scores(self, texts: Sequence[str], *, neighbours: int = 3, reject: bool = False,
                          threshold: float | None = None) -> tuple[list[Prediction], np.ndarray]:
    """``predict`` and ``scores`` of the same (non-blank) texts from one encoding: what the joint NLU model needs
    for an intent, its evidence and its ranking."""
    vectors = self.encoder.encode(protocol.text_list(texts))
    return (self.predict_from(vectors, neighbours=neighbours, reject=reject, threshold=threshold),
            self.scores_from(vectors))

  def predict_from(self, vectors: np.ndarray, *, neighbours: int = 3, reject: bool = False,
                   threshold: float | None = None) -> list[Prediction]:
    """``predict`` for texts already encoded with ``self.encoder``."""
    if not len(self.index):
      raise ValueError("the model has no labelled examples to retrieve from")
    cut = (rejection.resolve_threshold(self.rejection, threshold, f"this {self.kind} model")
           if reject or threshold is not None else None)
    depth = min(max(self.k, neighbours, 1), len(self.index))
    rows = self.index.query(vectors, depth)
    probs = self._label_scores(vectors) if self.classifier != "knn" else None
    out = []
    for i, hits in enumerate(rows):
      evidence = tuple(Neighbour(h.payload["text"], h.payload["label"], h.score) for h in hits)
      if probs is not None:
        best = int(np.argmax(probs[i]))
        label, score = self.labels[best], float(probs[i][best])
      else:
        label, score = vote(evidence[: self.k])
      out.append(Prediction(label, score, evidence))
    if cut is not None:  # on the whole evidence: the nearest example is there even when neighbours=0
      out = rejection.apply(out, cut, self.rejection_score)
    return [dataclasses.replace(p, neighbours=p.neighbours[:neighbours]) for p in out]

  def _label_scores(self, vectors: np.ndarray) -> np.ndarray:
    """[N, len(labels)] the MLP's probabilities, or each label's prototype cosine (-inf without examples)."""
    if self.classifier == "mlp":
      return np.asarray(mlp_head.predict_proba(self.mlp, vectors), np.float32)
    names, means = self._prototypes()
    out = np.full((len(vectors), len(self.labels)), -np.inf, np.float32)
    column = {l: c for c, l in enumerate(self.labels)}
    out[:, [column[n] for n in names]] = l2_normalize(np.asarray(vectors, np.float64)) @ means.T
    return out

  def _prototypes(self) -> tuple[list[str], np.ndarray]:
    """The class prototypes of the indexed examples, computed once per index size (the index only grows), not
    once per ``predict`` call."""
    cached = getattr(self, "_prototype_cache", None)
    if cached is None or cached[0] != len(self.index):
      cached = (len(self.index), *prototypes.prototypes(self.index.vectors, [p["label"] for p in self.index.payloads]))
      self._prototype_cache = cached
    return cached[1], cached[2]

  @property
  def rejection_score(self) -> str:
    """What rejection thresholds (``models.rejection.SCORES``): the calibration's, else the classifier's own
    (k-NN: the vote; MLP: the nearest example's cosine)."""
    if self.rejection is not None:
      return self.rejection.score
    return REJECTION_SCORES[self.classifier]

  def calibrate_rejection(self, quantile: float = rejection.DEFAULT_QUANTILE, *, texts: Sequence[str] | None = None,
                          source: str = "held-out", show_progress: bool = False,
                          scores: np.ndarray | None = None, vectors: np.ndarray | None = None) -> rejection.Rejection:
    """Sets (and returns) ``rejection``: the ``quantile`` quantile of the rejection scores (``rejection_score``
    of the classifier) of ``texts``, held-out in-scope utterances (``source`` names them in the rule; ``vectors``:
    their encodings by ``self.encoder``, when already made), or the
    ``scores`` such utterances got elsewhere (ConvFiT's held-out half, scored under its own encoder: ``source``
    names them whole), or without either of the indexed examples left out one at a time (no encoding). See the
    module docstring."""
    score = REJECTION_SCORES[self.classifier]
    what = f"{self.k}-NN vote" if score == "prediction" else "nearest example's cosine"
    if scores is not None:
      rule = f"{what} of {len(scores)} {source}"
    elif texts is not None:
      if not len(texts):
        raise ValueError(f"no {source} utterances to calibrate the out-of-scope threshold on")
      predictions = (self.predict(texts, neighbours=1, show_progress=show_progress) if vectors is None
                     else self.predict_from(vectors, neighbours=1))
      scores = np.array([rejection.score_of(p, score) for p in predictions])
      rule = f"{what} of {len(texts)} {source} in-scope utterances"
    else:
      vectors, labels = self.index.vectors, [p["label"] for p in self.index.payloads]
      k = self.k if score == "prediction" else 1
      scores = rejection.knn_leave_one_out(vectors, labels, k)
      rule = f"leave-one-out {k}-NN vote of each indexed example"
    self.rejection = rejection.calibrate(scores, quantile, rule=rule, score=score)
    return self.rejection

  def scores(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
    """[len(texts), len(labels)]: with the MLP, its probabilities (rows sum to 1); with prototypes, each label's
    prototype cosine (-inf for a label without examples); with k-NN, per label the
    cosine of its nearest indexed example, in [-1, 1] (-inf for a label without examples), or under
    ``metric="dot"`` its largest dot product (unbounded). With k = 1 the argmax is ``predict``'s label; with
    k > 1 ``predict`` votes over the k nearest examples and may differ. A blank text's row is NaN."""
    return protocol.score_texts(texts, lambda texts: self._scores(texts, show_progress), len(self.labels))

  def _scores(self, texts: list[str], show_progress: bool) -> np.ndarray:
    return self.scores_from(self.encoder.encode(texts, show_progress=show_progress))

  def scores_from(self, vectors: np.ndarray) -> np.ndarray:
    """``scores`` for texts already encoded with ``self.encoder`` (``predict_from``'s companion: one encoding
    serves both)."""
    if self.classifier == "mlp":
      return self._label_scores(vectors)
    if not len(self.index):
      raise ValueError("the model has no labelled examples to retrieve from")
    if self.classifier == "prototype":
      return self._label_scores(vectors)
    queries, rows = np.asarray(vectors, np.float32), self.index.vectors  # a cosine index holds unit rows already
    if self.index.metric == "cosine":
      queries = l2_normalize(queries)
    similarities = queries @ rows.T
    column = {l: c for c, l in enumerate(self.labels)}
    out = np.full((len(self.labels), len(vectors)), -np.inf, np.float32)
    np.maximum.at(out, [column[p["label"]] for p in self.index.payloads], similarities.T)
    return out.T

  # ------------------------------------------------------------------------------------------- storage

  def save(self, directory: str | pathlib.Path, *, encoder_heads: dict | None = None) -> pathlib.Path:
    directory = pathlib.Path(directory)
    self.encoder.save(directory, heads=encoder_heads)
    if self.mlp is not None:
      mlp_head.save(directory, self.mlp)
    self.index.save(directory / INDEX_FOLDER)
    self._write_meta(directory, INDEX_FOLDER)
    model_card.write(directory)
    return directory

  def _write_meta(self, directory: pathlib.Path, index_folder: str) -> None:
    meta = {"kind": self.kind, "classifier": self.classifier, "k": self.k, "labels": self.labels,
            "pooling": self.encoder.pooling_mode, "normalize": self.encoder.normalize,
            "max_length": self.encoder.max_length, "index": index_folder,
            "head": dataclasses.asdict(self.head) if self.head else None,
            "rejection": self.rejection.to_dict() if self.rejection else None}
    protocol.write_meta(directory, META_FILE, meta)

  @classmethod
  def load(cls, directory: str | pathlib.Path, **encoder_kwargs) -> "IntentModel":
    directory = pathlib.Path(directory)
    meta = protocol.read_meta(directory, META_FILE, "the export/ folder of a training run")
    encoder_kwargs.setdefault("normalize", meta.get("normalize", True))
    encoder = SentenceEncoder.from_pretrained(str(directory), pooling_mode=meta["pooling"],
                                              max_length=meta["max_length"], **encoder_kwargs)
    folder = _index_folder(directory, meta)
    index = Index.load(directory / folder)
    if index.dim != encoder.dim:
      raise ValueError(f"{directory}: index vectors are {index.dim}-d but the encoder gives {encoder.dim}-d")
    labels = meta["labels"]
    if meta["classifier"] == "knn":  # older exports did not record labels added to the index after training
      labels = labels + sorted({p["label"] for p in index.payloads} - set(labels))
    head = meta.get("head")  # None in older exports
    head = mlp_head.MLPConfig(**{**head, "hidden": tuple(head["hidden"])}) if head else None
    mlp = mlp_head.load(directory / folder) or mlp_head.load(directory)  # retrained with grown rows, or trained
    return cls(encoder, index, labels, classifier=meta["classifier"], k=meta["k"], mlp=mlp, head=head,
               rejection=rejection.Rejection.from_dict(meta.get("rejection")))  # None in older exports


def _index_folder(directory: pathlib.Path, meta: dict) -> str:
  """The export's index folder as its metadata names it (``index`` in exports written before ``save_rows`` was
  atomic)."""
  name = meta.get("index", INDEX_FOLDER)
  if name != INDEX_FOLDER and not (name.startswith(f"{INDEX_FOLDER}.") and name.rpartition(".")[2].isdigit()):
    raise ValueError(f"{directory}/{META_FILE}: index {name!r} is no index folder of an export "
                     f"({INDEX_FOLDER!r} or {INDEX_FOLDER!r}.<n>)")
  return name


def vote(neighbours: Sequence[Neighbour]) -> tuple[str, float]:
  """The label with the largest summed cosine among ``neighbours`` (ties: the one met first, i.e. holding
  the nearer neighbour)."""
  totals: dict[str, float] = collections.OrderedDict()
  for n in neighbours:
    totals[n.label] = totals.get(n.label, 0.0) + n.score
  label = max(totals, key=lambda l: totals[l])  # max keeps the first of equal totals
  return label, totals[label]
