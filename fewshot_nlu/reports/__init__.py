"""Intent reports: what every intent run writes beside its ``predictions.tsv``, and the same from Python.

  * ``report.md``: per-intent precision / recall / F1 and support, micro / macro / weighted averages, the most
    frequent confusions with an example utterance each (``reports.metrics``, ``reports.markdown``);
  * ``confusion.png``: the confusion matrix of the intents most involved in errors (``plots.confusion_png``);
  * ``embeddings.png`` (when embeddings are given): a 2-D PCA of the evaluation utterances' embeddings coloured by
    intent, one panel per encoder (the untouched encoder beside the specialised one), each titled with its cosine
    silhouette (``plots.embeddings_png``).

    from fewshot_nlu import reports
    reports.write_report("out/", gold_labels, predicted_labels, texts=texts,
                         embeddings={"untouched": before_vectors, "specialised": after_vectors})

Labels are strings (one intent per utterance) or label sets (multi-label; ``metrics.multi_label``). Plots are
drawn headless (matplotlib's Agg). Files are replaced atomically (written aside, then renamed).
"""

from __future__ import annotations

import logging
import os
import pathlib
import time
from typing import Callable, Sequence

import numpy as np

from fewshot_nlu.reports import markdown, metrics, plots
from fewshot_nlu.reports.metrics import Report, build  # noqa: F401

log = logging.getLogger(__name__)

UNTOUCHED, SPECIALISED = "untouched encoder", "specialised encoder"  # the embedding plot's panels in a run
Vectors = np.ndarray | Callable[[], np.ndarray]  # or a function computing them (called only where written)


def _write(path, data: bytes) -> None:
  if isinstance(path, pathlib.Path):
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
  else:  # a remote (gs://) path: an object write is atomic already
    path.write_bytes(data)


def _embedding_label(gold) -> str | None:
  """An utterance's colour in the embedding plot: its intent; a label set's only intent (None for several/none)."""
  if isinstance(gold, str):
    return gold
  return next(iter(gold)) if len(gold) == 1 else None


def write_report(directory, gold: Sequence, predicted: Sequence, *, texts: Sequence[str] | None = None,
                 title: str = "Intent report", embeddings: dict[str, Vectors] | None = None, suffix: str = "",
                 top: int = 30) -> dict:
  """Writes ``report{suffix}.md``, ``confusion{suffix}.png`` (the ``top`` most confused intents) and, with
  ``embeddings`` (panel name -> [len(gold), d] vectors of the same utterances, or a function returning them),
  ``embeddings{suffix}.png`` into ``directory``; returns ``{"accuracy", "macro_f1", "silhouette": {panel: s},
  "seconds"}`` (seconds: the whole cost, embeddings computed for it included; also the report's last line)."""
  start = time.perf_counter()
  directory = pathlib.Path(directory) if isinstance(directory, (str, os.PathLike)) else directory
  report = metrics.build(gold, predicted, texts)
  files = {f"confusion{suffix}.png": f"confusion matrix of the {min(top, len(report.axis))} intents most involved "
                                     "in errors"}
  silhouettes = None
  if embeddings:
    panels = {name: np.asarray(v() if callable(v) else v) for name, v in embeddings.items()}
    for name, vectors in panels.items():
      if len(vectors) != len(gold):
        raise ValueError(f"embeddings {name!r}: {len(vectors)} vectors for {len(gold)} utterances")
    png, silhouettes = plots.embeddings_png(panels, [_embedding_label(g) for g in gold], title=title)
    _write(directory / f"embeddings{suffix}.png", png)
    files[f"embeddings{suffix}.png"] = "2-D PCA of the utterance embeddings by intent: " + " vs ".join(panels)
  _write(directory / f"confusion{suffix}.png", plots.confusion_png(report, top=top, title=title))
  seconds = time.perf_counter() - start
  text = markdown.render(report, title=title, files=files, silhouettes=silhouettes)
  _write(directory / f"report{suffix}.md", (text + f"\nThis report took {seconds:.1f} s to write (embeddings "
                                            "computed for it included).\n").encode("utf-8"))
  log.info("wrote %s in %.1f s", directory / f"report{suffix}.md", seconds)
  return {"accuracy": report.accuracy, "macro_f1": report.averages["macro"]["f1"],
          "silhouette": {k: round(v, 4) if np.isfinite(v) else None for k, v in (silhouettes or {}).items()},
          "seconds": round(seconds, 2)}  # silhouette None: undefined (one intent, or none with 2+ utterances)


def write_run_report(workdir, gold: Sequence, predicted: Sequence, *, texts: Sequence[str] | None = None,
                     title: str, embeddings: dict[str, Vectors] | None = None, suffix: str = "") -> dict:
  """``write_report`` into a run's workdir on process 0 (others write nothing); returns the fields a run adds to
  its results: ``macro_f1`` and ``silhouette`` (the cost is logged and written in the report, not in the
  results, which stay equal when a finished run is resumed)."""
  import jax
  if jax.process_index() != 0:
    return {}
  summary = write_report(workdir, gold, predicted, texts=texts, title=title, embeddings=embeddings, suffix=suffix)
  return {"macro_f1": round(summary["macro_f1"], 6), "silhouette": summary["silhouette"]}
