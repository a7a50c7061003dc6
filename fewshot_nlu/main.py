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

At the end the headline results print to stdout as JSON (``summary``: each value that is not a table, and those
one level down; per-class, per-fold and per-entity tables stay in ``results.json``), and one line on stderr says
where the whole results and the report are.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys

from absl import app, flags
from ml_collections import config_flags

from fewshot_nlu.methods.runner import resolve_pooling, run, setup_jax  # noqa: F401  (runner.run: the one way a config runs)

config_flags.DEFINE_config_file("config", None, "Path to a config file (configs/*.py).", lock_config=True)
flags.DEFINE_string("workdir", None, "Directory for checkpoints, metrics, exported model and results.")
flags.DEFINE_bool("overwrite", False, "Delete the run in --workdir and start afresh when its config differs "
                  "(without it, such a rerun is refused, naming the fields that differ).")
flags.DEFINE_bool("verbose", False, "Show the traceback of a user error (config, data, workdir) and what libraries "
                  "print while preparing data (TFDS) too.")
flags.mark_flags_as_required(["config", "workdir"])
FLAGS = flags.FLAGS


def explicit_fields() -> list[str]:
  """The config fields given on this command line (``--config.<field>=...``): the run fits the others to the
  data (``runner.run``'s ``explicit``)."""
  return list(config_flags.get_override_values(FLAGS["config"]))


def summary(results: dict) -> dict:
  """The results a terminal shows: plain values and short lists of them, at the top level and one level down
  (``slots.threshold``, ``rejection.threshold``); nested tables are left to ``results.json``."""
  def plain(value) -> bool:
    return not isinstance(value, (dict, list)) or (
        isinstance(value, list) and len(value) <= 10 and not any(isinstance(v, (dict, list)) for v in value))

  out = {}
  for key, value in results.items():
    if plain(value):
      out[key] = value
    elif isinstance(value, dict):
      inner = {k: v for k, v in value.items() if plain(v)}
      if inner:
        out[key] = inner
  return out


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  from absl import logging as absl_logging
  absl_logging.set_verbosity(absl_logging.WARNING)  # orbax logs every save step at INFO
  logging.getLogger("fewshot_nlu").setLevel(logging.INFO)
  from fewshot_nlu import console, errors
  console.set_verbose(FLAGS.verbose)
  try:
    command = "python -m fewshot_nlu.main " + shlex.join(sys.argv[1:])
    results = run(FLAGS.config, FLAGS.workdir, overwrite=FLAGS.overwrite, command=command, explicit=explicit_fields())
  except Exception as e:  # a user error in one line (errors.one_line); a bug keeps its traceback
    message = errors.one_line(e)
    if message is None or FLAGS.verbose:
      raise
    print(message, file=sys.stderr)
    sys.exit(errors.EXIT_USER_ERROR)
  print(json.dumps(summary(results), indent=2))
  console.say_where(FLAGS.workdir)


if __name__ == "__main__":
  app.run(main)
