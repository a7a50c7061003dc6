"""The protocol every exported model follows, and the predictions it returns.

A trained artefact (k-NN / MLP intents, QAID, Multi-ConvFiT's multi-label MLP, Retriever's slot filler) is a
``Model``: ``predict`` gives one prediction per text (its label or labels, a score, and the evidence behind
it), ``scores`` the [texts, labels] matrix the decision is read from (each class documents its scale),
``add_examples`` grows what the model retrieves from without retraining (where the method allows it),
``save`` / ``load`` write and read one export folder whose metadata JSON records the model's ``kind``, and
``save_rows`` writes only the examples back into an existing export (after ``add_examples``).
``fewshot_nlu.models.load`` reads any export by that kind (``models.registry``).

Predictions share ``labels`` (a tuple: one intent, an intent set, or the slot labels in order), ``score`` and
``to_dict()`` (the JSON record ``python -m fewshot_nlu.predict --output`` writes).

Single-label intent models (``intent_model``, ``qaid``) also reject: ``predict(texts, reject=True)`` answers
``OUT_OF_SCOPE`` where the score is below a threshold, calibrated on the training data when the model is exported
(``models.rejection``) or given as ``threshold=``.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any, Callable, ClassVar, Protocol, Sequence, runtime_checkable

import numpy as np

from fewshot_nlu import workdirs
from fewshot_nlu.data.user_examples import describe
from fewshot_nlu.errors import DataError

OUT_OF_SCOPE = "out_of_scope"  # the label of a rejected utterance (``predict(..., reject=True)``)


@dataclasses.dataclass(frozen=True)
class Neighbour:
  """A stored labelled row that a prediction rests on (a training utterance, an intent name, a support span)."""

  text: str
  label: str
  score: float

  def to_dict(self) -> dict[str, Any]:
    return {"text": self.text, "label": self.label, "score": self.score}


@dataclasses.dataclass(frozen=True)
class Prediction:
  """One intent per utterance."""

  label: str
  score: float  # the model's own scale: see its ``scores`` (k-NN: summed cosine, MLP: probability, QAID: Score)
  neighbours: tuple[Neighbour, ...]  # nearest labelled rows, best first (the explanation)
  best_label: str | None = None  # set when rejected (label = OUT_OF_SCOPE): the intent it scored highest
  # with rejection asked for (models.rejection.apply): the score it compared with the threshold, and the threshold
  rejection_score: float | None = None
  threshold: float | None = None

  @property
  def labels(self) -> tuple[str, ...]:
    return (self.label,)

  def to_dict(self) -> dict[str, Any]:
    out = {"label": self.label, "score": self.score, "neighbours": [n.to_dict() for n in self.neighbours]}
    if self.best_label is not None:
      out["best_label"] = self.best_label
    if self.threshold is not None:
      out["rejection"] = {"score": self.rejection_score, "threshold": self.threshold,
                          "rejected": self.label == OUT_OF_SCOPE}
    return out


@dataclasses.dataclass(frozen=True)
class LabelSetPrediction:
  """A set of intents per utterance (multi-label); the evidence is every intent's probability."""

  labels: tuple[str, ...]  # the intents at or above their threshold (possibly none)
  probabilities: dict[str, float]  # intents' probabilities, most likely first

  @property
  def score(self) -> float:
    """The probability of the most likely intent (0 without any)."""
    return next(iter(self.probabilities.values()), 0.0)

  def to_dict(self) -> dict[str, Any]:
    return {"labels": list(self.labels), "score": self.score, "probabilities": self.probabilities}


@dataclasses.dataclass(frozen=True)
class Slot:
  """Words [start, end) of an utterance filled with ``label``, characters [char_start, char_end) of its text
  (``text``: exactly those characters); ``evidence`` is the retrieved support span (its text, label and
  normalised score) and ``support_utterance`` the support utterance it comes from."""

  start: int
  end: int
  text: str
  label: str
  score: float
  evidence: Neighbour
  support_utterance: str
  char_start: int | None = None
  char_end: int | None = None

  def to_dict(self) -> dict[str, Any]:
    return {"start": self.start, "end": self.end, "char_start": self.char_start, "char_end": self.char_end,
            "text": self.text, "label": self.label, "score": self.score,
            "evidence": {**self.evidence.to_dict(), "utterance": self.support_utterance}}


@dataclasses.dataclass(frozen=True)
class SlotPrediction:
  """The slots of one utterance (split on whitespace into ``words``), by position."""

  words: tuple[str, ...]
  slots: tuple[Slot, ...]

  @property
  def labels(self) -> tuple[str, ...]:
    return tuple(s.label for s in self.slots)

  @property
  def score(self) -> float:
    """The average score of the slots (what §5.2's beam search maximises; 0 without any slot)."""
    return sum(s.score for s in self.slots) / len(self.slots) if self.slots else 0.0

  @property
  def tags(self) -> tuple[str, ...]:
    """The slots as one BIO tag per word."""
    tags = ["O"] * len(self.words)
    for s in self.slots:
      tags[s.start : s.end] = [f"B-{s.label}"] + [f"I-{s.label}"] * (s.end - s.start - 1)
    return tuple(tags)

  def to_dict(self) -> dict[str, Any]:
    return {"labels": list(self.labels), "score": self.score, "tags": " ".join(self.tags),
            "slots": [s.to_dict() for s in self.slots]}


@dataclasses.dataclass(frozen=True)
class EmptyPrediction:
  """The answer to a blank text: there is nothing to classify. ``predict --input`` writes it as
  ``{"text": "", "empty": true}``; ``scores`` gives its row as NaN."""

  label = None
  best_label = None
  labels: tuple = ()
  score: float = float("nan")
  neighbours: tuple = ()

  def to_dict(self) -> dict[str, Any]:
    return {"empty": True}


