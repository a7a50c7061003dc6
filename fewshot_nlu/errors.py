"""Errors a person can fix — a config field, a data file, a workdir, a model name, a full disk — as opposed to
bugs. The command-line tools (``main``, ``predict``) print a user error as one line ``error: <where>: <what>``
(a hint after a semicolon where there is one) and exit with status 2, without a traceback unless ``--verbose``;
any other exception is a bug and keeps its traceback."""

from __future__ import annotations

import errno
import re

EXIT_USER_ERROR = 2


class UserError(Exception):
  """Base of every error a user can fix; its message starts with where (a field, a file[:line], a flag)."""


class DataError(UserError, ValueError):
  """A data file that cannot be read as its format says; the message names the file, line and field."""


class MissingDataFile(UserError, FileNotFoundError):
  """A data file or folder that is not there; the message names the path."""


class MissingExtra(UserError, ImportError):
  """An optional feature whose packages are not installed; the message names the feature and the pip command."""


def _disk_full(error: BaseException) -> str | None:
  """Where the disk filled up behind ``error`` (itself, or its cause / context: orbax and TFDS wrap them): an
  ``ENOSPC`` OSError's file, or the file tensorstore names in the ``RESOURCE_EXHAUSTED ... No space left on device``
  ValueError orbax raises from its writer thread (no OSError behind it); "disk" where none is named."""
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
      return error.filename or "disk"
    if "No space left on device" in str(error):
      named = re.search(r'(?:local file|Failed writing:) "([^"]+)"', str(error))
      return named.group(1) if named else "disk"
    error = error.__cause__ or error.__context__
  return None


def one_line(error: BaseException) -> str | None:
  """The one-line message of a user error (``error: ...``), or None for a bug."""
  if isinstance(error, UserError):
    return f"error: {error}"
  full = _disk_full(error)
  if full is not None:
    return (f"error: {full}: no space left on device; free some space (or use a --workdir on another disk) and "
            "rerun: the run resumes from its last checkpoint")
  return None
