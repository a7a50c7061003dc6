"""Retriever's slot filler (Yu et al., 2021, §5): span vectors, a support-set index of labelled spans, and
§5.2's decoding.

``SpanEncoder`` embeds word spans: the concatenation of the contextual vectors of a span's first and last word
piece (§5.1, after Toshniwal et al. 2020). Each distinct utterance is encoded once (one program per length
bucket) and its word-piece states kept, so every span of it, and every episode it appears in, costs a lookup.

``SlotRetriever`` indexes the labelled spans of a support set (``index.Index``, exact or ScaNN) and, for every
span of up to ``max_words`` words of a query utterance, retrieves its nearest labelled span. The score is
normalised to [0, 1] as the cosine of the two span vectors (§5.2: "we normalize the similarity scores by
L2-norm"), clipped at 0, and becomes a ``span_decoding.Candidate``. ``similarity="cosine"`` (the default) also
retrieves by that cosine; ``"dot"`` retrieves by the raw dot product of the training objective and reports the
hit's cosine (the two differ when span norms differ; measured in bench/results/retriever.md). With
``inference="prototype"`` (the Proto baseline) the index holds one vector per label, the mean of its support
spans, instead of the spans themselves.

With ``none_margin`` set (not in the paper: the joint NLU model's slot filler, ``methods.nlu``), the retriever also
indexes every other span of up to ``max_words`` words of the support utterances, the spans the user did *not*
label, and a query span is a slot candidate only when its nearest labelled span is closer (cosine) than its
nearest unlabelled one by more than the margin; otherwise it is no candidate. This is the "none" column of the
batch softmax the encoder learns the support with (``methods.span_training``), used at inference too: the user's
own utterances say what is no slot, where the threshold alone can only say how close is close enough. Measured
in bench/results/joint_nlu.md.

``candidates(..., labels=...)`` restricts each query's retrieval to some slot labels (the joint model passes the
labels its predicted intent holds in the support set, after ConProm's intent-slot co-occurrence: Hou et al.,
2021): a span then retrieves its nearest support span *of those labels*, so the decoder sees the right label's
score instead of a wrong label's. One sub-index per label set, built once and dropped with the support set.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from fewshot_nlu.data import batching
from fewshot_nlu.data.bio import bio_spans
from fewshot_nlu.encoders import inference, transformer
from fewshot_nlu.encoders.tokenizer import Tokenizer
from fewshot_nlu.models.prototypes import label_means
from fewshot_nlu.index import Index
from fewshot_nlu.index import normalize as l2_normalize
from fewshot_nlu.models.span_decoding import Candidate, decode, enumerate_spans

INFERENCE = ("nearest", "prototype")
SIMILARITIES = ("cosine", "dot")


@functools.partial(jax.jit, static_argnames=("cfg", "dtype"))
def token_states(params, input_ids, attention_mask, *, cfg, dtype, projection=None):
  """[B, L, H] contextual vectors of every word piece (float32); with ``projection`` [H, P], those vectors times
  it ([B, L, P]) in the same program."""
  hidden = transformer.encoder_for(cfg, params, dtype).apply({"params": params}, input_ids, attention_mask)
  hidden = hidden.astype(jnp.float32)
  return hidden if projection is None else hidden @ projection


project = jax.jit(jnp.matmul)  # token states [B, L, H] times a projection [H, P], where the states came from elsewhere


class SpanEncoder:
  """Word spans of pre-split utterances -> first+last word-piece vectors (numpy, float32).

  The word-piece states of each distinct utterance are computed once and kept (keyed by its words; the cache
  belongs to this encoder's params), so the episodes of a domain, which share most of their utterances, cost
  one encoding of each utterance; a span's vector is then two rows of its utterance's states. ``cache=False``
  computes without keeping: a served model's queries, each new, would otherwise grow the cache without bound.
  """

  def __init__(self, cfg: transformer.EncoderConfig, params: Any, tokenizer: Tokenizer, *, max_length: int = 64,
               batch_size: int = 32, dtype=jnp.float32, metric: np.ndarray | None = None):
    if max_length > cfg.max_length:
      raise ValueError(f"max_length={max_length} exceeds the model's {cfg.max_length} positions")
    if metric is not None and metric.shape != (2 * cfg.hidden_size, 2 * cfg.hidden_size):
      raise ValueError(f"metric {metric.shape} must be [{2 * cfg.hidden_size}, {2 * cfg.hidden_size}]")
    self.metric = None if metric is None else np.asarray(metric, np.float32)
    self.cfg, self.params, self.tokenizer = cfg, jax.device_put(params), tokenizer
    self.max_length, self.batch_size, self.dtype = max_length, batch_size, dtype
    self.buckets = batching.length_buckets(max_length, batching.INFERENCE_BUCKETS)
    self.dim = 2 * cfg.hidden_size
    self._states: dict[tuple[str, ...], tuple[np.ndarray, list[tuple[int, int]]]] = {}
    self._projection: jax.Array | None = None  # the metric's halves side by side, on the device (``encode``)
    self.onnx = None  # an ``onnx_inference.OnnxForward`` in place of XLA (``onnx_inference.use_onnxruntime``)

  def states(self, word_lists: Sequence[Sequence[str]], *, cache: bool = True
             ) -> list[tuple[np.ndarray, list[tuple[int, int]]]]:
    """Per utterance, (its [pieces, H] states, per word its (first, last) piece), encoding the new ones (and
    keeping them, with ``cache``)."""
    keys = [tuple(words) for words in word_lists]
    missing = list(dict.fromkeys(k for k in keys if k not in self._states))
    fresh = dict(zip(missing, self._compute(missing))) if missing else {}
    if cache:
      self._states.update(fresh)
    return [self._states[k] if k in self._states else fresh[k] for k in keys]

  def _compute(self, word_lists: Sequence[Sequence[str]], projection: jax.Array | None = None
               ) -> list[tuple[np.ndarray, list[tuple[int, int]]]]:
    """``states`` of ``word_lists``, none kept; with ``projection`` [H, P] the states times it, in the
    encoder's program."""
    encoded = self.tokenizer.encode_words(word_lists, self.max_length)

    def states(batch, rows):
      if self.onnx is None:
        return token_states(self.params, batch["input_ids"], batch["attention_mask"], cfg=self.cfg, dtype=self.dtype,
                            projection=projection)
      hidden = self.onnx(batch["input_ids"], batch["attention_mask"])
      return hidden if projection is None else project(hidden, projection)

    computed = inference.encode_bucketed(
        [ids for ids, _ in encoded], states,
        pad_id=self.tokenizer.pad_id, buckets=self.buckets, batch_size=self.batch_size,
        row_sizes=[len(ids) for ids, _ in encoded])
    return [(np.ascontiguousarray(c), pieces) for c, (_, pieces) in zip(computed, encoded)]

  def encode(self, word_lists: Sequence[Sequence[str]], spans: Sequence[Sequence[tuple[int, int]]], *,
             cache: bool = True) -> list[np.ndarray]:
    """Per utterance, a [len(spans[u]), 2H] array: the vectors of its word spans [start, end), through the
    learnt ``metric`` when there is one (``methods.span_training.learn_metric``). A span with a word cut off by
    truncation gets a zero vector (it can retrieve nothing with a positive score). ``cache``: keep the
    utterances' states (``states``).

    With a metric, [h_first, h_last] @ W = h_first @ W_top + h_last @ W_bottom: the word pieces (few) go through
    W's halves, not the spans. Uncached (a served model's queries) that product runs in the encoder's program:
    numpy's threaded BLAS right after an XLA call on 2 cores took 5-30 ms for what is 0.2 ms alone."""
    if self.metric is None:
      rows = self.states(word_lists, cache=cache)
    else:  # per piece [h @ W_top | h @ W_bottom], [pieces, 2 x 2H]
      if self._projection is None:
        width = self.cfg.hidden_size
        self._projection = jax.device_put(np.concatenate([self.metric[:width], self.metric[width:]], axis=1))
      if cache:
        projection = np.asarray(self._projection)
        rows = [(hidden @ projection, pieces) for hidden, pieces in self.states(word_lists)]
      else:
        rows = self._compute(word_lists, self._projection)
    out = []
    for (hidden, pieces), utterance_spans in zip(rows, spans):
      if not len(utterance_spans):
        out.append(np.zeros((0, self.dim), np.float32))
        continue
      bounds = np.asarray(utterance_spans, np.int64)
      pieces = np.asarray(pieces, np.int64).reshape(-1, 2)
      first, last = pieces[bounds[:, 0], 0], pieces[bounds[:, 1] - 1, 1]
      ok = (first >= 0) & (last >= 0)  # pieces_ok: both ends survived truncation
      first, last = np.where(ok, first, 0), np.where(ok, last, 0)
      if self.metric is None:
        vectors = np.concatenate([hidden[first], hidden[last]], axis=1)
      else:
        vectors = hidden[first, : self.dim] + hidden[last, self.dim :]
      out.append(np.where(ok[:, None], vectors, 0.0).astype(np.float32))
    return out

  def with_metric(self, metric: np.ndarray | None) -> "SpanEncoder":
    """The same encoder (its cached states shared) with another span ``metric``."""
    other = SpanEncoder.__new__(SpanEncoder)
    other.__dict__.update(self.__dict__)
    other.metric = None if metric is None else np.asarray(metric, np.float32)
    other._projection = None
    return other


def pieces_ok(pieces: Sequence[tuple[int, int]], span: tuple[int, int]) -> bool:
  """Whether both ends of the word span survived truncation."""
  return pieces[span[0]][0] >= 0 and pieces[span[1] - 1][1] >= 0


def surface(utterance: dict, start: int = 0, end: int | None = None) -> str:
  """Words [start, end) of a support utterance as the user wrote them: the raw ``text`` between the words'
  ``offsets`` where the utterance carries them (punctuation and spacing kept), else the tokens joined by spaces."""
  tokens = utterance["tokens"]
  end = len(tokens) if end is None else end
  if utterance.get("text") is None or start >= end:
    return " ".join(tokens[start:end])
  return utterance["text"][utterance["offsets"][start][0] : utterance["offsets"][end - 1][1]]


def labelled_spans(tags: Sequence[str]) -> list[tuple[int, int, str]]:
  """The gold slots of a BIO sequence as word spans [start, end) with their label."""
  return [(start, end + 1, label) for label, start, end in bio_spans(tags)]


def unlabelled_spans(num_words: int, gold: Sequence[tuple[int, int, str]], max_words: int) -> list[tuple[int, int]]:
  """Every word span of up to ``max_words`` words that is no ``gold`` slot (partial and overlong slots
  included): the batch softmax's "none" column, and the retriever's unlabelled spans."""
  taken = {(start, end) for start, end, _ in gold}
  return [span for span in enumerate_spans(num_words, max_words) if span not in taken]


def requested_scores(cosines: np.ndarray, payloads: Sequence[dict], requested_cosines: np.ndarray,
                     requested_payloads: Sequence[dict], bonus: float) -> tuple[np.ndarray, list[dict]]:
  """Per query span, its nearest support span overall (``cosines``, ``payloads``) or, where it scores more, its
  nearest span of a requested label, whose cosine c scores 1 - (1 - bonus)(1 - c): the bonus takes that share of
  the way to 1, so the requested label's spans keep their order and stay in [0, 1] (an added bonus clipped at 1
  tied the best ones: Restaurants-8k's requested utterances, untouched encoder, best bonus 63.5 F1 added, 64.5
  so). Not in the paper: the requested slot of Span-ConveRT's Restaurants-8k setting (Coope et al., 2020), where
  the dialogue's last question (``for how many people?``) makes a bare answer (``13``) that slot's value; the
  bonus is chosen by cross-validation on the user's examples (``methods.nlu.train.select``)."""
  boosted = 1.0 - (1.0 - bonus) * (1.0 - requested_cosines)
  take = boosted > cosines
  return (np.where(take, boosted, cosines),
          [r if t else p for p, r, t in zip(payloads, requested_payloads, take)])


@dataclasses.dataclass
class ScoredSpans:
  """One query utterance's spans as ``SlotRetriever.score`` found them: each span's (unit-length, for cosine
  similarity) vector, the cosine and payload of its nearest allowed support span, those of its nearest span of a
  requested label (None: no requested label with support spans), and the cosine of its nearest unlabelled
  support span (NaN until ``answer`` needs it)."""

  spans: list[tuple[int, int]]
  vectors: np.ndarray
  cosines: np.ndarray
  payloads: list[dict]
  requested: tuple[np.ndarray, list[dict]] | None
  none_cosines: np.ndarray
  by_label: dict = dataclasses.field(default_factory=dict)  # label -> ``SlotRetriever.label_cosines``' answer


class SlotRetriever:
  """Few-shot slot filling by span retrieval from a support set of BIO-labelled utterances."""

  def __init__(self, encoder: SpanEncoder, *, max_words: int = 7, inference: str = "nearest",
               backend: str = "exact", similarity: str = "cosine", none_margin: float | None = None):
    if inference not in INFERENCE:
      raise ValueError(f"inference {inference!r} unknown; choose one of {INFERENCE}")
    if similarity not in SIMILARITIES:
      raise ValueError(f"similarity {similarity!r} unknown; choose one of {SIMILARITIES}")
    self.encoder, self.max_words, self.inference, self.backend = encoder, max_words, inference, backend
    self.similarity = similarity
    self.none_margin = none_margin  # None: no unlabelled spans indexed (the paper's retriever)
    self.index: Index | None = None
    self.none_index: Index | None = None  # the unlabelled spans (unit length), with none_margin
    self._restricted: dict[frozenset, Index | None] = {}  # label set -> its spans of ``index`` (None: none)

  def set_support(self, utterances: Sequence[dict]) -> int:
    """Indexes the labelled spans of ``utterances`` (``{"tokens": [...], "tags": [...]}``), replacing any
    previous support set; returns the number of index entries."""
    gold = [labelled_spans(u["tags"]) for u in utterances]
    vectors = self.encoder.encode([u["tokens"] for u in utterances], [[(s, e) for s, e, _ in g] for g in gold])
    rows, payloads = [], []
    for u, spans, vecs in zip(utterances, gold, vectors):
      for (start, end, label), v in zip(spans, vecs):
        rows.append(v)
        payloads.append({"label": label, "text": surface(u, start, end), "utterance": surface(u)})
    if not rows:
      raise ValueError("the support set holds no labelled span")
    matrix = np.stack(rows)
    if self.inference == "prototype":
      labels, matrix = label_means(matrix, [p["label"] for p in payloads])
      payloads = [{"label": l, "text": f"<prototype of {l}>", "utterance": ""} for l in labels]
    if self.similarity == "cosine":
      matrix = l2_normalize(matrix)
    self.index = Index.build(matrix, payloads, metric="dot", backend=self.backend)
    self._restricted = {}
    self.none_index = self._none_index(utterances, gold) if self.none_margin is not None else None
    return len(self.index)

  def _none_index(self, utterances: Sequence[dict], gold: Sequence[list[tuple[int, int, str]]]) -> Index | None:
    """The support utterances' unlabelled spans of up to ``max_words`` words, unit length (None if there are none)."""
    others = [unlabelled_spans(len(u["tokens"]), spans, self.max_words) for u, spans in zip(utterances, gold)]
    vectors = [v for v in self.encoder.encode([u["tokens"] for u in utterances], others) if len(v)]
    if not vectors:
      return None
    matrix = l2_normalize(np.concatenate(vectors))
    return Index.build(matrix, [{}] * len(matrix), metric="dot", backend=self.backend)

  def restricted(self, labels: frozenset | None) -> Index | None:
    """The index of the support spans whose label is in ``labels`` (all of them for None; None when no span
    has one of those labels)."""
    if labels is None:
      return self.index
    if labels not in self._restricted:
      keep = [i for i, p in enumerate(self.index.payloads) if p["label"] in labels]
      self._restricted[labels] = (Index.build(self.index.vectors[keep], [self.index.payloads[i] for i in keep],
                                              metric="dot", backend=self.backend) if keep else None)
    return self._restricted[labels]

  def candidates(self, word_lists: Sequence[Sequence[str]], *, floor: float = 0.0,
                 labels: Sequence[frozenset | None] | None = None, cache: bool = True,
                 requested: Sequence[frozenset | None] | None = None, requested_bonus: float = 0.0
                 ) -> list[list[tuple[Candidate, dict]]]:
    """Per utterance, every span of up to ``max_words`` words as a (Candidate, retrieved payload) pair (with
    ``none_margin``: those closer to a labelled span than to every unlabelled one by more than the margin).
    ``floor``: only spans scoring at least that (a decoder whose lowest threshold is ``floor`` keeps no other;
    the unlabelled spans are searched for these alone). ``labels``: per utterance, the slot labels it may
    retrieve (None: all; module docstring). ``requested``: per utterance, the slot labels the dialogue has
    just asked for (None: none); a span's nearest support span of those labels scores its cosine raised by
    ``requested_bonus`` (``requested_scores``) and answers for the span where that beats its nearest span
    overall. ``cache``: keep the utterances' encoder states (``SpanEncoder``; off for one-off
    queries). ``score`` then ``answer``, in one call."""
    return [self.answer(scored, floor=floor, requested_bonus=requested_bonus)
            for scored in self.score(word_lists, labels=labels, requested=requested, cache=cache)]

  def score(self, word_lists: Sequence[Sequence[str]], *, labels: Sequence[frozenset | None] | None = None,
            requested: Sequence[frozenset | None] | None = None, cache: bool = True) -> list[ScoredSpans | None]:
    """Per utterance, its spans and their nearest support spans (``candidates``' arguments), before any
    requested-slot bonus, floor or none margin: ``answer`` applies those, so one scoring serves every bonus and
    margin a cross-validation tries (``methods.nlu.train.select``). None for an utterance without spans or
    without a support span of its allowed labels."""
    if self.index is None:
      raise ValueError("no support set: call set_support first")
    for name, given in (("label sets", labels), ("requested label sets", requested)):
      if given is not None and len(given) != len(word_lists):
        raise ValueError(f"{len(word_lists)} utterances but {len(given)} {name}")
    spans = [enumerate_spans(len(words), self.max_words) for words in word_lists]
    vectors = self.encoder.encode(word_lists, spans, cache=cache)
    if self.similarity == "cosine":
      vectors = [l2_normalize(v) for v in vectors]
    out: list[ScoredSpans | None] = []
    nothing = [None] * len(spans)
    for utterance_spans, vecs, allowed, asked in zip(spans, vectors, labels if labels is not None else nothing,
                                                     requested if requested is not None else nothing):
      index = self.restricted(allowed)
      if not utterance_spans or index is None:
        out.append(None)
        continue
      wanted = None
      if asked:
        wanted = self.restricted(frozenset(asked) & allowed if allowed is not None else frozenset(asked))
      out.append(ScoredSpans(utterance_spans, vecs, *self._nearest(index, vecs),
                             self._nearest(wanted, vecs) if wanted is not None else None,
                             np.full(len(utterance_spans), np.nan)))
    return out

  def answer(self, scored: ScoredSpans | None, *, floor: float = 0.0, requested_bonus: float = 0.0
             ) -> list[tuple[Candidate, dict]]:
    """One utterance's (Candidate, payload) pairs from its ``score``: the requested-slot bonus, then the floor,
    then (with ``none_margin``) the unlabelled spans' veto, as ``candidates`` describes. The unlabelled index is
    searched only for spans not searched before (kept in ``scored``)."""
    if scored is None:
      return []
    cosines, payloads = scored.cosines, scored.payloads
    if scored.requested is not None and requested_bonus > 0:
      cosines, payloads = requested_scores(cosines, payloads, *scored.requested, requested_bonus)
    kept = cosines >= floor - 1e-9 if floor > 0 else np.ones(len(cosines), bool)
    if self.none_index is not None and self.none_margin is not None and kept.any():
      missing = kept & np.isnan(scored.none_cosines)
      if missing.any():
        scored.none_cosines[missing] = self.none_index.search(l2_normalize(scored.vectors[missing]),
                                                              1)[0][:, 0].astype(np.float64)
      kept[kept] = cosines[kept] > scored.none_cosines[kept] + self.none_margin
    return [(Candidate(start, end, payload["label"], float(cosine)), payload)
            for (start, end), cosine, payload, keep in zip(scored.spans, cosines, payloads, kept) if keep]

  def label_cosines(self, scored: ScoredSpans, label: str) -> tuple[np.ndarray, list[dict]] | None:
    """Per span of ``scored``, the cosine (clipped to [0, 1]) of its nearest support span of ``label`` and that
    span's payload, whatever its nearest span overall; None when no support span has ``label``. Kept in ``scored``:
    an expected slot (``slot_filler.fill_expected``) asks once per label, whichever threshold decoded."""
    if label not in scored.by_label:
      index = self.restricted(frozenset({label}))
      scored.by_label[label] = None if index is None else self._nearest(index, scored.vectors)
    return scored.by_label[label]

  def _nearest(self, index: Index, vecs: np.ndarray) -> tuple[np.ndarray, list[dict]]:
    """Per query span vector, the cosine (clipped to [0, 1]) of its nearest item of ``index`` and that item's
    payload."""
    scores, items = index.search(vecs, 1)
    scores, items = scores[:, 0], items[:, 0]
    norms = (np.linalg.norm(vecs, axis=1).astype(np.float64)
             * np.linalg.norm(index.vectors[items], axis=1).astype(np.float64))
    scores = scores.astype(np.float64)
    cosines = np.clip(np.divide(scores, norms, out=np.zeros_like(scores), where=norms > 0), 0.0, 1.0)
    return cosines, [index.payloads[int(item)] for item in items]

  def predict(self, word_lists: Sequence[Sequence[str]], *, threshold: float, beam_size: int = 10,
              merge_threshold: float = 0.99) -> list[list[Candidate]]:
    """The decoded slots of each utterance (§5.2)."""
    return [decode([c for c, _ in row], threshold=threshold, beam_size=beam_size,
                   merge_threshold=merge_threshold) for row in self.candidates(word_lists)]
