"""Running one config in one workdir: the single path every training run takes, from the command line
(``fewshot_nlu.main``) and from Python (``fewshot_nlu.fit``). ``run`` validates the config before anything is
compiled, locks and claims the workdir (``workdirs.lock`` / ``workdirs.claim``: resume the same config, refuse
another unless ``overwrite``), records the config there, runs the method and writes the model card of every export it leaves.
Importing it defines no flags."""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
from typing import Collection


def setup_jax(config) -> None:
  """Process-level JAX settings from the config; must run before the first computation."""
  if config.get("compilation_cache_dir"):
    enable_compilation_cache(config.compilation_cache_dir)
  if config.distributed.enabled:
    from fewshot_nlu import sharding
    sharding.initialize_distributed(config.distributed.coordinator_address or None,
                                    config.distributed.num_processes or None,
                                    config.distributed.process_id if config.distributed.process_id >= 0
                                    else None)


def enable_compilation_cache(directory: str) -> None:
  """JAX's persistent compilation cache in ``directory``: programs that took 0.5 s or more to compile load from
  there in later processes; an empty ``directory`` leaves it off."""
  if not directory:
    return
  import jax
  jax.config.update("jax_compilation_cache_dir", os.path.expanduser(directory))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


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


def run(config, workdir: str | pathlib.Path, overwrite: bool = False, command: str | None = None,
        explicit: Collection[str] | None = None) -> dict:
  """Fits the config to the data (the method's ``resolve(config, explicit)``, where it has one: split names and
  batch geometry the caller did not set, ``explicit`` being the dotted fields the caller did set: ``main``'s
  ``--config.<field>`` flags, ``fit``'s keyword arguments; None, every field, so nothing is refitted), validates it
  (before any compile), locks the workdir (``workdirs.lock``, on process 0), claims it for this config
  (``workdirs.claim``: a run of another config there is refused, or deleted with ``overwrite``), records the
  config in it, runs the method, and writes the model card of every export (``command``: the command line that
  ran it, for the card). A run that fails before its first checkpoint gives a workdir it claimed back
  (``workdirs.release``), so a corrected rerun there is not refused."""
  from fewshot_nlu import config_checks, config_fields, model_card, workdirs
  from fewshot_nlu.config_checks import ConfigError
  from fewshot_nlu.methods import METHODS, get_method
  method = get_method(config.method)
  config_checks.require_finite_numbers(config)
  config_fields.require_no_ignored_fields(config, config.method, METHODS[config.method].module)
  resolve_pooling(config)
  if workdirs.is_remote(workdir) and not getattr(method, "REMOTE_WORKDIR", False):
    raise ConfigError(f"--workdir={workdir}: method {config.method!r} writes its workdir locally; use a local "
                      "--workdir and copy it (gcloud storage rsync), or convfit_stage1, which writes gs:// itself")
  if hasattr(method, "resolve"):
    method.resolve(config, None if explicit is None else frozenset(explicit))
  method.validate(config)  # fails before anything is compiled (it may prepare dataset files)
  workdir = workdirs.as_path(workdir) if workdirs.is_remote(workdir) else pathlib.Path(workdir)
  setup_jax(config)
  import jax
  with workdirs.lock(workdir) if jax.process_index() == 0 else contextlib.nullcontext():
    claimed = False
    if jax.process_index() == 0:
      claimed = workdirs.claim(workdir, config, overwrite)
      (workdir / "config.json").write_text(config.to_json_best_effort(indent=2) + "\n")
    try:
      results = method.run(config, workdir)
    except BaseException:
      if claimed:
        workdirs.release(workdir)
      raise
    if jax.process_index() == 0:
      model_card.write_run_cards(workdir, config=config, results=results, command=command,
                                 paper=METHODS[config.method].paper)
    return results
