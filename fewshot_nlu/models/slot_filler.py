"""Retriever's slot filler as a ready-to-use model (Yu et al., 2021, §5): a span encoder, a support set of
BIO-labelled utterances whose labelled spans it retrieves from (``span_retrieval.SlotRetriever``), and §5.2's decoding
(``span_decoding.decode``) at the threshold chosen on development data.

Texts are split on whitespace into words (SNIPS is tokenised that way); each predicted slot carries the
support span it retrieved (text, label, normalised score) and that span's utterance as evidence. The support
set grows with ``add_examples(texts, tags)`` (new slot labels become predictable without retraining; the
whole support set is re-encoded, which is cheap at few-shot sizes).

Where the support's annotations take the punctuation after a value (``12:30PM.``, ``1 p.m.``) or leave it,
a decoded span's end follows them (``span_boundaries``: counted per label and last word from the support).

A support utterance may name its ``intent``: ``predict(texts, intents=...)`` then lets each text's spans retrieve
only the slot labels its intent's support utterances hold (``labels_for``; the joint model passes its predicted
intents, ``models.nlu_model``).

``save``/``load`` write one folder: the encoder in Hugging Face layout, ``support.jsonl`` (one
``{"tokens": [...], "tags": [...]}`` per line, with ``"intent"`` and ``"requested"`` (the slots asked for before
it) where known, and the raw ``"text"`` with each token's character ``"offsets"`` where the examples came as text,
so evidence quotes them as written) and
``slot_filler.json`` (kind ``slot_filler``: span settings, decoding settings, the threshold, and notes on where
the threshold and support set came from).
With ``expected_share`` (not in the Retriever paper: the joint model's cross-validation chooses it,
``methods.nlu.train.select``), a text of an intent is expected to hold each slot label that at least that share
of the intent's support utterances hold (``expected_by_intent``: every AddToPlaylist example names a playlist);
where decoding left such a label out, its best span is added (``fill_expected``). After the intent-slot relation
of the few-shot joint literature (ConProm, Hou et al., 2021; Han et al., 2024), as a prior on what to decode.

A ``models.protocol.Model``.
"""

from __future__ import annotations

import pathlib
import re
from typing import Sequence

import numpy as np

from fewshot_nlu import model_card
from fewshot_nlu.data import annotated
from fewshot_nlu.data import words as word_lib
from fewshot_nlu.data.bio import validate_bio
from fewshot_nlu.encoders import pretrained
from fewshot_nlu.index import normalize as l2_normalize
from fewshot_nlu.models import span_boundaries
from fewshot_nlu.models.span_decoding import Candidate, decode, enumerate_spans
from fewshot_nlu.models.span_retrieval import SlotRetriever, SpanEncoder, labelled_spans
from fewshot_nlu.data.support import read_support
from fewshot_nlu.models import protocol
from fewshot_nlu.models.protocol import Neighbour, Slot, SlotPrediction

META_FILE = "slot_filler.json"
METRIC_FILE = "span_metric.npy"  # the span metric learnt on the support set (methods.span_training.learn_metric)
WORDS = {"whitespace": lambda text: [m.span() for m in re.finditer(r"\S+", text)],  # SNIPS / ATIS files
         "offsets": word_lib.word_spans}  # punctuation split off (data.words), for raw user text
SUPPORT_FILE = "support.jsonl"


def labels_by_intent(support: Sequence[dict]) -> dict[str, frozenset]:
  """Per intent named by a support utterance, the slot labels a text of that intent may take: those of the
  utterances of that intent and of those without one (ConProm's intent-slot co-occurrence; docs/nlu.md)."""
  by_intent: dict[str | None, set] = {}
  for u in support:
    by_intent.setdefault(u.get("intent"), set()).update(label for _, _, label in labelled_spans(u["tags"]))
  shared = by_intent.pop(None, set())
  return {k: frozenset(v | shared) for k, v in by_intent.items()}


EXPECTED_MIN_UTTERANCES = 3  # an intent with fewer support utterances expects no slot: one example is no pattern


