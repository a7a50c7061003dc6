"""What a run shows a person on the terminal: progress bars only for work that lasts (``bar``: shown after
``BAR_DELAY_S``, on process 0), and third-party chatter kept back unless ``verbose`` (TFDS's "Downloading and
preparing dataset" lines and shuffling bars when it prepares a few user rows: ``quiet``; JAX's backend probing
lines: ``quiet_backend_logs``). ``--verbose`` (``main``, ``serve``) or ``FEWSHOT_NLU_VERBOSE=1`` shows them all."""

from __future__ import annotations

import contextlib
import io
import logging
import os
from typing import Iterator

import tqdm

BAR_DELAY_S = 3.0  # a bar appears only once its work has taken this long
_verbose = os.environ.get("FEWSHOT_NLU_VERBOSE", "") not in ("", "0")


def set_verbose(on: bool) -> None:
  global _verbose
  _verbose = bool(on)


def verbose() -> bool:
  return _verbose


def bar(iterable=None, **kwargs) -> tqdm.tqdm:
  """A tqdm progress bar that shows up only after ``BAR_DELAY_S`` seconds of work, on JAX process 0 (``disable``
  in ``kwargs`` still turns it off)."""
  if kwargs.get("disable") and iterable is not None:
    return iterable  # nothing to show: a single utterance's predict should not pay for building a bar
  import jax
  kwargs["disable"] = kwargs.get("disable", False) or jax.process_index() != 0
  return tqdm.tqdm(iterable, delay=0.0 if _verbose else BAR_DELAY_S, **kwargs)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
  """Within the block, what third-party code prints to stdout, its tqdm bars and absl's warnings are kept back
  (TFDS preparing a dataset), unless ``verbose``. Errors still reach the logs."""
  if _verbose:
    yield
    return
  from tensorflow_datasets.core.utils import tqdm_utils
  active = tqdm_utils._active  # noqa: SLF001  (TFDS keeps its switch there; restored below)
  absl = logging.getLogger("absl")  # TFDS's notes on folders it is about to write ("Variant folder ...")
  level = absl.level
  tqdm_utils.disable_progress_bar()
  absl.setLevel(logging.ERROR)
  try:
    with contextlib.redirect_stdout(io.StringIO()):
      yield
  finally:
    absl.setLevel(level)
    if active:
      tqdm_utils.enable_progress_bar()


def quiet_backend_logs() -> None:
  """JAX's lines about backends it probes and does not find (e.g. libtpu on a CPU machine) go to the logs only
  with ``verbose``."""
  if not _verbose:
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.ERROR)


def where_line(workdir: str | os.PathLike, export: bool = False) -> str:
  """The one line a finished run leaves on the terminal: where its results (and its report, and for ``fit`` its
  model) are."""
  workdir = str(workdir).rstrip("/")
  model = f"the model: {workdir}/export; " if export else ""
  report = f"; the report: {workdir}/report.md" if os.path.exists(f"{workdir}/report.md") else ""
  return f"{model}all results: {workdir}/results.json{report}"


def say_where(workdir: str | os.PathLike, export: bool = False) -> None:
  """Prints ``where_line`` to standard error, on JAX process 0."""
  import sys
  import jax
  if jax.process_index() == 0:
    print(where_line(workdir, export), file=sys.stderr)
