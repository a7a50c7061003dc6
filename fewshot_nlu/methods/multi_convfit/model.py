"""``MultiLabelModel``: a (task-specialised) sentence encoder + the multi-label MLP + decision thresholds
(Multi-ConvFiT §2.2). Predicts a set of intents per utterance, with every intent's probability.

Saving keeps what makes the model its own: with a C-ADAPT encoder only the adapter is written (``adapter/``,
a few MB) plus the base model's name; ``load(directory, base=encoder)`` puts it on a base encoder already in
memory, so one base serves several task models in one process (``base.with_adapter`` shares its weights).
A fully fine-tuned (C-FFT) or untouched encoder is written in full (Hugging Face layout). The metadata is
``multilabel_model.json`` (kind ``multi_label``). A ``models.protocol.Model`` whose predictions are label sets
(``LabelSetPrediction``); it cannot add examples without retraining (``add_examples`` says why).
"""

from __future__ import annotations

import pathlib
from typing import Sequence

import numpy as np

from fewshot_nlu import model_card
from fewshot_nlu.encoders import adapters
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.heads import mlp as mlp_head
from fewshot_nlu.methods.multi_convfit import labels as multilabel
from fewshot_nlu.models import protocol
from fewshot_nlu.models.protocol import LabelSetPrediction

META_FILE = "multilabel_model.json"
ADAPTER_DIR = "adapter"


