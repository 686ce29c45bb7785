"""Who may read the inspector: the holder of its token, through an address it was bound to.

The page shows an agent's private memory, so every request passes :class:`Guard` (an ASGI
middleware, in front of everything, static files included):

- **the Host header** must name the address the server was bound to (``127.0.0.1:8760``,
  ``localhost:8760``): a page on another site whose name was rebound to 127.0.0.1 (DNS
  rebinding) sends its own name and is refused (403);
- **the token**, a random :func:`secrets.token_urlsafe` made at start and printed in the URL,
  as notebook servers do: the first visit carries it as ``?token=``, which the guard checks,
  turns into an HttpOnly, SameSite=Strict cookie and drops from the address with a redirect
  (so that it stays out of the history and of ``Referer``); later requests carry the cookie.
  Without either, 401. Compared in constant time;
- **headers** on every answer: a Content-Security-Policy that runs only the page's own script
  files (no inline script, no ``eval``), so that even an escaping mistake could not run a
  stored ``<script>``; no framing, no referrer to other sites, no caching.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SECURITY_HEADERS", "Guard", "allowed_hosts", "cookie_name", "new_token"]

#: Sent with every answer (see the module's docstring).
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    # same-origin: the URL never leaves for another site, and a form POST keeps its Origin
    # (with no-referrer, Chromium sends "Origin: null", which the write routes refuse)
    ("referrer-policy", "same-origin"),
    ("cache-control", "no-store"),
)

#: Addresses that mean "this machine only".
_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def new_token() -> str:
    """A fresh random token (32 bytes, URL-safe): one per server start."""
    return secrets.token_urlsafe(32)


def cookie_name(token: str) -> str:
    """The cookie that carries ``token``: named after it, so that two inspectors on one
    machine (cookies ignore ports) do not overwrite each other's."""
    return "memlane_ui_" + hashlib.sha256(token.encode()).hexdigest()[:12]


def allowed_hosts(host: str, port: int) -> list[str]:
    """The Host headers a server bound to ``host:port`` answers: that address, and for a
    loopback address its other loopback names. A wildcard address (``0.0.0.0``, ``::``)
    answers any name (it is reached by names it cannot know): the token still guards it."""
    if host in ("0.0.0.0", "::", ""):
        return ["*"]
    names = set(_LOOPBACK) if host in _LOOPBACK else {host}
    out: list[str] = []
    for name in sorted(names):
        shown = f"[{name}]" if ":" in name else name
        out.append(f"{shown}:{port}")
        if port == 80:
            out.append(shown)
    return out


class Guard:
    """The ASGI middleware that checks the Host header and the token (module docstring)."""

    def __init__(self, app: ASGIApp, *, token: str, hosts: Iterable[str]) -> None:
        self.app = app
        self.token = token
        self.cookie = cookie_name(token)
        self.hosts = {host.lower() for host in hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan: not a request
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value for key, value in scope["headers"]}
        host = headers.get("host", b"").decode("latin-1").lower()
        if "*" not in self.hosts and host not in self.hosts:
            await _refuse(
                send,
                403,
                f"This inspector answers at {', '.join(sorted(self.hosts))} only, not at "
                f"{host!r}: open the address `memlane ui` printed.",
            )
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), True)
        given = [value for key, value in query if key == "token"]
        if given:
            if not secrets.compare_digest(given[-1].encode(), self.token.encode()):
                await _refuse(send, 401, _NO_TOKEN)
                return
            # a first visit: the token becomes a cookie, and leaves the address bar
            rest = urlencode([(key, value) for key, value in query if key != "token"])
            path = "/" + scope["path"].lstrip("/")  # ("//host/x" would leave this server)
            location = scope.get("root_path", "") + path + (f"?{rest}" if rest else "")
            cookie = (
                f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                # (no Secure: the server speaks plain HTTP on this machine)
            )
            await _answer(
                send, 303, b"", [(b"location", location.encode()), (b"set-cookie", cookie.encode())]
            )
            return
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(headers.get("cookie", b"").decode("latin-1"))
        except CookieError:  # another site's malformed cookie on this host: none of ours
            jar.clear()
        held = jar.get(self.cookie)
        if held is None or not secrets.compare_digest(held.value.encode(), self.token.encode()):
            await _refuse(send, 401, _NO_TOKEN)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [
                    *message["headers"],
                    *((k.encode(), v.encode()) for k, v in SECURITY_HEADERS),
                ]
            await send(message)

        await self.app(scope, receive, send_with_headers)


_NO_TOKEN = (
    "This inspector needs its token: open the whole URL `memlane ui` printed "
    "(http://host:port/?token=...). Restarting it makes a new token."
)


async def _refuse(send: Send, status: int, text: str) -> None:
    await _answer(send, status, text.encode(), [(b"content-type", b"text/plain; charset=utf-8")])


async def _answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    headers = [
        *headers,
        (b"content-length", str(len(body)).encode()),
        *((k.encode(), v.encode()) for k, v in SECURITY_HEADERS),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
