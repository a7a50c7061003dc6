"""Config validation that runs before anything is compiled; every error names the field at fault."""

from __future__ import annotations

import math
import numbers
import pathlib
import re
from typing import Any, Iterable, Iterator

import ml_collections

from fewshot_nlu import workdirs
from fewshot_nlu.errors import UserError


class ConfigError(UserError, ValueError):
  """A config field that is missing, malformed or out of range; the message starts with the field."""


def get(config: ml_collections.ConfigDict, field: str) -> Any:
  node = config
  for part in field.split("."):
    if part not in node:
      raise ConfigError(f"config.{field}: missing (required by this method)")
    node = node[part]
  return node


def set_field(config: ml_collections.ConfigDict, field: str, value: Any) -> None:
  """Sets the dotted ``field`` (which must exist) to ``value``."""
  *sections, name = field.split(".")
  node = config
  for part in sections:
    node = node[part]
  node[name] = value


_FLAG = re.compile(r"(?<![\w.])(?:--)?config\.([A-Za-z_][\w.]*)=([^\s;,)]*)")
_FIELD = re.compile(r"(?<![\w.-])config\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")


def _keyword(field: str, value: str) -> str:
  """``train.batch_size``, ``16`` -> ``train={"batch_size": 16}`` (fit's keyword spelling of a field)."""
  section, *rest = field.split(".")
  inner = value
  for part in reversed(rest):
    inner = f'{{"{part}": {inner}}}'
  return f"{section}={inner}"


def python_spelling(message: str) -> str:
  """A user error's message in ``fewshot_nlu.fit``'s spelling instead of the command line's: ``--config.a.b=V``
  -> ``a={"b": V}``, ``config.a.b`` -> ``a={"b": ...}``, ``config.seed`` -> ``seed=...``, ``--overwrite`` ->
  ``overwrite=True``, ``--workdir`` -> ``workdir``; a command quoted in backticks is left as it is."""
  def flag(match: re.Match) -> str:
    value = match.group(2)
    if not value:
      value = '""'
    elif not re.fullmatch(r"-?[\d.e+-]+|True|False|\(.*\)|\[.*\]", value):
      value = repr(value.strip("'\""))
    return _keyword(match.group(1), value)

  def respell(part: str) -> str:
    part = _FIELD.sub(lambda m: _keyword(m.group(1), "..."), _FLAG.sub(flag, part))
    return part.replace("--overwrite", "overwrite=True").replace("--workdir=", "workdir=").replace(
        "--workdir", "workdir=")

  parts = message.split("`")  # a command quoted in backticks stays a command
  return "`".join(respell(part) if i % 2 == 0 else part for i, part in enumerate(parts))


def _is_number(value: Any) -> bool:
  return isinstance(value, numbers.Real) and not isinstance(value, bool)


def numeric_leaves(node: Any, path: str = "config") -> Iterator[tuple[str, Any]]:
  """``(dotted path, value)`` of every number in ``node``: config fields, and items of tuples / lists / dicts
  held in them (``config.train.group_learning_rates[0][1]``)."""
  if isinstance(node, (ml_collections.ConfigDict, dict)):
    for key in node.keys():
      yield from numeric_leaves(node[key], f"{path}.{key}")
  elif isinstance(node, (tuple, list)):
    for i, item in enumerate(node):
      yield from numeric_leaves(item, f"{path}[{i}]")
  elif _is_number(node):
    yield path, node


def require_finite_numbers(config: ml_collections.ConfigDict) -> None:
  """Every number in the config is finite: a ``nan`` / ``inf`` override fails here, naming the field, instead
  of training on NaN losses."""
  for path, value in numeric_leaves(config):
    if not math.isfinite(value):
      raise ConfigError(f"{path}: {value!r} is not a finite number")


def is_positive(value: Any) -> bool:
  """A finite number > 0 (not a bool)."""
  return _is_number(value) and math.isfinite(value) and value > 0


def require_positive(config, *fields: str) -> None:
  for field in fields:
    value = get(config, field)
    if not is_positive(value):
      raise ConfigError(f"config.{field}: must be a positive number, got {value!r}")


def require_non_negative(config, *fields: str) -> None:
  for field in fields:
    value = get(config, field)
    if not _is_number(value) or not math.isfinite(value) or value < 0:
      raise ConfigError(f"config.{field}: must be a number >= 0, got {value!r}")


def require_fraction(config, field: str) -> None:
  value = get(config, field)
  if not 0 <= value <= 1:
    raise ConfigError(f"config.{field}: must be in [0, 1], got {value!r}")


def require_choice(config, field: str, choices: Iterable[str]) -> None:
  require_value_in(field, get(config, field), choices)


def require_value_in(field: str, value: Any, choices: Iterable[str]) -> None:
  """``value`` (of ``config.<field>``, or an item of it) is one of ``choices``."""
  choices = tuple(choices)
  if value not in choices:
    raise ConfigError(f"config.{field}: {value!r} is not one of {choices}")


def require_dir(config, field: str, *must_contain: str, hint: str = "") -> pathlib.Path:
  if workdirs.is_remote(str(get(config, field))):
    raise ConfigError(f"config.{field}: {get(config, field)!r} is a remote URL; datasets are read from local "
                      "disk (on Cloud TPU, launch/setup_workers.sh --data gs://... copies them to every worker)")
  path = pathlib.Path(get(config, field)).expanduser()
  if not path.is_dir():
    raise ConfigError(f"config.{field}: directory {str(path)!r} does not exist{hint}")
  for name in must_contain:
    if not (path / name).exists():
      raise ConfigError(f"config.{field}: {str(path)!r} has no {name!r}{hint}")
  return path