class MultiLabelModel:
  """Scores are the MLP's per-intent sigmoid probabilities, in [0, 1] and independent (rows need not sum to 1);
  an intent is predicted at or above its threshold. ``base_name``: the base model an adapter was trained on."""

  kind = "multi_label"

  def __init__(self, encoder: SentenceEncoder, mlp: list[dict], labels: Sequence[str],
               thresholds: float | Sequence[float] = 0.3, *, base_name: str | None = None):
    self.encoder, self.mlp, self.labels, self.base_name = encoder, mlp, list(labels), base_name
    thresholds = np.asarray(thresholds, np.float32)
    if thresholds.ndim and thresholds.shape != (len(self.labels),):
      raise ValueError(f"{thresholds.shape[0]} thresholds for {len(self.labels)} intents")
    out = int(np.asarray(mlp[-1]["bias"]).shape[0])
    if out != len(self.labels):
      raise ValueError(f"the MLP has {out} outputs for {len(self.labels)} intents")
    self.thresholds = thresholds

  def probabilities(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
    return self.probabilities_of(self.encoder.encode(texts, show_progress=show_progress))

  def probabilities_of(self, features: np.ndarray) -> np.ndarray:
    """[N, C] sigmoid outputs for encodings already computed with ``self.encoder``."""
    return mlp_head.predict_proba(self.mlp, features, multilabel=True)

  def scores(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
    """[len(texts), len(labels)] sigmoid probabilities (``probabilities``); a blank text's row is NaN."""
    return protocol.score_texts(texts, lambda texts: np.asarray(self.probabilities(texts, show_progress=show_progress),
                                                                np.float32), len(self.labels))

  def predict(self, texts: Sequence[str], *, neighbours: int | None = None, show_progress: bool = False
              ) -> list[LabelSetPrediction]:
    """The intent set of each text, with the ``neighbours`` most likely intents' probabilities (default:
    every intent's) as the evidence; a blank text is answered ``protocol.EMPTY``."""
    return protocol.predict_texts(texts, lambda texts: self.predict_from(
        self.probabilities(texts, show_progress=show_progress), neighbours=neighbours))

  def predict_from(self, probabilities: np.ndarray, *, neighbours: int | None = None) -> list[LabelSetPrediction]:
    chosen = multilabel.decide(probabilities, self.thresholds, self.labels)
    out = []
    for labels, row in zip(chosen, probabilities):
      ranked = np.argsort(-row, kind="stable")[:neighbours]
      out.append(LabelSetPrediction(labels, {self.labels[c]: float(row[c]) for c in ranked}))
    return out

  def add_examples(self, texts: Sequence[str], labels: Sequence) -> None:
    """Not possible: the MLP and its thresholds were fitted to the training set, which the export does not
    keep, and a labelled example changes them only by retraining (run the method again with the examples
    in its training data)."""
    raise NotImplementedError("a Multi-ConvFiT model cannot take new examples without retraining: its MLP "
                              "classifier and thresholds were fitted to the training set (not kept in the "
                              "export); add the examples to the training data and run multi_convfit again")

  def save_rows(self, directory: str | pathlib.Path) -> None:
    """Nothing to write: the model keeps no examples (see ``add_examples``)."""
    raise NotImplementedError("a Multi-ConvFiT model keeps no examples to save; use save()")

  # ------------------------------------------------------------------------------------------- storage

  def save(self, directory: str | pathlib.Path, *, base_name: str | None = None, base_params=None,
           encoder_heads: dict | None = None) -> pathlib.Path:
    """Writes the model to ``directory``. With adapters in the encoder, only the adapter is saved (against
    ``base_params``, the base weights it was trained on, default: the encoder's own non-adapter weights) and
    ``base_name`` (default: ``self.base_name``) is recorded to find the base again; otherwise the whole encoder
    is saved."""
    directory = pathlib.Path(directory)
    base_name = base_name or self.base_name
    directory.mkdir(parents=True, exist_ok=True)
    enc = self.encoder
    base, adapter = adapters.split(enc.params)
    if adapter:
      if not base_name:
        raise ValueError("an adapter model needs base_name, the base model to load the adapter on")
      adapters.save(directory / ADAPTER_DIR, adapter, enc.cfg, base if base_params is None else base_params,
                    base_name)
    else:
      enc.save(directory, heads=encoder_heads)
    mlp_head.save(directory, self.mlp)
    meta = {"kind": self.kind, "labels": self.labels, "thresholds": self.thresholds.tolist(),
            "encoder": "adapter" if adapter else "full", "base_model": base_name if adapter else None,
            "pooling": enc.pooling_mode, "max_length": enc.max_length}
    protocol.write_meta(directory, META_FILE, meta)
    model_card.write(directory)
    return directory

  @classmethod
  def load(cls, directory: str | pathlib.Path, *, base: SentenceEncoder | None = None,
           **encoder_kwargs) -> "MultiLabelModel":
    """Loads a saved model. An adapter model goes on ``base`` when given (no copy of the base weights; the
    adapter's base fingerprint is checked), else on its recorded base model, loaded here."""
    directory = pathlib.Path(directory)
    meta = protocol.read_meta(directory, META_FILE, "the export/ folder of a Multi-ConvFiT run")
    kwargs = {"pooling_mode": meta["pooling"], "max_length": meta["max_length"], **encoder_kwargs}
    if meta["encoder"] == "adapter":
      base = base or SentenceEncoder.from_pretrained(meta["base_model"], **kwargs)
      base_params = adapters.split(base.params)[0]
      adapter, _ = adapters.load(directory / ADAPTER_DIR, base.cfg, base_params)
      encoder = base.with_adapter(adapter)
    else:
      if base is not None:
        raise ValueError(f"{directory}: a fully fine-tuned model carries its own encoder; do not pass base=")
      encoder = SentenceEncoder.from_pretrained(str(directory), **kwargs)
    mlp = mlp_head.load(directory)
    if mlp is None:
      raise FileNotFoundError(f"{directory}: missing {mlp_head.FILE}")
    return cls(encoder, mlp, meta["labels"], meta["thresholds"], base_name=meta["base_model"])


def adapter_bytes(encoder: SentenceEncoder) -> int:
  """Bytes of the encoder's adapter weights (0 without adapters)."""
  return adapters.num_bytes(adapters.split(encoder.params)[1])
