"""The config fields a method reads, found in its code, so that a field it would ignore is an error.

A config is locked (``ml_collections``), so a misspelt override already fails; this catches the other way a
setting is silently lost: a field that exists in the config but that the method never reads (a field inherited
from another method's base, say). ``fields_read(module)`` parses the method's module and every
``fewshot_nlu`` module it imports, directly or not (plus ``runner``, which reads the process-level fields), and
collects the config paths their code reads:

  * attribute / item / ``.get("...")`` chains rooted at ``config`` or ``run_config``, following local aliases
    (``q = config.qaid`` ... ``q.temperature`` reads ``qaid.temperature``);
  * dotted strings such as ``"train.batch_size"`` (the field names ``config_checks`` takes);
  * chains rooted elsewhere (a section passed into a helper as ``c``) count as reading any path that ends with
    them, so ``c.hidden`` reads ``classifier.mlp.hidden``.

A section passed whole (``dict(config.mesh)``) reads all of its fields. The analysis errs towards "read": it can
miss an ignored field whose name is read elsewhere, never flag a field that is read.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import pathlib
from typing import Iterable

import ml_collections

from fewshot_nlu.config_checks import ConfigError

CONFIG_ROOTS = ("config", "run_config")
ALWAYS = ("fewshot_nlu.methods.runner",)  # process-level fields: compilation cache, distributed initialisation
# modules that build configs rather than read them (the package's lazy ``fit`` / ``load``, the shipped defaults):
# a field they set is not a field a method reads
CONFIG_BUILDERS = ("fewshot_nlu", "fewshot_nlu.api", "fewshot_nlu.defaults")


PACKAGE_ROOT = pathlib.Path(__file__).resolve().parent


def _file_of(module: str) -> pathlib.Path | None:
  """The source file of a module: for ``fewshot_nlu`` ones found on disk (nothing is imported), for others
  (a method registered from elsewhere) through the import system."""
  if not module.startswith("fewshot_nlu"):
    spec = importlib.util.find_spec(module)
    return pathlib.Path(spec.origin) if spec and spec.origin and spec.origin.endswith(".py") else None
  parts = module.split(".")[1:]
  base = PACKAGE_ROOT.joinpath(*parts)
  for candidate in (base.with_suffix(".py"), base / "__init__.py"):
    if candidate.is_file():
      return candidate
  return None


def _source_of(module: str) -> str | None:
  path = _file_of(module)
  return path.read_text(encoding="utf-8") if path else None


def _is_module(name: str) -> bool:
  return _file_of(name) is not None


def _imports(tree: ast.AST) -> set[str]:
  """The ``fewshot_nlu`` modules a module imports, at the top or inside functions."""
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found.update(a.name for a in node.names if a.name.startswith("fewshot_nlu"))
    elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fewshot_nlu"):
      found.add(node.module)
      for a in node.names:
        if _is_module(f"{node.module}.{a.name}"):
          found.add(f"{node.module}.{a.name}")
  return found


def reachable_modules(module: str) -> set[str]:
  """``module`` and every ``fewshot_nlu`` module it imports, transitively."""
  seen, todo = set(), [module, *ALWAYS]
  while todo:
    name = todo.pop()
    if name in seen:
      continue
    seen.add(name)
    if name != module and (name in CONFIG_BUILDERS or name.startswith("fewshot_nlu.defaults.")):
      continue
    source = _source_of(name)
    if source is not None:
      todo.extend(_imports(ast.parse(source)) - seen)
  return seen


def _chain(node: ast.AST) -> list[str] | None:
  """``a.b["c"].get("d")`` -> ["a", "b", "c", "d"]; None if the expression is not such a chain."""
  if isinstance(node, ast.Name):
    return [node.id]
  if isinstance(node, ast.Attribute):
    inner = _chain(node.value)
    return inner + [node.attr] if inner else None
  if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
    inner = _chain(node.value)
    return inner + [node.slice.value] if inner else None
  if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args
      and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
    inner = _chain(node.func.value)
    return inner + [node.args[0].value] if inner else None
  return None


class _Reads(ast.NodeVisitor):
  """Config reads of a module. Aliases are scope-local: a function sees its enclosing scopes' aliases, and the
  ones it makes end with it."""

  def __init__(self):
    self.resolved: set[tuple[str, ...]] = set()
    self.suffixes: set[tuple[str, ...]] = set()
    self.aliases: dict[str, list[str]] = {}

  def _resolve(self, chain: list[str]) -> list[str]:
    for _ in range(8):  # alias of alias
      if chain[0] in self.aliases and chain[0] not in CONFIG_ROOTS:
        chain = self.aliases[chain[0]] + chain[1:]
      else:
        break
    return chain

  def _record(self, chain: list[str]) -> None:
    chain = self._resolve(chain)
    if chain[0] in CONFIG_ROOTS:
      if len(chain) > 1:
        self.resolved.add(tuple(chain[1:]))
    elif len(chain) > 1:
      self.suffixes.add(tuple(chain[1:]))

  def visit_Assign(self, node: ast.Assign) -> None:
    chain = _chain(node.value)
    if chain and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and len(chain) > 1:
      resolved = self._resolve(chain)
      if resolved[0] in CONFIG_ROOTS:
        self.aliases[node.targets[0].id] = resolved
        self.generic_visit(node.targets[0])
        return
    self.generic_visit(node)

  def _visit_scope(self, node) -> None:
    outer = dict(self.aliases)
    self.generic_visit(node)
    self.aliases = outer

  visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _visit_scope

  def visit_Attribute(self, node: ast.Attribute) -> None:
    self._visit_chain(node)

  def visit_Subscript(self, node: ast.Subscript) -> None:
    self._visit_chain(node)

  def visit_Call(self, node: ast.Call) -> None:
    chain = _chain(node)
    if chain:
      self._record(chain)
      for arg in node.args[1:]:
        self.visit(arg)
      return
    self.generic_visit(node)

  def _visit_chain(self, node) -> None:
    chain = _chain(node)
    if chain:
      self._record(chain)
    else:
      self.generic_visit(node)

  def visit_Constant(self, node: ast.Constant) -> None:
    value = node.value
    if isinstance(value, str) and "." in value and " " not in value and value.replace(".", "").replace(
        "_", "").isalnum() and not value.startswith("fewshot_nlu") and value[0].isalpha():
      self.resolved.add(tuple(value.split(".")))


@functools.lru_cache(maxsize=None)
def fields_read(module: str) -> tuple[frozenset, frozenset]:
  """(resolved config paths, unresolved path suffixes) read by ``module`` and the modules it reaches."""
  resolved, suffixes = set(), set()
  for name in sorted(reachable_modules(module)):
    source = _source_of(name)
    if source is None:
      continue
    reads = _Reads()
    reads.visit(ast.parse(source))
    resolved |= reads.resolved
    suffixes |= reads.suffixes
  return frozenset(resolved), frozenset(suffixes)


def leaf_paths(config: ml_collections.ConfigDict, prefix: tuple[str, ...] = ()) -> Iterable[tuple[str, ...]]:
  for key in config.keys():
    value = config[key]
    if isinstance(value, ml_collections.ConfigDict):
      yield from leaf_paths(value, prefix + (key,))
    else:
      yield prefix + (key,)


def is_read(path: tuple[str, ...], resolved: frozenset, suffixes: frozenset) -> bool:
  if any(path[:n] in resolved for n in range(1, len(path) + 1)):
    return True  # the field, or its whole section
  return any(path[-n:] in suffixes for n in range(1, len(path) + 1))


def ignored_fields(config: ml_collections.ConfigDict, module: str) -> list[str]:
  """The dotted paths of ``config``'s fields that ``module`` (a method) never reads."""
  resolved, suffixes = fields_read(module)
  return [".".join(p) for p in leaf_paths(config) if not is_read(p, resolved, suffixes)]


def require_no_ignored_fields(config: ml_collections.ConfigDict, method: str, module: str) -> None:
  ignored = ignored_fields(config, module)
  if ignored:
    raise ConfigError(f"config.{ignored[0]}: method {method!r} does not read this field"
                      + (f" (nor {', '.join(ignored[1:])})" if len(ignored) > 1 else "")
                      + "; remove it from the config (a setting there would be silently ignored)")