EMPTY = EmptyPrediction()


def listed(names: Sequence[str], most: int = 8) -> str:
  """``names`` joined by commas: the first ``most`` of them and how many more (a model's one-line summary)."""
  names = list(names)
  return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def text_list(texts: Any, what: str = "texts") -> list[str]:
  """``texts`` as a list of strings; anything else is a ``DataError`` (a ``ValueError``) naming the item (a lone
  string is refused: it would be read as a list of characters)."""
  if isinstance(texts, (str, bytes)):
    raise DataError(f"{what}: expected a list of texts, got one {type(texts).__name__}; wrap it in a list: [text]")
  if not hasattr(texts, "__iter__") or isinstance(texts, dict):
    raise DataError(f"{what}: expected a list of texts, got {type(texts).__name__}")
  texts = list(texts)
  for i, text in enumerate(texts):
    if not isinstance(text, str):
      raise DataError(f"{what}[{i}]: {describe(text)} is not a string")
  return texts


def predict_texts(texts: Any, predict: Callable[..., list], per_text: Sequence | None = None) -> list:
  """``predict`` on the texts that hold words; a blank text is answered ``EMPTY`` in its place, and an empty list
  with an empty list (what every model's ``predict`` does with its input). ``per_text``: one value per text (e.g.
  its intent), handed to ``predict`` as a second argument for the answered texts only."""
  texts = text_list(texts)
  if per_text is not None and len(per_text) != len(texts):
    raise ValueError(f"{len(texts)} texts but {len(per_text)} per-text values")
  answered = [i for i, text in enumerate(texts) if text.strip()]
  out: list = [EMPTY] * len(texts)
  if not answered:
    return out
  args = ([texts[i] for i in answered],) + (() if per_text is None else ([per_text[i] for i in answered],))
  for i, prediction in zip(answered, predict(*args)):
    out[i] = prediction
  return out


def score_texts(texts: Any, scores: Callable[[list[str]], np.ndarray], width: int) -> np.ndarray:
  """``scores`` on the texts that hold words, as a [len(texts), width] float32 matrix whose blank texts' rows are
  NaN (what every model's ``scores`` does with its input)."""
  texts = text_list(texts)
  answered = [i for i, text in enumerate(texts) if text.strip()]
  out = np.full((len(texts), width), np.nan, np.float32)
  if answered:
    out[answered] = scores([texts[i] for i in answered])
  return out


def checked_examples(texts: Any, labels: Any, *, multi_label: bool = False) -> tuple[list[str], list]:
  """Examples for ``add_examples``, checked as ``fewshot_nlu.fit`` checks its training examples
  (``data.user_examples``: non-empty texts; labels non-empty strings, or label sets for a multi-label model;
  a ``DataError``, a ``ValueError``, naming ``texts[i]`` / ``labels[i]`` otherwise); texts stripped as ``fit``
  stores them."""
  from fewshot_nlu.data import user_examples
  examples = user_examples.from_lists(text_list(texts), labels, what="add_examples", min_labels=1,
                                      multi_label=multi_label)
  return list(examples.texts), list(examples.labels)


@runtime_checkable
class Model(Protocol):
  """What every exported model offers (``fewshot_nlu.predict`` uses nothing else)."""

  kind: ClassVar[str]  # recorded in the export's metadata JSON; ``models.registry.KINDS`` maps it to the class

  @property
  def labels(self) -> list[str]:
    """The labels the model can predict, in the order of ``scores``' columns."""

  def predict(self, texts: Sequence[str], *, neighbours: int = 3) -> list:
    """One prediction per text (``Prediction``, ``LabelSetPrediction`` or ``SlotPrediction``), with at most
    ``neighbours`` pieces of evidence where the model has a choice of how many. Single-label intent models also
    take ``reject=True`` (and ``threshold=``): see ``models.rejection``."""

  def scores(self, texts: Sequence[str]) -> np.ndarray:
    """[len(texts), len(labels)] float32 scores; the scale is the model's own (see each class)."""

  def add_examples(self, texts: Sequence[str], labels: Sequence) -> None:
    """Adds labelled examples without retraining, or raises ``NotImplementedError`` saying why it cannot."""

  def save(self, directory: str | pathlib.Path) -> pathlib.Path:
    """Writes the whole model (encoder included) to ``directory``."""

  def save_rows(self, directory: str | pathlib.Path) -> None:
    """Writes the stored examples (grown by ``add_examples``) into an export of this model, encoder untouched."""

  @classmethod
  def load(cls, directory: str | pathlib.Path) -> "Model":
    """Reads an export written by ``save``."""


# ------------------------------------------------------------------------------------- export files

def write_meta(directory: str | pathlib.Path, file: str, meta: dict) -> None:
  """The export's metadata JSON (``meta`` should hold the model's ``kind``), replaced atomically."""
  workdirs.replace_file(pathlib.Path(directory) / file, json.dumps(meta, indent=1, ensure_ascii=False) + "\n")


def read_meta(directory: str | pathlib.Path, file: str, what: str) -> dict:
  """The metadata JSON ``file`` of an export; a missing one is an error saying what the folder should be
  (``what``, e.g. "the export/ folder of a QAID run")."""
  path = pathlib.Path(directory) / file
  if not path.exists():
    raise FileNotFoundError(f"{directory}: no {file}; is this {what}?")
  return json.loads(path.read_text(encoding="utf-8"))


def write_jsonl(path: str | pathlib.Path, rows) -> None:
  """One JSON object per line (an export's stored examples), replaced atomically: a row that cannot be written
  or a kill meanwhile leaves the old file as it was."""
  workdirs.replace_file(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def read_jsonl(path: str | pathlib.Path) -> list:
  return [json.loads(line) for line in pathlib.Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
