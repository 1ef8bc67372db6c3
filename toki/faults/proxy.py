"""A TCP proxy in front of PostgreSQL that can lose a reply: the commit-acknowledgement fault.

The client connects to the proxy (127.0.0.1, an ephemeral port); the proxy forwards bytes both
ways to the real server (its Unix socket or TCP address). :meth:`Link.lose_replies` makes the
proxy keep forwarding what the client sends but swallow what the server answers, and close the
client's side as soon as the server has answered: the COMMIT reaches the server and commits, and
the client sees its connection die before the reply, which is the indeterminate outcome Jepsen
records as ``:info``. Nothing is simulated in the client: libpq reads a closed socket.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

import psycopg

from toki.errors import TokiError

BUF = 65536


class FaultTimeout(TokiError):
    """A fault injection waited longer than its bound (the server or the proxy did not answer)."""


def _server_address(dsn: str) -> tuple[int, object]:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    host = info.get("host") or "/tmp"
    port = int(info.get("port") or 5432)
    if host.startswith("/"):
        return socket.AF_UNIX, str(Path(host) / f".s.PGSQL.{port}")
    return socket.AF_INET, (host, port)


class Link:
    """One client connection through the proxy."""

    def __init__(self, client: socket.socket, server: socket.socket):
        self.client, self.server = client, server
        self.swallow = False  # drop server -> client bytes, then close the client side
        self.swallowed = threading.Event()
        self.closed = False

    def lose_replies(self) -> None:
        self.swallow = True

    def close(self) -> None:
        self.closed = True
        for s in (self.client, self.server):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()


class Proxy:
    """Listen on 127.0.0.1:<ephemeral>, forward each connection to the server of ``dsn``."""

    def __init__(self, dsn: str):
        self.target_dsn = dsn
        self.family, self.address = _server_address(dsn)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.settimeout(0.2)  # so the accept loop notices close() within a bound
        self.port = self.listener.getsockname()[1]
        self.links: list[Link] = []
        self._new = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._accept, name="toki-fault-proxy", daemon=True)
        self._thread.start()

    @property
    def dsn(self) -> str:
        """The target DSN with host and port replaced by the proxy's."""
        info = psycopg.conninfo.conninfo_to_dict(self.target_dsn)
        info.update(host="127.0.0.1", port=str(self.port), sslmode="disable")
        info.pop("hostaddr", None)
        return psycopg.conninfo.make_conninfo(**info)

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self.listener.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            server = socket.socket(self.family, socket.SOCK_STREAM)
            try:
                server.connect(self.address)
            except OSError:
                client.close()
                continue
            link = Link(client, server)
            with self._new:
                self.links.append(link)
                self._new.notify_all()
            threading.Thread(target=self._pump, args=(link, client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(link, server, client, True), daemon=True).start()

    def _pump(self, link: Link, src: socket.socket, dst: socket.socket, replies: bool) -> None:
        try:
            while True:
                data = src.recv(BUF)
                if not data:
                    break
                if replies and link.swallow:
                    # The server answered (the COMMIT is done): the client never hears it.
                    link.swallowed.set()
                    break
                dst.sendall(data)
        except OSError:
            pass
        link.close()

    def link_of(self, conn: psycopg.Connection, timeout: float = 5.0) -> Link:
        """The link carrying ``conn`` (matched by the client socket's local port)."""
        port = _local_port(conn)

        def find():
            for link in self.links:
                with contextlib.suppress(OSError):
                    if not link.closed and link.client.getpeername()[1] == port:
                        return link
            return None
        with self._new:
            if not self._new.wait_for(lambda: find() is not None, timeout):
                raise FaultTimeout(f"the fault proxy saw no connection from port {port} within {timeout:g} s",
                                   fix="check the proxy DSN is the one the connection used")
            return find()

    def close(self) -> None:
        self._stop = True
        with contextlib.suppress(OSError):
            self.listener.close()
        for link in list(self.links):
            link.close()
        self._thread.join(timeout=2)

    def __enter__(self) -> "Proxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _local_port(conn: psycopg.Connection) -> int:
    fd = conn.pgconn.socket
    s = socket.socket(fileno=fd)
    try:
        return s.getsockname()[1]
    finally:
        s.detach()  # the descriptor belongs to libpq
