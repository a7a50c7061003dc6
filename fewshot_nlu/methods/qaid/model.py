"""QAID inference (§2.2.2 "Indexing and Inference"): intent detection as retrieval of intent names.

The intent names (the answers) are encoded once into token matrices z(a) = normalize(Proj(Enc(a))) and kept;
a query is encoded to z(q) (at most ``query_length`` = m = 32 tokens) and scored against every answer with
Eq. (1)'s late interaction, Score(q, a); the prediction is the best answer's intent, and the top answers with
their scores are the explanation.

  * exact (default): every answer is scored, in one jitted ``maxsim_scores`` per query batch (chunked over
    the answers). This is the paper's "full retrieval option" and what label-set sizes need.
  * approximate candidate stage, for very large answer sets (more than ``candidate_threshold`` rows): every
    answer TOKEN vector goes into ``index.Index`` (exact or ScaNN, by size); each query token retrieves its
    ``candidate_tokens`` nearest answer tokens, the answers owning them are the candidates, and only those are
    scored exactly (ColBERT's end-to-end retrieval, Khattab & Zaharia 2020 §3.6). The paper uses a Faiss
    IVF-SQ index the same way.
  * ``match="qq+qa"`` (§4.1, "Match-QQ and Match-QA in the inference stage"): labelled example queries
    (``add_examples``) are scored beside the answers and the best row of either kind decides.
  * ``match="intent_doc"`` (not in the paper): each intent answers with ONE document, the union of the token
    vectors of its name and of its example queries, and Eq. (1) scores the query against it: every query token
    finds its best match among all of the intent's tokens, so evidence from several examples adds up instead of
    one row deciding. Measured on the development splits in bench/results/qaid.md.

Out-of-scope rejection (``predict(texts, reject=True)``, ``models.rejection``): below the threshold the answer
is ``out_of_scope``. ``calibrate_rejection`` (run when a QAID run exports) sets it to the 10th percentile
(``quantile``) of the example queries' leave-one-out scores under the model's ``match``: each example is scored as
a new query would be, with its own row left out (qq+qa: the other rows; intent_doc: its intent's document without
its tokens; qa: the intent names, which never held it). Out-of-fold only for the retrieval: the encoder and the
projection were fine-tuned on these very examples, so their scores run higher than those of new in-scope queries
and the threshold rejects somewhat more than 10% of in-scope traffic.

New intents need no retraining: ``add_answers`` (or ``add_examples`` with a new label) makes them
predictable. ``save``/``load`` write one folder: the encoder in Hugging Face layout (with its MLM head),
``late_interaction_projection.safetensors``, ``rows.jsonl`` (answers and example queries) and ``qaid.json``
(kind ``qaid``). A ``models.protocol.Model``: ``scores`` gives per intent the Score of its best row.
"""

from __future__ import annotations

import functools
import pathlib
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from fewshot_nlu import model_card
from fewshot_nlu.data import batching, tsv
from fewshot_nlu.encoders import inference, pretrained, transformer
from fewshot_nlu.encoders import projection as projection_head
from fewshot_nlu.encoders.tokenizer import Tokenizer
from fewshot_nlu.index import Index
from fewshot_nlu.methods.qaid import late_interaction
from fewshot_nlu.models import protocol, rejection
from fewshot_nlu.models.protocol import Neighbour, Prediction

META_FILE = "qaid.json"
ROWS_FILE = "rows.jsonl"
MATCHES = ("qa", "qq+qa", "intent_doc")


def intent_name(label: str) -> str:
  """The answer text of an intent label (§2.2.2: the intent name): underscores become spaces."""
  return " ".join(label.replace("_", " ").split())


def read_intent_descriptions(path: str | pathlib.Path) -> dict[str, str]:
  """A user's answer texts: one ``label<TAB>description`` line per intent (blank lines skipped)."""
  out: dict[str, str] = {}
  for label, description, number in tsv.read_two_columns(path, ("label", "description")):
    if label in out:
      raise ValueError(f"{path}, line {number}: label {label!r} is described twice")
    out[label] = description.strip()
  return out


