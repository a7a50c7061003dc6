"""Command-line entry point.

  python -m fewshot_nlu.main --config=configs/default.py --workdir=runs/default [--config.field=value ...]

Everything the run writes goes under ``--workdir``: the resolved config, checkpoints (resumed automatically),
metrics (JSONL + TensorBoard), the exported model and a results file. A local workdir is locked for the run's
life (``workdirs.lock``).

A workdir belongs to one config (``workdirs.claim``): rerunning the same command resumes; a rerun with fields
that change the model is refused, naming them, unless ``--overwrite`` (which deletes the old run first).

``--config.model.pooling=auto`` pools as the model declares it (a sentence-transformers directory's
``1_Pooling/config.json``; mean for a plain checkpoint); the resolved value is what the run records. With an
explicit pooling that differs from the declared one, the run warns. Every export the run leaves gets a model
card (``README.md``, ``model_card.write_run_cards``) with the run's results and this command.

A user error exits with status 2 and one line ``error: <where>: <what>`` (``errors.one_line``; ``--verbose``
adds the traceback): a config field (before anything is compiled or written), a data file (file, line, field),
a model name, a workdir another run holds or that holds another config's run, a training run whose loss,
gradients or parameters stopped being finite (``loop.TrainingDiverged``; nothing is exported), no checkpoint
that restores, a full disk. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import shlex
import sys

from absl import app, flags
from ml_collections import config_flags

config_flags.DEFINE_config_file("config", None, "Path to a config file (configs/*.py).", lock_config=True)
flags.DEFINE_string("workdir", None, "Directory for checkpoints, metrics, exported model and results.")
flags.DEFINE_bool("overwrite", False, "Delete the run in --workdir and start afresh when its config differs "
                  "(without it, such a rerun is refused, naming the fields that differ).")
flags.DEFINE_bool("verbose", False, "Show the traceback of a user error (config, data, workdir) too.")
flags.mark_flags_as_required(["config", "workdir"])
FLAGS = flags.FLAGS


def setup_jax(config) -> None:
  """Process-level JAX settings from the config; must run before the first computation."""
  import jax
  if config.get("compilation_cache_dir"):
    jax.config.update("jax_compilation_cache_dir", os.path.expanduser(config.compilation_cache_dir))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
  if config.distributed.enabled:
    from fewshot_nlu import sharding
    sharding.initialize_distributed(config.distributed.coordinator_address or None,
                                    config.distributed.num_processes or None,
                                    config.distributed.process_id if config.distributed.process_id >= 0
                                    else None)


def resolve_pooling(config) -> None:
  """``config.model.pooling = "auto"`` becomes the pooling ``config.model.name`` declares (mean when it declares
  none); an explicit pooling other than the declared one is kept, with a warning."""
  log = logging.getLogger("fewshot_nlu")
  model = config.get("model")
  if model is None or "pooling" not in model or not model.get("name"):
    return
  from fewshot_nlu.config_checks import ConfigError
  from fewshot_nlu.encoders import pretrained
  from fewshot_nlu.errors import UserError
  try:
    declared = pretrained.declared_modules(model.name)
  except UserError:
    if model.pooling == "auto":
      raise
    return  # the method reports a model it cannot load, as before
  if model.pooling == "auto" and declared is not None and declared.unsupported:
    raise ConfigError(f"config.model.pooling: 'auto', but {declared.unsupported}; set a pooling explicitly")
  declared_pooling = declared.pooling if declared else None
  if model.pooling == "auto":
    model.pooling = declared_pooling or "mean"
  elif declared_pooling and declared_pooling != model.pooling:
    log.warning("config.model.pooling=%r, but %s declares %r pooling (modules.json); set "
                "--config.model.pooling=auto to pool as it was trained", model.pooling, model.name, declared_pooling)
  elif declared is not None and declared.unsupported:
    log.warning("%s; pooling by config.model.pooling=%r instead", declared.unsupported, model.pooling)
  if declared is not None and declared.projection is not None and config.method != "evaluate":
    log.warning("%s declares a Dense layer after pooling (modules.json), which training methods do not use: they "
                "train the transformer's pooled vectors", model.name)


def run(config, workdir: str | pathlib.Path, overwrite: bool = False, command: str | None = None) -> dict:
  """Validates the config (before any compile), locks the workdir (``workdirs.lock``, on process 0), claims it
  for this config (``workdirs.claim``: a run of another config there is refused, or deleted with
  ``overwrite``), records the config in it, runs the method, and writes the model card of every export
  (``command``: the command line that ran it, for the card)."""
  from fewshot_nlu import config_checks, config_fields, model_card, workdirs
  from fewshot_nlu.config_checks import ConfigError
  from fewshot_nlu.methods import METHODS, get_method
  method = get_method(config.method)
  config_checks.require_finite_numbers(config)
  config_fields.require_no_ignored_fields(config, config.method, METHODS[config.method])
  resolve_pooling(config)
  if workdirs.is_remote(workdir) and not getattr(method, "REMOTE_WORKDIR", False):
    raise ConfigError(f"--workdir={workdir}: method {config.method!r} writes its workdir locally; use a local "
                      "--workdir and copy it (gcloud storage rsync), or convfit_stage1, which writes gs:// itself")
  method.validate(config)  # fails before anything is compiled (it may prepare dataset files)
  workdir = workdirs.as_path(workdir) if workdirs.is_remote(workdir) else pathlib.Path(workdir)
  setup_jax(config)
  import jax
  with workdirs.lock(workdir) if jax.process_index() == 0 else contextlib.nullcontext():
    if jax.process_index() == 0:
      workdirs.claim(workdir, config, overwrite)
      (workdir / "config.json").write_text(config.to_json_best_effort(indent=2) + "\n")
    results = method.run(config, workdir)
    if jax.process_index() == 0:
      model_card.write_run_cards(workdir, config=config, results=results, command=command)
    return results


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  from absl import logging as absl_logging
  absl_logging.set_verbosity(absl_logging.WARNING)  # orbax logs every save step at INFO
  logging.getLogger("fewshot_nlu").setLevel(logging.INFO)
  from fewshot_nlu import errors
  try:
    command = "python -m fewshot_nlu.main " + shlex.join(sys.argv[1:])
    results = run(FLAGS.config, FLAGS.workdir, overwrite=FLAGS.overwrite, command=command)
  except Exception as e:  # a user error in one line (errors.one_line); a bug keeps its traceback
    message = errors.one_line(e)
    if message is None or FLAGS.verbose:
      raise
    print(message, file=sys.stderr)
    sys.exit(errors.EXIT_USER_ERROR)
  print(json.dumps(results, indent=2))


if __name__ == "__main__":
  app.run(main)
