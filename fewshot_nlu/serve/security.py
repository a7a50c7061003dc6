"""Who may talk to the server, checked before a request reaches a route (``RequestGuard``, an ASGI middleware
in front of Starlette's ``CORSMiddleware``):

  * the ``Host`` header must name an allowed host (default: ``localhost``, ``127.0.0.1``, ``::1`` and the
    address the server is bound to; ``--allow-host`` adds names): a DNS-rebinding page reaches the server under
    its own host name and is refused (403);
  * a request carrying an ``Origin`` header (a browser page's) must come from an origin ``--allow-origin`` names,
    else 403: no web page the user visits can drive the server (CSRF). Clients that are not browsers send no
    ``Origin``. Allowed origins get CORS headers (``CORSMiddleware``), so a team's own chat page can call it;
  * ``POST`` bodies must be ``application/json`` (415): a cross-site form or ``text/plain`` body cannot be one,
    and a browser must ask first (a CORS preflight) before sending JSON elsewhere;
  * with an API key (``--api-key`` / ``FEWSHOT_NLU_API_KEY``) every route but ``GET /healthz`` needs
    ``Authorization: Bearer <key>`` (401 otherwise; compared in constant time, ``hmac.compare_digest``);
  * ``--read-only`` refuses ``POST /examples`` (403).

Every refusal is a JSON ``{"error": ...}`` like the routes' own.
"""

from __future__ import annotations

import dataclasses
import hmac
import ipaddress
import os
import socket
import urllib.parse

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

API_KEY_VARIABLE = "FEWSHOT_NLU_API_KEY"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
OPEN_ROUTES = ("/healthz",)  # answered without the API key (a load balancer's health check)
WRITING_ROUTES = ("/examples",)  # refused by a read-only server


@dataclasses.dataclass(frozen=True)
class Access:
  """What the server accepts: hosts, browser origins, the API key (None: none needed), read-only."""

  allowed_hosts: tuple[str, ...] = LOCAL_HOSTS
  allowed_origins: tuple[str, ...] = ()
  api_key: str | None = None
  read_only: bool = False

  def __post_init__(self):
    if self.api_key is not None and not self.api_key.strip():
      raise ValueError("the API key is empty; give a secret of some length (or none)")
    for origin in self.allowed_origins:
      parts = urllib.parse.urlsplit(origin)
      if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise ValueError(f"--allow-origin {origin!r}: an origin is scheme://host[:port], e.g. http://localhost:3000")

  @classmethod
  def for_server(cls, bind: str, *, hosts=(), origins=(), api_key: str | None = None,
                 read_only: bool = False) -> "Access":
    """The hosts a server bound to ``bind`` answers to (module docstring; a wildcard bind adds this machine's
    names), ``origins`` without a trailing slash, and the API key from ``api_key`` or ``FEWSHOT_NLU_API_KEY``."""
    allowed = [*LOCAL_HOSTS, bind.strip("[]")]
    if bind in ("0.0.0.0", "::", ""):
      allowed += [socket.gethostname(), socket.getfqdn()]
    allowed += list(hosts)
    key = api_key if api_key is not None else os.environ.get(API_KEY_VARIABLE) or None
    return cls(tuple(dict.fromkeys(h.lower() for h in allowed if h)), tuple(o.rstrip("/") for o in origins), key,
               read_only)


def host_name(header: str | None) -> str | None:
  """The host of a ``Host`` header (``example.com:8000`` -> ``example.com``, ``[::1]:8000`` -> ``::1``), lower
  case; None when it is missing or malformed."""
  if not header:
    return None
  try:
    parts = urllib.parse.urlsplit("//" + header)
    name, _ = parts.hostname, parts.port  # .port raises on a malformed port
  except ValueError:
    return None
  if not name or any(c in header for c in "/?#@ "):
    return None
  try:
    return str(ipaddress.ip_address(name))
  except ValueError:
    return name.lower()


class RequestGuard:
  """ASGI middleware enforcing ``Access`` (module docstring) before any route runs."""

  def __init__(self, app: ASGIApp, access: Access):
    self.app, self.access = app, access

  async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
      await self.app(scope, receive, send)
      return
    refusal = self.refusal(scope)
    if refusal is None:
      await self.app(scope, receive, send)
      return
    status, message, headers = refusal
    await JSONResponse({"error": message}, status_code=status, headers=headers)(scope, receive, send)

  def refusal(self, scope: Scope) -> tuple[int, str, dict] | None:
    """(status, message, headers) of the refusal, or None to let the request through."""
    headers = Headers(scope=scope)
    host = host_name(headers.get("host"))
    if host not in self.access.allowed_hosts:
      allowed = ", ".join(self.access.allowed_hosts)
      return 403, (f"host {headers.get('host')!r} is not one this server answers to ({allowed}); start it with "
                   "--allow-host NAME to add one"), {}
    origin = headers.get("origin")
    if origin is not None and origin.rstrip("/") not in self.access.allowed_origins:
      return 403, (f"origin {origin!r} is not allowed: browser pages may call this server only from an origin "
                   "named by --allow-origin"), {}
    method, path = scope["method"], scope["path"]
    if method == "OPTIONS":  # a CORS preflight from an allowed origin: CORSMiddleware answers it
      return None
    if self.access.api_key is not None and path not in OPEN_ROUTES and not self._authorised(headers):
      return 401, "missing or wrong API key: send the header 'Authorization: Bearer <key>'", {
          "WWW-Authenticate": "Bearer"}
    if self.access.read_only and path in WRITING_ROUTES:
      return 403, f"{path}: this server is read-only (--read-only); it takes no examples", {}
    if method == "POST":
      content_type = headers.get("content-type", "").split(";")[0].strip().lower()
      if content_type != "application/json":
        return 415, (f"Content-Type {content_type or '(none)'!r}: send the body as JSON with 'Content-Type: "
                     "application/json'"), {}
    return None

  def _authorised(self, headers: Headers) -> bool:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.access.api_key.encode())