@functools.partial(jax.jit, static_argnames=("cfg", "dtype", "similarity", "pool"))
def represent_batch(params, projection, input_ids, attention_mask, *, cfg, dtype, similarity: str, pool: str):
  """One jitted forward + ``late_interaction.represent``: (vectors, mask) of a padded batch."""
  hidden = transformer.encoder_for(cfg, params, dtype).apply({"params": params}, input_ids, attention_mask)
  return late_interaction.represent(projection, hidden, attention_mask, similarity, pool)


# the same from token states computed elsewhere (``onnx_inference``)
represent_states = jax.jit(late_interaction.represent, static_argnames=("similarity", "pooling_mode"))
_scores = jax.jit(late_interaction.maxsim_scores, static_argnames=("chunk",))
_token_maxima = jax.jit(late_interaction.token_maxima, static_argnames=("chunk",))


class QAIDModel:
  """Prediction scores are Eq. (1)'s Score(q, a): the mean over query tokens of their best cosine with the row's
  tokens, in [-1, 1] (with ``similarity="cosine"``, the cosine of the two projected pooled vectors).
  ``rejection``: the calibrated out-of-scope threshold (``models.rejection.Rejection``), or None."""

  kind = "qaid"

  def __init__(self, cfg: transformer.EncoderConfig, params, tokenizer: Tokenizer, projection: dict, *,
               similarity: str = "late_interaction", pooling_mode: str = "mean", query_length: int = 32,
               answer_length: int = 32, match: str = "qa", batch_size: int = 32, dtype=jnp.float32,
               candidate_threshold: int = 4096, candidate_tokens: int = 64, score_chunk: int = 1024):
    if similarity not in late_interaction.SIMILARITIES:
      raise ValueError(f"similarity {similarity!r} unknown; choose one of {late_interaction.SIMILARITIES}")
    if match not in MATCHES:
      raise ValueError(f"match {match!r} unknown; choose one of {MATCHES}")
    for name, length in (("query_length", query_length), ("answer_length", answer_length)):
      if not 2 <= length <= cfg.max_length:
        raise ValueError(f"{name}={length} must be in [2, {cfg.max_length}] (the model's positions)")
    self.cfg, self.tokenizer = cfg, tokenizer
    self.params, self.projection = jax.device_put(params), jax.device_put(dict(projection))
    self.similarity, self.pooling_mode, self.match = similarity, pooling_mode, match
    self.query_length, self.answer_length = query_length, answer_length
    self.batch_size, self.dtype = batch_size, dtype
    self.candidate_threshold, self.candidate_tokens, self.score_chunk = (
        candidate_threshold, candidate_tokens, score_chunk)
    self.rows: list[dict] = []  # {"kind": "answer" | "query", "label": ..., "text": ...}
    self.row_vectors = np.zeros((0, 1, int(self.projection["kernel"].shape[1])), np.float32)
    self.row_mask = np.zeros((0, 1), np.int32)
    self._token_index: Index | None = None
    self._documents: tuple[np.ndarray, np.ndarray] | None = None  # intent_doc: built on first use
    self.rejection: rejection.Rejection | None = None
    self.onnx = None  # an ``onnx_inference.OnnxForward`` in place of XLA (``onnx_inference.use_onnxruntime``)

  # ---------------------------------------------------------------------------------------- encoding

  def represent(self, texts: Sequence[str], max_length: int, *, show_progress: bool = False
                ) -> tuple[np.ndarray, np.ndarray]:
    """(vectors [N, L, D_P], mask [N, L]) of ``texts`` truncated at ``max_length`` tokens, L = the longest."""
    token_ids = self.tokenizer.encode(texts, max_length)
    width = 1 if self.similarity == "cosine" else max((len(t) for t in token_ids), default=1)
    def matrices(batch, rows):
      if self.onnx is not None:
        return represent_states(self.projection, self.onnx(batch["input_ids"], batch["attention_mask"]),
                                batch["attention_mask"], similarity=self.similarity, pooling_mode=self.pooling_mode)
      return represent_batch(self.params, self.projection, batch["input_ids"], batch["attention_mask"],
                             cfg=self.cfg, dtype=self.dtype, similarity=self.similarity, pool=self.pooling_mode)
    out = (jax.ShapeDtypeStruct((width, self.row_vectors.shape[-1]), np.float32),
           jax.ShapeDtypeStruct((width,), np.int32))
    return inference.encode_bucketed(token_ids, matrices, pad_id=self.tokenizer.pad_id,
                                     buckets=batching.length_buckets(max_length, batching.INFERENCE_BUCKETS),
                                     batch_size=self.batch_size, out=out, show_progress=show_progress)

  # ------------------------------------------------------------------------------------------- rows

  def _add_rows(self, rows: list[dict], show_progress: bool = False) -> None:
    if not rows:
      return
    vectors, mask = self.represent([r["text"] for r in rows], self.answer_length, show_progress=show_progress)
    width = max(vectors.shape[1], self.row_vectors.shape[1])
    pad = lambda a, w: np.pad(a, [(0, 0), (0, w - a.shape[1])] + [(0, 0)] * (a.ndim - 2))  # noqa: E731
    self.row_vectors = np.concatenate([pad(self.row_vectors, width), pad(vectors, width)])
    self.row_mask = np.concatenate([pad(self.row_mask, width), pad(mask, width)])
    self.rows.extend(rows)
    self._token_index = None
    self._documents = None

  @property
  def labels(self) -> list[str]:
    """The intents that have an answer, in the order they were added."""
    return [r["label"] for r in self.rows if r["kind"] == "answer"]

  def add_answers(self, labels: Sequence[str], names: Sequence[str] | None = None, *,
                  show_progress: bool = False) -> None:
    """Indexes an answer per intent (``names``, default ``intent_name(label)``); a label that already has one
    is an error."""
    names = [intent_name(l) for l in labels] if names is None else list(names)
    if len(names) != len(labels):
      raise ValueError(f"{len(labels)} labels but {len(names)} names")
    known = set(self.labels)
    repeated = sorted({l for l in labels if l in known} | {l for l in labels if list(labels).count(l) > 1})
    if repeated:
      raise ValueError(f"intents already answered: {repeated[:5]}")
    self._add_rows([{"kind": "answer", "label": l, "text": n} for l, n in zip(labels, names)], show_progress)

  def add_examples(self, texts: Sequence[str], labels: Sequence[str], *, show_progress: bool = False) -> None:
    """Indexes labelled example queries (scored under ``match="qq+qa"``, and part of their intent's document under
    ``"intent_doc"``); an unseen label also gets its answer (its intent name), so new intents become predictable
    without retraining. Examples are checked as ``fit`` checks its own (``protocol.checked_examples``)."""
    texts, labels = protocol.checked_examples(texts, labels)
    new = list(dict.fromkeys(l for l in labels if l not in set(self.labels)))
    self.add_answers(new, show_progress=show_progress)
    self._add_rows([{"kind": "query", "label": l, "text": t} for t, l in zip(texts, labels)], show_progress)

  def __len__(self) -> int:
    return len(self.rows)

  # ---------------------------------------------------------------------------------------- scoring

  def _scored_rows(self, match: str) -> np.ndarray:
    """The rows that answer under ``match``: all (qq+qa), or the answers (qa; intent_doc: one per intent, whose
    document stands behind it)."""
    kinds = np.array([r["kind"] for r in self.rows])
    return np.arange(len(self.rows)) if match == "qq+qa" else np.flatnonzero(kinds == "answer")

  def intent_documents(self) -> tuple[np.ndarray, np.ndarray]:
    """(vectors [C, L, D], mask [C, L]): per intent in ``labels`` order, the token vectors of its name and of its
    example queries, concatenated (``match="intent_doc"``)."""
    if self._documents is None:
      column = {l: c for c, l in enumerate(self.labels)}
      tokens = [[] for _ in column]
      for row, vectors, mask in zip(self.rows, self.row_vectors, self.row_mask):
        tokens[column[row["label"]]].append(vectors[mask.astype(bool)])
      joined = [np.concatenate(t) for t in tokens]
      width = max((len(t) for t in joined), default=1)
      docs = np.zeros((len(joined), width, self.row_vectors.shape[-1]), np.float32)
      mask = np.zeros((len(joined), width), np.int32)
      for c, t in enumerate(joined):
        docs[c, : len(t)], mask[c, : len(t)] = t, 1
      self._documents = (docs, mask)
    return self._documents

  def _exact(self, z, m, rows):
    chunk = self.score_chunk if len(rows) > self.score_chunk else None
    return np.asarray(_scores(z, m, self.row_vectors[rows], self.row_mask[rows], chunk=chunk))

  def _approximate(self, z, m, rows):
    """Scores only the candidate rows that the query tokens' nearest answer tokens point at; -inf elsewhere."""
    if self._token_index is None:
      owner = np.repeat(np.arange(len(rows)), self.row_mask[rows].sum(axis=1))
      tokens = self.row_vectors[rows][self.row_mask[rows].astype(bool)]
      self._token_index = Index.build(tokens, [{"row": int(r)} for r in owner], metric="dot")
    out = np.full((len(z), len(rows)), -np.inf, np.float32)
    depth = min(self.candidate_tokens, len(self._token_index))
    for i in range(len(z)):
      query_tokens = z[i][m[i].astype(bool)]
      if not len(query_tokens):
        continue
      hits = self._token_index.query(query_tokens, depth)
      candidates = np.array(sorted({h.payload["row"] for token_hits in hits for h in token_hits}))
      # Candidate sets vary in size: score a power-of-two count (repeating candidates) so that only
      # log2(rows) programs compile, not one per size.
      padded = np.resize(candidates, 1 << (len(candidates) - 1).bit_length())
      out[i, candidates] = self._exact(z[i : i + 1], m[i : i + 1], rows[padded])[0][: len(candidates)]
    return out

  def row_scores(self, texts: Sequence[str], *, show_progress: bool = False, match: str | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(Score(q, row) [len(texts), R], the scored row ids [R]) under ``match`` (default: the model's): every
    scored row, or (above ``candidate_threshold`` rows) the approximate candidates with -inf for the rest; under
    ``intent_doc`` the score of each intent's document, reported on its answer row."""
    return self.match_row_scores(texts, (match or self.match,), show_progress=show_progress)[match or self.match]

  def match_row_scores(self, texts: Sequence[str], matches: Sequence[str] = MATCHES, *, show_progress: bool = False
                       ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``row_scores`` under each of ``matches``, the queries encoded once."""
    unknown = sorted(set(matches) - set(MATCHES))
    if unknown:
      raise ValueError(f"match {unknown[0]!r} unknown; choose one of {MATCHES}")
    if not self.labels:
      raise ValueError("the model has no intent names to retrieve; add_answers() first")
    z, m = self.represent(texts, self.query_length, show_progress=show_progress)
    out = {}
    for match in matches:
      rows = self._scored_rows(match)
      if match == "intent_doc":
        docs, docs_mask = self.intent_documents()
        score = lambda zq, mq, _: np.asarray(_scores(zq, mq, docs, docs_mask, chunk=self.document_chunk))  # noqa: E731
      else:
        score = self._approximate if len(rows) > self.candidate_threshold else self._exact
      pieces = [score(z[i : i + self.batch_size], m[i : i + self.batch_size], rows)
                for i in range(0, len(texts), self.batch_size)]
      out[match] = (np.concatenate(pieces) if pieces else np.zeros((0, len(rows)), np.float32), rows)
    return out

  @property
  def document_chunk(self) -> int | None:
    """Intent documents scored at a time: about ``score_chunk`` rows' worth of tokens."""
    docs, _ = self.intent_documents()
    per_row = max(int(self.row_vectors.shape[1]), 1)
    chunk = max(1, self.score_chunk * per_row // max(docs.shape[1], 1))
    return chunk if chunk < len(docs) else None

  def scores(self, texts: Sequence[str], *, show_progress: bool = False, match: str | None = None) -> np.ndarray:
    """[len(texts), len(labels)]: per intent, the Score of its best scored row (its name; under qq+qa also its
    example queries; under intent_doc its document); -inf where the approximate candidate stage left all of an
    intent's rows out. The argmax is ``predict``'s label. A blank text's row is NaN."""
    return protocol.score_texts(texts, lambda texts: self.label_scores(
        *self.row_scores(texts, show_progress=show_progress, match=match)), len(self.labels))

  def label_scores(self, scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Row scores ([N, R] over ``rows``) -> [N, len(labels)]: per intent, its best row's score."""
    column = {l: c for c, l in enumerate(self.labels)}
    out = np.full((len(self.labels), len(scores)), -np.inf, np.float32)
    np.maximum.at(out, [column[self.rows[r]["label"]] for r in rows], scores.T)
    return out.T

  def predict(self, texts: Sequence[str], *, neighbours: int = 3, show_progress: bool = False,
              reject: bool = False, threshold: float | None = None) -> list[Prediction]:
    """The best-scoring row's intent per text, with the ``neighbours`` best rows (intent names, and example
    queries under qq+qa; under intent_doc the intents' names with their documents' scores) and their
    late-interaction scores as the explanation. With ``reject`` (or a ``threshold``): ``out_of_scope`` where the
    score is below ``threshold`` (default: the calibrated ``rejection``). A blank text is answered
    ``protocol.EMPTY``."""
    cut = self._cut(reject, threshold)
    return protocol.predict_texts(texts, lambda texts: self._predict(texts, neighbours, show_progress, cut))

  def predict_with_scores(self, texts: Sequence[str], *, neighbours: int = 3, reject: bool = False,
                          threshold: float | None = None) -> tuple[list[Prediction], np.ndarray]:
    """``predict`` and ``scores`` of the same (non-blank) texts from one scoring pass: what the joint NLU model
    needs for an intent and its ranking."""
    cut = self._cut(reject, threshold)
    scores, rows = self.row_scores(protocol.text_list(texts))
    return self._from_rows(scores, rows, neighbours, cut), self.label_scores(scores, rows)

  def _cut(self, reject: bool, threshold: float | None) -> float | None:
    """The out-of-scope threshold a call asks for (``threshold``, else with ``reject`` the calibrated one)."""
    return (rejection.resolve_threshold(self.rejection, threshold, f"this {self.kind} model")
            if reject or threshold is not None else None)

  def _predict(self, texts: list[str], neighbours: int, show_progress: bool, cut: float | None) -> list[Prediction]:
    return self._from_rows(*self.row_scores(texts, show_progress=show_progress), neighbours, cut)

  def _from_rows(self, scores: np.ndarray, rows: np.ndarray, neighbours: int, cut: float | None) -> list[Prediction]:
    depth = min(max(neighbours, 1), len(rows))
    top = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
    out = []
    for i, best in enumerate(top):
      evidence = tuple(Neighbour(self.rows[rows[j]]["text"], self.rows[rows[j]]["label"], float(scores[i, j]))
                       for j in best if np.isfinite(scores[i, j]))
      out.append(Prediction(evidence[0].label, evidence[0].score, evidence[:neighbours]))
    return out if cut is None else rejection.apply(out, cut)

  def leave_one_out_scores(self, *, show_progress: bool = False) -> np.ndarray:
    """Per example query (``add_examples``' rows, in order), the score ``predict`` would give it as a new query
    under ``match`` with its own row left out (exact scoring, no candidate stage)."""
    examples = np.array([i for i, r in enumerate(self.rows) if r["kind"] == "query"], int)
    if not len(examples):
      raise ValueError("the model has no example queries to calibrate on; add_examples() first, or pass threshold=")
    z, m = self.represent([self.rows[i]["text"] for i in examples], self.query_length, show_progress=show_progress)
    column = {l: c for c, l in enumerate(self.labels)}
    row_label = np.array([column[r["label"]] for r in self.rows])
    members = [np.flatnonzero(row_label == c) for c in range(len(column))]
    scored = self._scored_rows(self.match)
    chunk = self.score_chunk if len(self.rows) > self.score_chunk else None
    out = []
    for start in range(0, len(examples), self.batch_size):
      own = examples[start : start + self.batch_size]
      zq, mq = z[start : start + self.batch_size], m[start : start + self.batch_size].astype(bool)
      best = np.array(_token_maxima(zq, self.row_vectors, self.row_mask, chunk=chunk))  # [B, R, m]
      best[np.arange(len(own)), own] = -np.inf  # leave each example's own row out
      if self.match == "intent_doc":  # a document's best token is the best over its rows' best tokens
        best = np.stack([best[:, rows].max(axis=1) for rows in members], axis=1)  # [B, C, m]
      mask = mq[:, None, :]
      means = np.where(mask, best, 0.0).sum(-1) / np.maximum(mask.sum(-1), 1)  # -inf: a left-out row
      out.append((means if self.match == "intent_doc" else means[:, scored]).max(axis=1))
    return np.concatenate(out).astype(np.float32)

  def calibrate_rejection(self, quantile: float = rejection.DEFAULT_QUANTILE, *, texts: Sequence[str] | None = None,
                          source: str = "held-out", show_progress: bool = False) -> rejection.Rejection:
    """Sets (and returns) ``rejection``: the ``quantile`` quantile of the Scores (Eq. 1) of ``texts``, held-out
    in-scope utterances (``source`` names them in the rule); without them, of ``leave_one_out_scores`` (see the
    module docstring for how far they are out of fold: the encoder was trained on those queries, so that
    threshold rejects more new in-scope utterances than its quantile). Costs one scoring pass."""
    if texts is not None:
      if not len(texts):
        raise ValueError(f"no {source} utterances to calibrate the out-of-scope threshold on")
      scores = np.array([p.score for p in self.predict(texts, neighbours=1, show_progress=show_progress)])
      self.rejection = rejection.calibrate(scores, quantile, rule=f"Score of {len(texts)} {source} in-scope "
                                                                  f"utterances, match={self.match}")
      return self.rejection
    scores = self.leave_one_out_scores(show_progress=show_progress)
    rule = {"qa": "Score of each example query against the intent names (not used at inference)",
            "qq+qa": "leave-one-out Score of each example query against the other rows",
            "intent_doc": "leave-one-out Score of each example query against the intent documents without it"}
    self.rejection = rejection.calibrate(scores, quantile, rule=f"{rule[self.match]}, match={self.match}")
    return self.rejection

  def sentence_vectors(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
    """[len(texts), D_P] unit vectors: the mean of each query's projected token vectors (its z), normalised (for
    plots of the space QAID scores in; Eq. 1 itself compares tokens)."""
    z, m = self.represent(texts, self.query_length, show_progress=show_progress)
    mean = (z * m[..., None]).sum(1) / np.maximum(m.sum(1, keepdims=True), 1)
    return mean / np.maximum(np.linalg.norm(mean, axis=-1, keepdims=True), 1e-12)

  # ---------------------------------------------------------------------------------------- storage

  def save(self, directory: str | pathlib.Path, *, encoder_heads: dict | None = None) -> pathlib.Path:
    directory = pathlib.Path(directory)
    pretrained.save_pretrained(directory, self.cfg, self.params, self.tokenizer, encoder_heads)
    projection_head.save(directory, self.projection, file=late_interaction.PROJECTION_FILE, activation="none")
    self.save_rows(directory)
    meta = {"kind": self.kind, "similarity": self.similarity, "pooling": self.pooling_mode,
            "query_length": self.query_length, "answer_length": self.answer_length, "match": self.match,
            "rejection": self.rejection.to_dict() if self.rejection else None}
    protocol.write_meta(directory, META_FILE, meta)
    model_card.write(directory)
    return directory

  def save_rows(self, directory: str | pathlib.Path) -> None:
    """Writes the answers and example queries (their text; vectors are recomputed on load)."""
    protocol.write_jsonl(pathlib.Path(directory) / ROWS_FILE, self.rows)

  @classmethod
  def load(cls, directory: str | pathlib.Path, *, show_progress: bool = False, **kwargs) -> "QAIDModel":
    directory = pathlib.Path(directory)
    meta = protocol.read_meta(directory, META_FILE, "the export/ folder of a QAID run")
    projection = projection_head.load(directory, file=late_interaction.PROJECTION_FILE)
    if projection is None:
      raise FileNotFoundError(f"{directory}: no {late_interaction.PROJECTION_FILE}")
    model = pretrained.load_pretrained(str(directory))
    kwargs = {**{"match": meta["match"]}, **kwargs}
    qaid = cls(model.config, model.params, model.tokenizer, projection, similarity=meta["similarity"],
               pooling_mode=meta["pooling"], query_length=meta["query_length"],
               answer_length=meta["answer_length"], **kwargs)
    rows = protocol.read_jsonl(directory / ROWS_FILE)
    qaid._add_rows(rows, show_progress)
    qaid.rejection = rejection.Rejection.from_dict(meta.get("rejection"))  # None in older exports
    return qaid
