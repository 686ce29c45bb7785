"""Serving the inspector: bind the address (port 0: a free one), print the URL with its
token as the first line of output, then serve with uvicorn until interrupted."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import uvicorn

from .app import create_app
from .security import allowed_hosts, new_token
from .source import Source

__all__ = ["Inspector", "serve"]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def is_loopback(host: str) -> bool:
    return host in _LOOPBACK or host.startswith("127.")


@dataclass
class Inspector:
    """An inspector bound to ``host:port`` (``port=0``: a free port, read back after
    binding), with its token. :meth:`run` serves in this thread; :meth:`start` in a
    background thread (tests), :meth:`stop` ends it.

    >>> inspector = Inspector(source, port=0)  # doctest: +SKIP
    >>> print(inspector.url)  # doctest: +SKIP
    http://127.0.0.1:40123/?token=...
    """

    source: Source
    host: str = "127.0.0.1"
    port: int = 0
    token: str = field(default_factory=new_token, repr=False)  # (kept out of logs)

    def __post_init__(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((self.host, self.port))
            # listening before the URL is printed: a browser (or a test) that opens it at
            # once waits in the backlog until uvicorn accepts, instead of being refused
            self._socket.listen(128)
        except OSError:
            self._socket.close()
            raise
        self.port = self._socket.getsockname()[1]
        app = create_app(self.source, token=self.token, hosts=allowed_hosts(self.host, self.port))
        config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The address to open, with the token (what ``memlane ui`` prints first)."""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        if self.host in ("0.0.0.0", "::"):
            shown = "127.0.0.1" if self.host == "0.0.0.0" else "[::1]"
        return f"http://{shown}:{self.port}/?token={self.token}"

    def run(self) -> None:
        """Serve until interrupted (Ctrl-C) or :meth:`stop`."""
        self._server.run(sockets=[self._socket])

    def start(self) -> None:
        """Serve in a background thread; returns once the server accepts requests."""
        self._thread = threading.Thread(target=self.run, name="memlane-ui", daemon=True)
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("memlane ui stopped while starting; see its output.")
            self._thread.join(0.02)

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._socket.close()


def serve(
    source: Source,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    echo: Callable[[str], None] = print,
) -> None:
    """Serve ``source`` at ``host:port``: print the URL (with the token) first, a warning
    when the address is not this machine's loopback, and serve until Ctrl-C."""
    inspector = Inspector(source, host=host, port=port)
    echo(inspector.url)
    if not is_loopback(host):
        echo(
            f"Warning: listening on {host}, not only on this machine: anyone who can reach "
            "this address and has the token can read every session of the store."
        )
    mode = "read-only" if source.read_only else "writable: its pages can delete and erase"
    echo(f"memlane ui: {source.admin.url} ({mode}); Ctrl-C stops it.")
    # the first page would otherwise load the model and the indexes (4 s at 100k events)
    threading.Thread(target=source.warm_up, name="memlane-ui-warm-up", daemon=True).start()
    # uvicorn shuts down on Ctrl-C, then raises it again: stopping is the normal end
    with contextlib.suppress(KeyboardInterrupt):
        inspector.run()
    echo("memlane ui: stopped.")
