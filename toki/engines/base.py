"""What the engines toki ships share: their registry entry, and a PostgreSQL server for those that
keep their memory in one (plug-ins need neither: the harness finds their server itself)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class EngineInfo:
    name: str
    factory: str  # module:attribute
    description: str
    needs: Sequence[str] = field(default_factory=tuple)  # import names the engine needs (extras)
    executed: str = "real"  # "real" (the engine's own code) or "model": known without loading it
    extra: str = "engines"  # the toki extra that installs what ``needs`` names
    release: tuple[str, str] | None = None  # (distribution, version prefix) the engine runs, e.g. ("letta", "0.16.")

    @property
    def install(self) -> str:
        """How to get the engine's code, for messages ("pip install 'toki[engines]'")."""
        if self.extra in ("letta", "mem0-v1"):  # each in an environment of its own
            return (f"pip install 'toki[{self.extra}]' in an environment of its own: python -m venv "
                    f".venv-{self.extra} && .venv-{self.extra}/bin/pip install -e '.[test,{self.extra}]'")
        return f"pip install 'toki[{self.extra}]'"


class OnPostgres:
    """Base for engines that keep their memory in a PostgreSQL server (TOKI's own write path,
    mem0): the server (the default, resolved on first use, or the one ``toki certify --dsn``
    assigns through :meth:`use_server`), and an observer connection to it, through which the
    controller sees a statement waiting on another agent's lock."""

    _server = None
    _dsn: str | None = None
    _observer = None

    @property
    def server(self):
        if self._server is None:
            from toki.db.server import resolve

            self._server = resolve(self._dsn)
        return self._server

    def use_server(self, server) -> None:
        self._server = server

    @property
    def pg_observer(self):
        if self._observer is None or self._observer.closed:
            self._observer = self.server.connect()
        return self._observer