def expected_by_intent(support: Sequence[dict], share: float) -> dict[str, frozenset]:
  """Per intent named by at least ``EXPECTED_MIN_UTTERANCES`` support utterances, the slot labels held by at least
  ``share`` (in (0, 1]) of them: the slots a text of that intent is expected to hold (``fill_expected``)."""
  held: dict[str, list[set]] = {}
  for u in support:
    if u.get("intent") is not None:
      held.setdefault(u["intent"], []).append({label for _, _, label in labelled_spans(u["tags"])})
  return {intent: frozenset(label for label in set().union(*sets)
                            if sum(label in s for s in sets) >= share * len(sets) - 1e-9)
          for intent, sets in held.items() if len(sets) >= EXPECTED_MIN_UTTERANCES}


def longest_spans(support: Sequence[dict]) -> dict[str, int]:
  """Per slot label, the words of its longest support span (an expected slot's added span is no longer)."""
  out: dict[str, int] = {}
  for u in support:
    for start, end, label in labelled_spans(u["tags"]):
      out[label] = max(out.get(label, 0), end - start)
  return out


def fill_expected(spans: Sequence[Candidate], scored, retriever: SlotRetriever, expected: frozenset,
                  longest: dict[str, int]) -> tuple[list[Candidate], dict]:
  """``spans`` (one utterance's decoding) with each label of ``expected`` it lacks added: the span of ``scored``
  (``SlotRetriever.score``'s answer for the utterance) nearest that label's support spans among those that overlap
  no span kept and are no longer than the label's longest support span (``longest``), scored by that cosine.
  Greedy: of the labels still missing, the one whose best span scores highest goes first. Returns (the spans by
  position, {(start, end, label): (Candidate, payload)} of the spans added)."""
  spans, added = list(spans), {}
  missing = set(expected) - {c.label for c in spans}
  if not missing or scored is None:
    return sorted(spans), added
  bounds = np.array(scored.spans, np.int64).reshape(-1, 2)

  def overlapping(c: Candidate) -> np.ndarray:
    return (bounds[:, 0] < c.end) & (c.start < bounds[:, 1])

  taken = np.zeros(len(bounds), bool)  # the spans that overlap one kept, updated as spans are added
  for c in spans:
    taken |= overlapping(c)
  while missing:
    best = None
    for label in sorted(missing):
      nearest = retriever.label_cosines(scored, label)
      if nearest is None:
        continue
      cosines, payloads = nearest
      free = ~taken & (bounds[:, 1] - bounds[:, 0] <= longest.get(label, retriever.max_words))
      if free.any():
        i = int(np.flatnonzero(free)[np.argmax(cosines[free])])
        if best is None or cosines[i] > best[0].score:
          best = (Candidate(int(bounds[i, 0]), int(bounds[i, 1]), label, float(cosines[i])), payloads[i])
    if best is None:
      break
    spans.append(best[0])
    taken |= overlapping(best[0])
    added[(best[0].start, best[0].end, best[0].label)] = best
    missing.discard(best[0].label)
  return sorted(spans), added


