"""The Python API: ``fit`` trains a method on your labelled examples and returns the trained model; ``load``
reads any export.

    import fewshot_nlu as fn
    model = fn.fit(texts, labels, method="convfit")      # or a DataFrame, or a .csv / .jsonl path
    model.predict(["i lost my card"])                     # labels with scores and evidence
    model.save("my_model"); model = fn.load("my_model")

``fit`` takes the same road as ``python -m fewshot_nlu.main``; nothing here trains. It checks the examples
(``data.user_examples``: a bad row is a ``ValueError`` naming it), writes them as ``intent_table`` JSON lines
(``train.jsonl``, and ``valid.jsonl`` for ``validation``) into a folder named by their content under
``$FEWSHOT_NLU_CACHE/fit_data`` (default ``~/.cache/fewshot_nlu``), builds the method's shipped default config
(``fewshot_nlu.defaults``, the one ``configs/*.py`` wrap) with ``data.builder = "intent_table"`` pointing there,
applies the overrides, and calls ``runner.run`` — the function ``main`` calls: the same config checks (a field
the method ignores is refused), the same workdir lock and claim (rerunning the same fit in the same workdir
resumes it; another config or other examples there is refused unless ``overwrite=True``), the same method code,
the training loop's progress bar, and the export that ``models.load`` then reads.

Methods (``method=``): ``convfit``, ``qaid``, ``multi_convfit`` (multi-label; the default when labels are label
sets), ``retriever_intents`` (``retriever.stage = "all"``) and ``baseline`` (``config.method = "intent_mneg"``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import shutil
import tempfile
from typing import Any, Iterator, Sequence

import ml_collections

from fewshot_nlu import console, workdirs
from fewshot_nlu.config_checks import ConfigError, python_spelling
from fewshot_nlu.data import user_examples
from fewshot_nlu.errors import DataError, MissingDataFile, UserError
from fewshot_nlu.methods import fit_methods

# fit's method names -> config.method (the method record: methods.METHODS)
METHODS = fit_methods()
MULTI_LABEL_METHODS = ("multi_convfit",)
# set by fit from the examples it is given; an override of one is refused
DATA_FIELDS = ("data.builder", "data.builder_config", "data.raw_dir", "data.dir", "data.tfds_dir",
               "data.train_split", "data.eval_split", "eval.calibration_split")


def cache_dir() -> pathlib.Path:
  """Where ``fit`` writes the examples it trains on (``$FEWSHOT_NLU_CACHE/fit_data``)."""
  return workdirs.cache_root() / "fit_data"


def default_config(method: str, train: user_examples.Examples) -> ml_collections.ConfigDict:
  """The shipped default config of ``method`` (a ``fit`` name) for these training examples (the method record's
  ``fit_defaults``, ``methods.METHODS``)."""
  from fewshot_nlu import methods
  config = methods.fit_defaults(METHODS[method])(train)
  config.method = METHODS[method]
  return config


def flatten_overrides(overrides: dict, prefix: str = "") -> Iterator[tuple[str, Any]]:
  """``{"train": {"epochs": 3}, "model.name": "x"}`` -> ``("train.epochs", 3), ("model.name", "x")``."""
  for key, value in overrides.items():
    path = f"{prefix}{key}"
    if isinstance(value, (dict, ml_collections.ConfigDict)):
      yield from flatten_overrides(dict(value), path + ".")
    else:
      yield path, value


def apply_overrides(config: ml_collections.ConfigDict, overrides: dict, method: str) -> None:
  """Sets config fields from ``overrides`` (dotted names, or sections as dicts); an unknown field, a field
  ``fit`` sets from the data, or a value of the wrong type is a ``ConfigError`` naming the field."""
  for path, value in flatten_overrides(overrides):
    if path in DATA_FIELDS:
      raise ConfigError(f"config.{path}: set by fit from the examples it is given; pass your data to fit instead")
    *sections, name = path.split(".")
    node = config
    for part in sections:
      node = node[part] if part in node and isinstance(node[part], ml_collections.ConfigDict) else None
      if node is None:
        break
    if node is None or name not in node:
      raise ConfigError(f"config.{path}: method {method!r} has no such field (its sections: "
                        f"{sorted(config.keys())})")
    if isinstance(node[name], ml_collections.ConfigDict):
      raise ConfigError(f"config.{path}: a section; set its fields, e.g. {path}={{...}} or \"{path}.<field>\"")
    try:
      node[name] = value
    except TypeError:
      raise ConfigError(f"config.{path}: {value!r} ({type(value).__name__}) does not fit the field's type "
                        f"({type(node[name]).__name__}, now {node[name]!r})") from None


def fit(examples: Any, labels: Sequence | None = None, *, method: str | None = None, validation: Any = None,
        text_column: str = "text", label_column: str | None = None, workdir: str | os.PathLike | None = None,
        overwrite: bool = False, keep_checkpoints: bool = False, **overrides):
  """Trains ``method`` on labelled examples and returns the exported model (a ``models.protocol.Model``:
  ``predict``, ``scores``, ``add_examples``, ``save``).

  Args:
    examples: the training examples: a list of texts (with ``labels``), a pandas DataFrame, or a path to a
      ``.csv`` / ``.jsonl`` file (``text`` and ``label``, or ``labels`` for label sets).
    labels: with a list of texts, one label per text: a string, or a list of strings (multi-label).
    method: ``convfit`` | ``qaid`` | ``multi_convfit`` | ``retriever_intents`` | ``baseline``; default
      ``multi_convfit`` for label sets, else ``convfit``.
    validation: held-out examples in any form ``examples`` takes (a list of texts goes as ``(texts, labels)``);
      the run's evaluation (``model.results``) scores them, and ConvFiT calibrates its out-of-scope threshold
      on their texts (``eval.calibration_split``); its decision rule is not chosen on them (they are what the
      run scores): logistic regression, or ``classifier={"kind": "prototype"}``. Without it the run scores the training
      examples themselves: a sanity check, not an estimate.
    text_column, label_column: a DataFrame's columns (default ``text``, and ``label`` or ``labels``).
    workdir: where the run writes (checkpoints, metrics, ``results.json``, ``predictions.tsv``, ``export/``);
      default a new temporary folder (``model.workdir``). Rerunning the same fit there resumes an interrupted
      run; another config or other examples there are refused unless ``overwrite=True`` (which deletes that run
      first). A run that fails before its first checkpoint leaves the workdir free for the next one.
    keep_checkpoints: keep ``<workdir>/checkpoints`` once the export is written (by default they are deleted:
      hundreds of MB that only resuming an interrupted run needs; the export is the model).
    **overrides: config fields, as sections given as dicts (``train={"epochs": 3}``) or dotted names
      (``**{"train.epochs": 3}``); checked as ``main`` checks ``--config.<field>=...``.

  Returns:
    The model, loaded from ``<workdir>/export`` by ``fewshot_nlu.models.load``, with two attributes added:
    ``workdir`` (a ``pathlib.Path``) and ``results`` (the run's ``results.json``).

  Raises:
    ValueError: bad examples (``DataError``, naming the row, or the file and line), or a bad override
      (``ConfigError``, naming the field as a keyword argument: ``train={"batch_size": ...}``).
  """
  with _python_spelling():  # what the run logs and raises, in this caller's spelling: keyword arguments
    return _fit(examples, labels, method=method, validation=validation, text_column=text_column,
                label_column=label_column, workdir=workdir, overwrite=overwrite, keep_checkpoints=keep_checkpoints,
                overrides=overrides)


@contextlib.contextmanager
def _python_spelling():
  """Within the block, the package's log records and user errors name config fields as ``fit``'s keyword
  arguments, not as command-line flags (``config_checks.python_spelling``)."""
  factory = logging.getLogRecordFactory()

  def respelled(*args, **kwargs):
    record = factory(*args, **kwargs)
    if record.name.startswith("fewshot_nlu"):
      record.msg, record.args = python_spelling(record.getMessage()), ()
    return record

  logging.setLogRecordFactory(respelled)
  try:
    yield
  except UserError as e:
    e.args = (python_spelling(str(e)),)
    raise
  finally:
    logging.setLogRecordFactory(factory)


def _fit(examples, labels, *, method, validation, text_column, label_column, workdir, overwrite, keep_checkpoints,
         overrides):
  from fewshot_nlu.methods import runner
  if method is not None and method not in METHODS:
    raise ConfigError(f"method: {method!r} is not one of {sorted(METHODS)}")
  if method == "nlu" or (method is None and labels is None and is_annotated(examples)):
    if labels is not None:
      raise DataError("examples: method='nlu' takes annotated examples (a Rasa nlu.yml, a .jsonl / .csv with text, "
                      "intent and entities, a seq.in folder, or a list of {text, intent, entities} dicts), not labels")
    return _fit_nlu(examples, validation, workdir=workdir, overwrite=overwrite, keep_checkpoints=keep_checkpoints,
                    overrides=overrides)
  train = user_examples.read(examples, labels, text_column=text_column, label_column=label_column)
  method = method or ("multi_convfit" if train.multi_label else "convfit")
  if train.multi_label and method not in MULTI_LABEL_METHODS:
    raise DataError(f"examples: the labels are label sets (multi-label), but method {method!r} is single-label; use "
                    "method='multi_convfit' (or give one string label per example)")
  tables = {"train": train}
  if validation is not None:
    held_out = (user_examples.read(*validation, what="validation") if isinstance(validation, tuple) else
                user_examples.read(validation, text_column=text_column, label_column=label_column,
                                   what="validation"))
    if held_out.multi_label != train.multi_label:
      kinds = {True: "label sets", False: "single labels"}
      raise DataError(f"validation: {kinds[held_out.multi_label]}, but the training examples have "
                      f"{kinds[train.multi_label]}; give both the same kind")
    tables["valid"] = held_out
  config = default_config(method, train)
  apply_overrides(config, overrides, method)
  folder = user_examples.write_table(tables, cache_dir())
  config.data.builder, config.data.raw_dir = "intent_table", str(folder)
  config.data.tfds_dir = str(cache_dir() / "tfds")
  config.data.train_split, config.data.eval_split = "train", "valid" if "valid" in tables else "train"
  if "calibration_split" in config.eval:  # ConvFiT: held-out in-scope examples calibrate out-of-scope rejection
    config.eval.calibration_split = "valid" if "valid" in tables else ""
  workdir = pathlib.Path(workdir).expanduser() if workdir is not None else pathlib.Path(
      tempfile.mkdtemp(prefix=f"fewshot_nlu_{method}_"))
  explicit = [path for path, _ in flatten_overrides(overrides)]
  results = runner.run(config, workdir, overwrite=overwrite, explicit=explicit)
  return _trained_model(workdir, results, keep_checkpoints, checkpoints=("checkpoints",))


def is_annotated(examples: Any) -> bool:
  """Whether ``fit``'s examples are annotated ones (for the joint ``nlu`` method): a Rasa ``.yml``, a
  ``seq.in`` folder, or a list of dicts."""
  if isinstance(examples, (str, os.PathLike)):
    path = pathlib.Path(examples).expanduser()
    return path.suffix in (".yml", ".yaml") or path.is_dir()
  return isinstance(examples, (list, tuple)) and bool(examples) and all(isinstance(e, dict) for e in examples)


def _fit_nlu(examples, validation, *, workdir, overwrite, keep_checkpoints, overrides):
  """``fit`` for ``method="nlu"``: the annotated examples (``data.annotated``, checked here; a file or folder is read
  in place, examples in memory are written as JSON lines into a folder named by their content under
  ``cache_dir()``), the joint config (``defaults.nlu``, with ``intent_method=`` choosing the intent method),
  ``runner.run``."""
  from fewshot_nlu.methods import runner
  from fewshot_nlu.data import annotated
  from fewshot_nlu.defaults import nlu
  config = nlu.get_config(overrides.pop("intent_method", "convfit"))
  apply_overrides(config, overrides, "nlu")
  for field, given in (("train", examples), ("eval", validation)):
    if given is None:
      continue
    checked = annotated.read(given)  # a bad example fails here, naming it
    if isinstance(given, (str, os.PathLike)):  # a file or folder of the user's: read in place
      config.data[field] = str(pathlib.Path(given).expanduser().resolve())
    else:  # examples in memory: written as JSON lines into a folder named by their content
      config.data[field] = str(annotated.write_tables({"examples.jsonl": checked}, cache_dir()) / "examples.jsonl")
  workdir = pathlib.Path(workdir).expanduser() if workdir is not None else pathlib.Path(
      tempfile.mkdtemp(prefix="fewshot_nlu_nlu_"))
  explicit = [path for path, _ in flatten_overrides(overrides)]
  results = runner.run(config, workdir, overwrite=overwrite, explicit=explicit)
  return _trained_model(workdir, results, keep_checkpoints, checkpoints=("checkpoints", "intents/checkpoints"))


def _trained_model(workdir: pathlib.Path, results: dict, keep_checkpoints: bool, checkpoints: Sequence[str]):
  """What ``fit`` returns: the run's export, loaded, with ``workdir`` and ``results``; the run's ``checkpoints``
  folders deleted unless kept; one line on the terminal saying where the model, results and report are."""
  from fewshot_nlu import models
  model = models.load(workdir / "export")
  if not keep_checkpoints:
    for folder in checkpoints:
      shutil.rmtree(workdir / folder, ignore_errors=True)
  model.workdir, model.results = workdir, results
  console.say_where(workdir, export=True)
  return model


def load(path: str | os.PathLike, *, quantize: str | None = None, runtime: str | None = None):
  """The model exported in ``path`` (an ``export/`` folder, a folder written by ``model.save``, or a run's
  workdir holding ``export/``), as its own class (``fewshot_nlu.models.load``). ``quantize="int8"`` runs its
  encoders' dense layers as int8 products (``encoders.quantize``): faster on a CPU at batch 1, predictions close
  to but not the same as float32's (bench/results/latency_notes.md); such a model predicts and takes examples,
  and is not saved again. ``runtime="onnxruntime"`` runs its sentence encoders through ONNX Runtime
  (``encoders.onnx_inference``, ``pip install "fewshot_nlu[onnxruntime]"``): the same predictions to float32
  rounding, 0.65-0.7x XLA's time for one utterance on a CPU (bench/results/latency.md); an encoder pooling
  by the maximum stays on XLA (one log line says so)."""
  from fewshot_nlu import models
  path = pathlib.Path(path).expanduser()
  if path.is_file():
    hint = (f"; to train on its examples: fn.fit({str(path)!r})" if path.suffix in (".csv", ".jsonl") else "")
    raise DataError(f"{path}: a file; fn.load reads a model folder (an export/, a folder written by model.save, or "
                    f"a run's workdir){hint}")
  if not path.exists():
    raise MissingDataFile(f"{path}: no such folder; fn.load reads a model folder (an export/, a folder written by "
                    "model.save, or a run's workdir)")
  has_model = any((path / kind.meta_file).is_file() for kind in models.KINDS.values())
  if not has_model and (path / "export").is_dir():
    path = path / "export"
  return models.load(path, quantize=quantize, runtime=runtime)
