"""One few-shot NLU model: an intent classifier (any exported intent model: ConvFiT's ``intent_model``, QAID's),
a slot filler (``models.slot_filler``, span retrieval over words that keep their character offsets) and
out-of-scope rejection (the intent model's calibrated threshold), answering ``parse(texts)`` in the shape of
Rasa's ``/model/parse``:

    {"text": "book a table for two at 7pm",
     "intent": {"name": "book", "confidence": 0.93},
     "intent_ranking": [{"name": "book", "confidence": 0.93}, ...],
     "entities": [{"start": 17, "end": 20, "value": "two", "entity": "people", "confidence": 0.91,
                   "confidence_entity": 0.91, "extractor": "fewshot_nlu", "evidence": {...}}, ...],
     "text_tokens": [[0, 4], [5, 6], ...]}

A rejected utterance's intent is ``out_of_scope`` (its confidence the head's; ``rejection`` says by which score
and threshold). An entity's ``value`` is its text, or the canonical value of a synonym the training data
declared (Rasa ``synonym`` items); its ``evidence`` is the support span it retrieved. Either part may be absent:
data with slots but no intents gives a slots-only model (``intent`` is null), data with intents only an
intents-only one (``entities`` is empty).

With ``slots_by_intent`` (the default of ``fit``), the two parts answer jointly: a text's spans retrieve only the
slot labels that its predicted intent's training examples hold (``SlotFillerModel.labels_for``; examples without
an intent lend theirs to every intent; an out-of-scope text retrieves from all). After ConProm's intent-slot
co-occurrence (Hou et al., 2021); measured in bench/results/joint_nlu.md.

``add_examples`` takes annotated examples (``data.annotated``'s forms: dicts with ``text``, ``intent`` and
``entities`` as character spans) or texts with intents: new intents and new slot types answer at once, without
retraining. ``save`` / ``load`` write one folder: ``nlu.json`` (kind ``nlu``, synonyms), ``intents/`` and
``slots/`` (each part's own export) and a model card.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Sequence

import numpy as np

from fewshot_nlu import model_card
from fewshot_nlu.data import annotated
from fewshot_nlu.data import words as word_lib
from fewshot_nlu.errors import DataError
from fewshot_nlu.models import protocol, registry

META_FILE = "nlu.json"
INTENTS, SLOTS = "intents", "slots"
EXTRACTOR = "fewshot_nlu"
RANKING = 10  # intents in ``intent_ranking`` at most (Rasa shows 10)


@dataclasses.dataclass(frozen=True)
class Parse:
  """One utterance's intent, entities and evidence (``to_dict``: Rasa's ``/model/parse`` answer)."""

  text: str
  intent: str | None
  confidence: float
  ranking: tuple[tuple[str, float], ...]
  entities: tuple[dict, ...]
  tokens: tuple[tuple[int, int], ...]
  intent_evidence: tuple[protocol.Neighbour, ...] = ()
  rejection: dict | None = None  # with rejection asked for: {"score", "threshold", "rejected"}

  @property
  def labels(self) -> tuple[str, ...]:
    return (self.intent,) if self.intent is not None else ()

  @property
  def score(self) -> float:
    return self.confidence

  def to_dict(self) -> dict[str, Any]:
    out = {"text": self.text,
           "intent": None if self.intent is None else {"name": self.intent, "confidence": self.confidence},
           "intent_ranking": [{"name": n, "confidence": c} for n, c in self.ranking],
           "entities": [dict(e) for e in self.entities], "text_tokens": [list(t) for t in self.tokens]}
    if self.intent_evidence:
      out["intent_evidence"] = [n.to_dict() for n in self.intent_evidence]
    if self.rejection is not None:
      out["rejection"] = dict(self.rejection)
    return out


class NLUModel:
  """Joint intents + slots + out-of-scope (module docstring). ``intents``: an intent model (or None);
  ``slots``: a ``SlotFillerModel`` over offset words (or None); ``synonyms``: surface value (lower case) ->
  canonical value."""

  kind = "nlu"

  def __init__(self, intents=None, slots=None, *, synonyms: dict[str, str] | None = None,
               slots_by_intent: bool = False):
    if intents is None and slots is None:
      raise ValueError("an NLU model needs an intent model, a slot filler, or both")
    self.intents, self.slots = intents, slots
    self.slots_by_intent = slots_by_intent and intents is not None and slots is not None
    self.synonyms = {k.lower(): v for k, v in (synonyms or {}).items()}

  @property
  def labels(self) -> list[str]:
    """The intents (the columns of ``scores``)."""
    return list(self.intents.labels) if self.intents is not None else []

  @property
  def slot_labels(self) -> list[str]:
    return list(self.slots.labels) if self.slots is not None else []

  @property
  def rejection(self):
    """The intent model's calibrated out-of-scope threshold (None without one)."""
    return getattr(self.intents, "rejection", None)

  def __len__(self) -> int:
    """Stored examples: the intent model's plus the slot filler's support utterances."""
    return sum(len(part) for part in (self.intents, self.slots) if part is not None)

  def __repr__(self) -> str:
    """What the model answers and what it learnt, a line per part (``print(model)`` after ``fit``)."""
    lines = ["NLUModel"]
    if self.intents is not None:
      rejection = self.rejection
      oos = f"out of scope below {rejection.threshold:.4g}" if rejection is not None else "no out-of-scope threshold"
      lines.append(f"  intents: {len(self.labels)} ({protocol.listed(self.labels)}) from {len(self.intents)} "
                   f"example(s); {oos}")
    if self.slots is not None:
      lines.append(f"  slots: {self.slots.describe()}{'; by intent' if self.slots_by_intent else ''}")
    return "\n".join(lines)

  # --------------------------------------------------------------------------------------------- parse

  def parse(self, texts: Sequence[str], *, reject: bool | None = None, neighbours: int = 3,
            requested_slots: Sequence[str | Sequence[str] | None] | None = None) -> list[dict]:
    """Rasa's ``/model/parse`` answer for each text (module docstring); ``reject`` (default: when the model has
    a calibrated threshold) answers ``out_of_scope`` below it. ``requested_slots``: per text, the slot (or
    slots) the bot has just asked for, a form's ``requested_slot`` (None: none): a bare answer (``13``, ``Smith``)
    then reads as that slot's value (``SlotFillerModel.predict``)."""
    return [p.to_dict() for p in self.predict(texts, reject=reject, neighbours=neighbours,
                                              requested_slots=requested_slots)]

  def predict(self, texts: Sequence[str], *, neighbours: int = 3, reject: bool | None = None,
              threshold: float | None = None,
              requested_slots: Sequence[str | Sequence[str] | None] | None = None) -> list:
    """A ``Parse`` per text (``protocol.EMPTY`` for a blank one); ``requested_slots`` as in ``parse``."""
    if reject is None:
      reject = self.rejection is not None or threshold is not None
    texts = protocol.text_list(texts)
    if requested_slots is not None and len(requested_slots) != len(texts):
      raise ValueError(f"{len(texts)} texts but {len(requested_slots)} requested slot lists")
    return protocol.predict_texts(
        texts, lambda texts, requested: self._predict(texts, neighbours, reject, threshold, requested),
        per_text=list(requested_slots) if requested_slots is not None else [None] * len(texts))

  def _predict(self, texts: list[str], neighbours: int, reject: bool, threshold: float | None,
               requested: Sequence | None = None) -> list[Parse]:
    intents = [None] * len(texts)
    ranking: list[tuple] = [()] * len(texts)
    if self.intents is not None:
      options = {"reject": True, "threshold": threshold} if reject else {}
      # one encoding (ConvFiT) or scoring pass (QAID) for the intent, its evidence and the ranking
      intents, scores = self.intents.predict_with_scores(texts, neighbours=neighbours, **options)
      order = np.argsort(-scores, axis=1, kind="stable")[:, :RANKING]
      labels = self.labels  # a property that copies the intent model's labels: once per call, not per entry
      ranking = [tuple((labels[c], _finite(row[c])) for c in top) for row, top in zip(scores, order)]
    if self.slots is None:
      slots = [None] * len(texts)
    elif self.slots_by_intent:
      slots = self.slots.predict(texts, intents=[
          i.label if i is not None and i.label != protocol.OUT_OF_SCOPE else None for i in intents],
          requested_slots=requested)
    else:
      slots = self.slots.predict(texts, requested_slots=requested)
    out = []
    for text, intent, ranked, filled in zip(texts, intents, ranking, slots):
      tokens = tuple(self.slots.word_spans(text) if self.slots is not None else word_lib.word_spans(text))
      entities = tuple(self._entity(text, s) for s in (filled.slots if filled is not None else ()))
      rejection = None
      if intent is not None and intent.threshold is not None:
        rejection = {"score": intent.rejection_score, "threshold": intent.threshold,
                     "rejected": intent.label == protocol.OUT_OF_SCOPE}
      out.append(Parse(text, intent.label if intent is not None else None,
                       _finite(intent.score) if intent is not None else 0.0, ranked, entities, tokens,
                       intent.neighbours if intent is not None else (), rejection))
    return out

  def _entity(self, text: str, slot: protocol.Slot) -> dict:
    entity, role = annotated.split_label(slot.label)
    surface = text[slot.char_start:slot.char_end]
    out = {"start": slot.char_start, "end": slot.char_end, "value": self.synonyms.get(surface.lower(), surface),
           "entity": entity, "confidence": slot.score, "confidence_entity": slot.score, "extractor": EXTRACTOR,
           "evidence": {"text": slot.evidence.text, "score": slot.evidence.score,
                        "utterance": slot.support_utterance}}
    if role is not None:
      out["role"] = role
    return out

  def scores(self, texts: Sequence[str]) -> np.ndarray:
    """The intent model's [len(texts), len(labels)] scores (its own scale; see its ``scores``)."""
    if self.intents is None:
      return protocol.score_texts(texts, lambda t: np.zeros((len(t), 0), np.float32), 0)
    return self.intents.scores(texts)

  # ------------------------------------------------------------------------------------------ examples

  def add_examples(self, examples: Any, labels: Sequence | None = None) -> None:
    """Adds annotated examples (``data.annotated.read``'s forms: dicts with ``text``, ``intent``, ``entities``;
    or ``texts`` with one intent each as ``labels``) without retraining: their intents go to the intent model,
    their utterances (with their entities, none included) to the slot filler's support set. New intents and
    new slot types answer at once."""
    if labels is not None:
      texts = protocol.text_list(examples)
      if isinstance(labels, (str, bytes)) or len(labels) != len(texts):
        raise DataError(f"add_examples: {len(texts)} texts but {len(labels) if not isinstance(labels, str) else 1} "
                        "labels; give one intent per text")
      examples = [{"text": t, "intent": l, "entities": []} for t, l in zip(texts, labels)]
    rows = annotated.read(examples).examples
    with_intent = [e for e in rows if e.intent is not None]
    if with_intent:
      if self.intents is None:
        raise DataError(f"{with_intent[0].where}: intent {with_intent[0].intent!r}, but this model has no intent "
                        "classifier (it was trained on examples without intents); train it with intents")
      self.intents.add_examples([e.text for e in with_intent], [e.intent for e in with_intent])
    with_entities = [e for e in rows if e.entities]
    if with_entities and self.slots is None:
      raise DataError(f"{with_entities[0].where}: entities, but this model has no slot filler (it was trained on "
                      "examples without entities); train it with annotated entities")
    if self.slots is not None:
      self.slots.add_support(annotated.support_rows(rows))

  # --------------------------------------------------------------------------------------------- storage

  def save(self, directory: str | pathlib.Path) -> pathlib.Path:
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if self.intents is not None:
      self.intents.save(directory / INTENTS)
    if self.slots is not None:
      self.slots.save(directory / SLOTS)
    self._write_meta(directory)
    model_card.write(directory)
    return directory

  def save_rows(self, directory: str | pathlib.Path) -> None:
    """Writes both parts' examples (grown by ``add_examples``) into an export of this model."""
    directory = pathlib.Path(directory)
    for name, part in ((INTENTS, self.intents), (SLOTS, self.slots)):
      if part is not None:
        part.save_rows(directory / name)

  def _write_meta(self, directory: pathlib.Path) -> None:
    protocol.write_meta(directory, META_FILE, {
        "kind": self.kind, "intents": INTENTS if self.intents is not None else None,
        "slots": SLOTS if self.slots is not None else None, "synonyms": self.synonyms,
        "slots_by_intent": self.slots_by_intent})

  @classmethod
  def load(cls, directory: str | pathlib.Path) -> "NLUModel":
    directory = pathlib.Path(directory)
    meta = protocol.read_meta(directory, META_FILE, "the export/ folder of an nlu run")
    intents = registry.load(directory / meta["intents"]) if meta.get("intents") else None
    slots = registry.load(directory / meta["slots"]) if meta.get("slots") else None
    return cls(intents, slots, synonyms=meta.get("synonyms"),
               slots_by_intent=meta.get("slots_by_intent", False))  # exports before it: independent parts


def _finite(value: float) -> float:
  value = float(value)
  return value if np.isfinite(value) else 0.0