class SlotFillerModel:
  """Slot scores are §5.2's normalised retrieval scores: the cosine of a query span and a support span (or a
  label prototype), clipped to [0, 1]. With the retriever's ``none_margin``, a span nearer to an unlabelled span
  of the support utterances than to every labelled one (by the margin) is no slot (``SlotRetriever``)."""

  kind = "slot_filler"

  def __init__(self, retriever: SlotRetriever, support: Sequence[dict] = (), *, threshold: float,
               beam_size: int = 10, merge_threshold: float = 0.99, threshold_step: float = 0.05,
               threshold_retries: int = 10, notes: dict | None = None, words: str = "whitespace",
               requested_bonus: float = 0.0, expected_share: float | None = None):
    if not 0 <= threshold <= 1:
      raise ValueError(f"threshold {threshold} must be in [0, 1]")
    if not 0 <= requested_bonus <= 1:
      raise ValueError(f"requested_bonus {requested_bonus} must be in [0, 1]")
    if expected_share is not None and not 0 < expected_share <= 1:
      raise ValueError(f"expected_share {expected_share} must be in (0, 1], or None (no expected slots)")
    if words not in WORDS:
      raise ValueError(f"words {words!r} unknown; choose one of {WORDS}")
    self.retriever, self.threshold, self.words = retriever, threshold, words
    self.requested_bonus = requested_bonus  # a requested slot's score bonus (span_retrieval.requested_scores)
    self.expected_share = expected_share  # an intent's expected slots (expected_by_intent; None: none)
    self.decoding = {"beam_size": beam_size, "merge_threshold": merge_threshold,
                     "threshold_step": threshold_step, "threshold_retries": threshold_retries}
    self.notes = dict(notes or {})  # provenance, recorded in the export (e.g. the threshold's source)
    self.support: list[dict] = []
    self._labels_by_intent: dict[str, frozenset] | None = None  # built on first use (``labels_for``)
    self._boundaries: dict | None = None  # span_boundaries.count of the support, built on first use
    self._expected: tuple[dict, dict] | None = None  # (expected_by_intent, longest_spans), built on first use
    if support:
      self.add_support(support)

  @property
  def labels(self) -> list[str]:
    """The slot labels of the support set, sorted."""
    return sorted({label for u in self.support for _, _, label in labelled_spans(u["tags"])})

  def __len__(self) -> int:
    """Support utterances."""
    return len(self.support)

  def describe(self) -> str:
    """One line: the slot labels, the support set, what was learnt on it (``notes``) and the threshold."""
    labels = self.labels
    learnt = "; ".join(f"{name}: {self.notes[key]}" for key, name in (("encoder", "span encoder"), ("learnt", "learnt"))
                       if key in self.notes)
    return (f"{len(labels)} slot type(s) ({protocol.listed(labels)}) from {len(self.support)} example utterance(s); "
            f"{learnt + '; ' if learnt else ''}threshold {self.threshold:g}")

  def __repr__(self) -> str:
    return f"SlotFillerModel: {self.describe()}"

  def add_support(self, utterances: Sequence[dict]) -> None:
    """Adds ``{"tokens": [...], "tags": [...]}`` utterances (one BIO tag per token; optionally ``intent``, and
    the raw ``text`` with each token's character ``offsets`` in it, which evidence then quotes) to the support
    set and re-indexes it."""
    rows = []
    for number, u in enumerate(utterances, 1):
      tokens, tags = [str(t) for t in u["tokens"]], [str(t) for t in u["tags"]]
      if len(tokens) != len(tags):
        raise ValueError(f"support example {number}: {len(tokens)} words but {len(tags)} tags ({' '.join(tokens)!r})")
      validate_bio(tags, f"support example {number}")
      row = {"tokens": tokens, "tags": tags}
      if u.get("intent") is not None:
        row["intent"] = str(u["intent"])
      if u.get("requested"):
        row["requested"] = [str(r) for r in u["requested"]]  # the slot(s) asked for before it (select's CV)
      if u.get("text") is not None:
        offsets = [[int(a), int(b)] for a, b in u["offsets"]]
        if len(offsets) != len(tokens) or any(str(u["text"])[a:b] != t for (a, b), t in zip(offsets, tokens)):
          raise ValueError(f"support example {number}: its offsets do not give its tokens in its text")
        row["text"], row["offsets"] = str(u["text"]), offsets
      rows.append(row)
    self.retriever.set_support(self.support + rows)
    self.support.extend(rows)
    self._labels_by_intent = self._boundaries = self._expected = None

  def labels_for(self, intent: str | None) -> frozenset | None:
    """The slot labels a text of ``intent`` may take (``labels_by_intent`` of the support set); None (every
    label) for no intent or an intent no support utterance names."""
    if self._labels_by_intent is None:
      self._labels_by_intent = labels_by_intent(self.support)
    return self._labels_by_intent.get(intent)

  def expected_for(self, intent: str | None) -> frozenset | None:
    """The slot labels a text of ``intent`` is expected to hold (``expected_by_intent`` at ``expected_share``);
    None without an expected share, an intent, or support utterances of that intent."""
    if self.expected_share is None or intent is None:
      return None
    return self._expectations()[0].get(intent) or None

  def _expectations(self) -> tuple[dict, dict]:
    """(``expected_by_intent`` at ``expected_share``, ``longest_spans``) of the support set, built once."""
    if self._expected is None:
      self._expected = (expected_by_intent(self.support, self.expected_share), longest_spans(self.support))
    return self._expected

  def replace_support(self, utterances: Sequence[dict]) -> None:
    """Makes ``utterances`` (e.g. ``support.read_support(path)``) the whole support set: the same trained span
    encoder answers for another domain's slots, without retraining."""
    if not utterances:
      raise ValueError("the support set is empty")
    self.support = []
    self.add_support(utterances)  # resets what is built from the support

  def add_examples(self, texts: Sequence[str], labels: Sequence[str | Sequence[str]]) -> None:
    """Adds labelled utterances: ``texts`` split on whitespace, ``labels`` their BIO tags (a sequence per text,
    or one whitespace-separated string)."""
    texts = protocol.text_list(texts)
    if isinstance(labels, (str, bytes)) or len(texts) != len(labels):
      raise ValueError(f"{len(texts)} texts but {len(labels)} tag sequences")
    self.add_support([{"tokens": t.split(), "tags": l.split() if isinstance(l, str) else list(l)}
                      for t, l in zip(texts, labels)])

  # --------------------------------------------------------------------------------------- inference

  def predict(self, texts: Sequence[str], *, neighbours: int = 1,
              intents: Sequence[str | None] | None = None,
              requested_slots: Sequence[str | Sequence[str] | None] | None = None) -> list[SlotPrediction]:
    """The decoded slots of each text (§5.2: dynamic threshold, beam search, merging). Each slot's evidence is
    the one support span its words retrieved (for a merged slot, that of its best-scoring part);
    ``neighbours`` is accepted for the protocol and not used. ``intents``: one per text (or None), whose
    support labels its spans retrieve from (``labels_for``). ``requested_slots``: one per text (None, a slot
    name, or several), the slot(s) the dialogue has just asked for, whose values score ``requested_bonus``
    more (``span_retrieval.requested_scores``); a name stands for its label and its role labels, a name the
    support never labels for none (``annotated.labels_named``). A blank text is answered ``protocol.EMPTY``."""
    del neighbours
    texts = protocol.text_list(texts)
    nothing = [None] * len(texts)
    for name, given in (("intents", intents), ("requested slot lists", requested_slots)):
      if given is not None and len(given) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(given)} {name}")
    if requested_slots is not None:
      known = self.labels
      requested_slots = [annotated.labels_named(names, known) for names in requested_slots]
    context = list(zip(intents if intents is not None else nothing,
                       requested_slots if requested_slots is not None else nothing))
    return protocol.predict_texts(
        texts, lambda answered, their: self._predict(answered, [self.labels_for(i) for i, _ in their],
                                                     [r for _, r in their], [self.expected_for(i) for i, _ in their]),
        per_text=context)

  def word_spans(self, text: str) -> list[tuple[int, int]]:
    """The character offsets of the words a text is split into (``words``: on whitespace, or ``data.words``'
    words, punctuation split off)."""
    return WORDS[self.words](text)

  def _predict(self, texts: list[str], labels: Sequence[frozenset | None] | None = None,
               requested: Sequence[frozenset | None] | None = None,
               expected: Sequence[frozenset | None] | None = None) -> list[SlotPrediction]:
    offsets = [self.word_spans(t) for t in texts]
    words = [tuple(t[a:b] for a, b in spans) for t, spans in zip(texts, offsets)]
    out = []
    floor = self.threshold - self.decoding["threshold_retries"] * self.decoding["threshold_step"]
    if self._boundaries is None:
      self._boundaries = span_boundaries.count(self.support)
    boundaries = self._boundaries
    scored = self.retriever.score(words, labels=labels, requested=requested, cache=False)
    for text, spans, w, one, wanted in zip(texts, offsets, words, scored, expected or [None] * len(texts)):
      row = self.retriever.answer(one, floor=floor, requested_bonus=self.requested_bonus)
      by_span = {(c.start, c.end, c.label): (c, p) for c, p in row}
      decoded = decode([c for c, _ in row], threshold=self.threshold, **self.decoding)
      if wanted:
        decoded, added = fill_expected(decoded, one, self.retriever, wanted, self._expectations()[1])
        by_span.update(added)
      slots = []
      for span, end in zip(decoded, span_boundaries.ends(boundaries, decoded, w,
                                                         spans if self.words == "offsets" else None)):
        candidate, payload = by_span.get((span.start, span.end, span.label)) or _best_part(span, row)
        first, last = spans[span.start][0], spans[end - 1][1]
        slots.append(Slot(span.start, end, text[first:last], span.label, span.score,
                          Neighbour(payload["text"], payload["label"], candidate.score), payload["utterance"],
                          first, last))
      out.append(SlotPrediction(w, tuple(slots)))
    return out

  def scores(self, texts: Sequence[str]) -> np.ndarray:
    """[len(texts), len(labels)]: per slot label, the best normalised score (cosine clipped to [0, 1]) of any
    span of up to ``max_words`` words of the text against that label's support spans (or prototype); 0 for a
    text without words. How strongly the text holds something like each slot, before decoding. A blank text's
    row is NaN."""
    return protocol.score_texts(texts, self._scores, len(self.labels))

  def _scores(self, texts: list[str]) -> np.ndarray:
    if self.retriever.index is None:
      raise ValueError("the model has no support set to retrieve from")
    words = [[t[a:b] for a, b in self.word_spans(t)] for t in texts]
    spans = [enumerate_spans(len(w), self.retriever.max_words) for w in words]
    vectors = self.retriever.encoder.encode(words, spans, cache=False)
    index = self.retriever.index
    column = {l: c for c, l in enumerate(self.labels)}
    rows = [column[p["label"]] for p in index.payloads]
    support = l2_normalize(index.vectors).T
    out = np.zeros((len(texts), len(column)), np.float32)
    for i, v in enumerate(vectors):
      if len(v):
        best = np.clip(l2_normalize(v) @ support, 0.0, 1.0).max(axis=0)
        np.maximum.at(out[i], rows, best)
    return out

  # ----------------------------------------------------------------------------------------- storage

  def save(self, directory: str | pathlib.Path, *, encoder_heads: dict | None = None) -> pathlib.Path:
    directory = pathlib.Path(directory)
    enc = self.retriever.encoder
    pretrained.save_pretrained(directory, enc.cfg, enc.params, enc.tokenizer, encoder_heads)
    if enc.metric is not None:
      np.save(directory / METRIC_FILE, enc.metric)
    self.save_rows(directory)
    meta = {"kind": self.kind, "max_length": enc.max_length, "max_words": self.retriever.max_words,
            "inference": self.retriever.inference, "similarity": self.retriever.similarity,
            "backend": self.retriever.backend, "none_margin": self.retriever.none_margin,
            "threshold": self.threshold, "words": self.words, "requested_bonus": self.requested_bonus,
            "expected_share": self.expected_share,
            **self.decoding, "labels": self.labels, "notes": self.notes}
    protocol.write_meta(directory, META_FILE, meta)
    model_card.write(directory)
    return directory

  def save_rows(self, directory: str | pathlib.Path) -> None:
    """Writes the support set (its text and tags; vectors are recomputed on load)."""
    protocol.write_jsonl(pathlib.Path(directory) / SUPPORT_FILE, self.support)

  @classmethod
  def load(cls, directory: str | pathlib.Path, *, batch_size: int = 32,
           support: str | pathlib.Path | None = None) -> "SlotFillerModel":
    """The export in ``directory``; with ``support`` (a ``seq.in``/``seq.out`` folder or a JSONL file, see
    ``data.support``) that support set instead of the exported one."""
    directory = pathlib.Path(directory)
    meta = protocol.read_meta(directory, META_FILE, "the export/ folder of a Retriever fold")
    model = pretrained.load_pretrained(str(directory))
    metric = np.load(directory / METRIC_FILE) if (directory / METRIC_FILE).exists() else None
    encoder = SpanEncoder(model.config, model.params, model.tokenizer, max_length=meta["max_length"],
                          batch_size=batch_size, metric=metric)
    retriever = SlotRetriever(encoder, max_words=meta["max_words"], inference=meta["inference"],
                              backend=meta["backend"], similarity=meta.get("similarity", "dot"),
                              none_margin=meta.get("none_margin"))  # exports before it: no unlabelled spans
    support = read_support(support) if support is not None else protocol.read_jsonl(directory / SUPPORT_FILE)
    return cls(retriever, support, threshold=meta["threshold"], beam_size=meta["beam_size"],
               merge_threshold=meta["merge_threshold"], threshold_step=meta["threshold_step"],
               threshold_retries=meta["threshold_retries"], notes=meta.get("notes"),
               words=meta.get("words", "whitespace"),  # exports before offset words: whitespace
               requested_bonus=meta.get("requested_bonus", 0.0),
               expected_share=meta.get("expected_share"))  # exports before it: no expected slots


def _best_part(span: Candidate, row: Sequence[tuple[Candidate, dict]]) -> tuple[Candidate, dict]:
  """The best-scoring candidate of ``span``'s label inside it: the part a merged span's score comes from."""
  parts = [(c, p) for c, p in row if c.label == span.label and span.start <= c.start and c.end <= span.end]
  return max(parts, key=lambda cp: cp[0].score)
