"""The systems ``toki faults`` injects into: TOKI's write path, and every engine of the harness.

``toki`` is the write path of :mod:`toki.db.store` (each operator in each schema mode, durable
commits: the store's default); ``toki-async-commit`` the same with ``synchronous_commit=off``
(what the matrix's lanes use), to show what that setting costs after a server crash;
``toki-engine`` is the harness's engine of the same write path (its concurrency scenarios,
killed at each statement). Every other name is an engine of :mod:`toki.engines.registry`.
"""

from __future__ import annotations

import contextlib

from toki.errors import ConfigError

WRITE_PATHS = {"toki": True, "toki-async-commit": False}  # name -> durable
ENGINE_ALIASES = {"toki-engine": "toki"}


def names() -> list[str]:
    from toki.engines.registry import ENGINES, available

    engines = [n for n, i in ENGINES.items() if available(i) and n != "toki"]
    return [*WRITE_PATHS, "toki-engine", *engines]


class WritePathSystem:
    executed = "real"

    def __init__(self, name: str, dsn: str | None, kinds: tuple[str, ...]):
        import toki
        from toki.faults import write_path

        self.name, self.version = name, toki.__version__
        self.wp_mod = write_path
        self.durable = WRITE_PATHS[name]
        self._dsn, self._private, self._faults = dsn, None, None
        self.kinds = [k for k in kinds if k in write_path.KINDS]

    @property
    def faults(self):
        if self._faults is None:
            if self._dsn:
                from toki.db.server import resolve

                self._faults = self.wp_mod.WritePathFaults(resolve(self._dsn), durable=self.durable)
            else:
                from toki.faults.private_server import PrivateServer

                self._private = PrivateServer()
                server = self._private.start()
                self._faults = self.wp_mod.WritePathFaults(server, durable=self.durable,
                                                           restart=self._private.crash_restart)
        return self._faults

    @property
    def backend(self) -> dict:
        return self.faults.server.describe()

    def cases(self) -> list[str]:
        if not self.durable:  # one case shows what the setting costs
            return ["lww/audit_row"]
        return [c.name for c in self.wp_mod.cases()]

    def _case(self, name: str):
        op, _, mode = name.partition("/")
        if op not in self.wp_mod.OPERATORS or mode not in self.wp_mod.MODES:
            raise ConfigError(f"{self.name} has no case {name!r}",
                              fix="use OPERATOR/MODE with an operator of lww, evi, await, rule and a mode of "
                                  "audit_row, dual_row, base")
        return self.wp_mod.Case(op, mode)

    def points(self, case: str, kind: str) -> list[int]:
        kinds = ("kill", "restart") if not self.durable else self.wp_mod.KINDS
        return self.faults.points(self._case(case), kind) if kind in kinds else []

    def run(self, case: str, kind: str, point: int):
        return self.faults.run(self._case(case), kind, point)

    def close(self) -> None:
        if self._private is not None:
            self._private.close()


class EngineSystem:
    """An engine toki ships (by name) or a plug-in (``module:factory``, the protocol of ``toki certify
    --engine-module``): kills, torn writes and power-loss crash states of its scenarios."""

    def __init__(self, name: str, kinds: tuple[str, ...], step_limit_s: float, *, module: str | None = None,
                 explicit: bool = False, dsn: str | None = None):
        from toki.engines.registry import load_engine
        from toki.faults import engines

        if module is not None:
            from toki.harness.engine import connect_database

            self.engine = load_engine(module=module)
            connect_database(self.engine, dsn)
            self.name = str(self.engine.name)
        else:
            self.name = name
            self.engine = load_engine(ENGINE_ALIASES.get(name, name))
        self.module = module
        self.version, self.executed = str(self.engine.version), getattr(self.engine, "executed", "real")
        self.kinds = [k for k in kinds if k in engines.KINDS]
        self._mod, self._step_limit, self._explicit = engines, step_limit_s, explicit
        self._open: dict[tuple[str, bool], object] = {}
        self._power_stats: dict[str, dict] = {}  # a power-loss case's counts, kept when its runner closes

    @property
    def backend(self) -> dict:
        return {"name": "engine", "engine": self.engine.name, "version": self.version, "executed": self.executed}

    def cases(self) -> list[str]:
        return list(self.engine.scenarios)

    def _faults(self, case: str, power: bool = False):
        if case not in self.engine.scenarios:
            raise ConfigError(f"engine {self.name} has no scenario {case!r}",
                              fix="choose one of " + ", ".join(self.engine.scenarios))
        key = (case, power)
        if key not in self._open:
            for other in list(self._open):  # one scenario's scratch folder at a time
                gone = self._open.pop(other)
                if other[1] and gone._trace is not None:
                    self._power_stats[other[0]] = gone.stats()
                gone.close()
            if power:
                from toki.faults.power_loss import PowerLossFaults

                self._open[key] = PowerLossFaults(self.engine, case, step_limit_s=self._step_limit,
                                                  explicit=self._explicit)
            else:
                self._open[key] = self._mod.EngineFaults(self.engine, case, step_limit_s=self._step_limit)
        return self._open[key]

    def points(self, case: str, kind: str) -> list[int]:
        if kind == "power-loss":
            return self._faults(case, True).points()
        return self._faults(case).points(kind) if kind in self._mod.KINDS else []

    def run(self, case: str, kind: str, point: int, crash=None):
        if kind == "power-loss":
            r = self._faults(case, True).run(point, crash)
        else:
            r = self._faults(case).run(kind, point)
        r.system = self.name
        return r

    def power(self, case: str):
        """The power-loss runner of a case (its trace and counts)."""
        return self._faults(case, True)

    def power_stats(self, case: str) -> dict:
        """A power-loss case's counts (crash states built, distinct, operations; why it cannot run),
        without recording it again when its runner was closed for the next case."""
        if case in self._power_stats:
            return self._power_stats[case]
        return self._faults(case, True).stats()

    def close(self) -> None:
        for f in self._open.values():
            with contextlib.suppress(Exception):
                f.close()
        self._open.clear()


def system(name: str | None, *, dsn: str | None = None, kinds: tuple[str, ...] = (), step_limit_s: float = 10.0,
           module: str | None = None):
    """A system by name, or the plug-in ``module`` (``pkg.mod:factory``). ``kinds`` empty: every kind
    that applies; a kind named in ``kinds`` that cannot be judged on the system's storage fails."""
    from toki.faults import engines, write_path

    explicit = bool(kinds)
    kinds = kinds or tuple(dict.fromkeys((*write_path.KINDS, *engines.KINDS)))
    if module is not None:
        return EngineSystem(module, kinds, step_limit_s, module=module, explicit=explicit, dsn=dsn)
    if name in WRITE_PATHS:
        return WritePathSystem(name, dsn, kinds)
    if name in names():
        return EngineSystem(name, kinds, step_limit_s, explicit=explicit)
    raise ConfigError(f"unknown system {name!r}", fix="choose one of " + ", ".join(names()) + ", or all")
