"""Running one config in one workdir: the single path every training run takes, from the command line
(``fewshot_nlu.main``) and from Python (``fewshot_nlu.fit``). ``run`` validates the config before anything is
compiled, locks and claims the workdir (``workdirs.lock`` / ``workdirs.claim``: resume the same config, refuse
another unless ``overwrite``), records the config there and runs the method. Importing it defines no flags."""

from __future__ import annotations

import contextlib
import os
import pathlib


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


def run(config, workdir: str | pathlib.Path, overwrite: bool = False) -> dict:
  """Validates the config (before any compile), locks the workdir (``workdirs.lock``, on process 0), claims it
  for this config (``workdirs.claim``: a run of another config there is refused, or deleted with
  ``overwrite``), records the config in it, and runs the method."""
  from fewshot_nlu import config_checks, config_fields, workdirs
  from fewshot_nlu.config_checks import ConfigError
  from fewshot_nlu.methods import METHODS, get_method
  method = get_method(config.method)
  config_checks.require_finite_numbers(config)
  config_fields.require_no_ignored_fields(config, config.method, METHODS[config.method])
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
    return method.run(config, workdir)
