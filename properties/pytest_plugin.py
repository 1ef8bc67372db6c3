"""pytest plugin: database fixtures for toki and for engines certified with it.

Options: ``--toki-dsn DSN`` (else $TOKI_DSN, else the embedded PostgreSQL) and
``--toki-profile dev|ci|paper`` (load that Hypothesis profile, see
:mod:`toki.properties.profiles`; without it the suite's own choice stands).
Fixtures: ``toki_server`` (session-scoped :class:`toki.db.Server`), ``toki_store`` (a fresh
:class:`toki.db.Store` in its own schema, dropped after the test), ``toki_certify`` (certify
a write-path adapter from a test) and ``toki_certify_engine`` (certify an unmodified engine's
scenario under the engine harness)::

    def test_my_engine_keeps_its_contract(toki_certify):
        toki_certify("mypkg.memory:adapter", level="RC")          # fails with the witness

    def test_my_engine_below_its_level(toki_certify):
        v = toki_certify(MyEngine(), level="RC", expect="violated")  # returns the Verdict

    def test_my_engine_under_concurrency(toki_certify_engine):
        toki_certify_engine("mypkg.toki_plugin:engine", "double-write")   # fails with the grants

    def test_no_new_race(toki_certify_engine):       # a CI gate: known races pass, new ones fail
        toki_certify_engine("mypkg.toki_plugin:engine", "double-write", exhaustive=2,
                            baseline="tests/toki-baseline.toml", time_budget=120)
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser) -> None:
    group = parser.getgroup("toki")
    group.addoption("--toki-dsn", default=None,
                    help="PostgreSQL DSN for toki's database fixtures (default: $TOKI_DSN, else embedded)")
    group.addoption("--toki-profile", default=None, choices=("dev", "ci", "paper"),
                    help="Hypothesis settings profile for toki's property suites (default: $CI -> ci, else dev)")


def pytest_configure(config) -> None:
    name = config.getoption("--toki-profile", default=None)
    if name:
        from toki.properties.profiles import load_profile

        load_profile(name)


@pytest.fixture(scope="session")
def toki_server(request):
    from toki.db.server import resolve

    return resolve(request.config.getoption("--toki-dsn"))


@pytest.fixture
def toki_store(toki_server):
    from toki.db.store import Store

    store = Store.open(server=toki_server, label="test")
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def toki_certify(toki_server):
    """``certify(adapter, level, *, operator=None, budget=None, seed=0, expect="holds")``.

    Runs the contract suite of the adapter's operator at ``level`` (budget: the Hypothesis
    profile's). With ``expect="holds"`` (default) the test fails when an anomaly is found, and
    the failure message carries the minimal witness schedule (replay it with ``toki run``);
    with ``expect="violated"`` it fails when none is found. Returns the
    :class:`toki.properties.contracts.Verdict`.
    """
    from toki.properties.contracts import certify

    def run(adapter, level, *, operator=None, budget=None, seed=0, expect="holds", mode="audit_row"):
        if expect not in ("holds", "violated"):
            raise ValueError(f"expect={expect!r}: use 'holds' or 'violated'")
        v = certify(adapter, level, operator=operator, budget=budget, seed=seed, server=toki_server, mode=mode)
        if expect == "holds" and not v.contract_holds:
            w = v.witness
            pytest.fail(f"{v.adapter}: {v.operator} at {v.level} admits {v.anomaly}: "
                        + "; ".join(w.anomalies) + "\nminimal witness (toki run FILE --level "
                        + f"{w.level.isolation.cli_name}):\n{w.toml}", pytrace=False)
        if expect == "violated" and v.contract_holds:
            pytest.fail(f"{v.adapter}: no {v.anomaly} found for {v.operator} at {v.level} in {v.examples} examples",
                        pytrace=False)
        return v

    return run


@pytest.fixture
def toki_certify_engine():
    """``certify_engine(engine, scenario, *, budget=100, seed=0, expect="excludes", fail_on_design=False,
    exhaustive=None, pct=None, baseline=None, time_budget=None, strategy=None)``.

    Certifies ``scenario`` of ``engine`` (toki's name for it, a ``module:factory`` string, or an
    engine object implementing :mod:`toki.harness.engine`) with :func:`toki.harness.certify`, the
    verdicts of ``toki certify --engine``. With ``expect="excludes"`` (default) the test fails when
    an anomaly is found, with the anomalies and the minimal grant sequence in the message; with
    ``expect="admits"`` it fails when none is found. A by-design finding (a property serial orders
    show too) is not an anomaly: it fails the test only with ``fail_on_design=True``, and is named
    when an expected anomaly is missing. An unverifiable run (the engine did something the harness
    did not control, or its read-out is empty) fails either way, with the reason; a plug-in whose
    own method raises fails with one line naming the method.

    The search is random (``budget`` Hypothesis tapes) unless a strategy's option names another, as
    ``toki certify``'s do: ``exhaustive=K`` searches every interleaving with at most K preemptions
    (``budget`` then caps the runs only when given), and an "excludes" must be a complete
    certificate; ``pct=D`` draws ``budget`` PCT schedules. ``strategy=`` takes a strategy object
    (:class:`toki.harness.Exhaustive`, ...) instead.

    ``baseline="FILE"`` (a file ``toki certify --write-baseline FILE`` wrote, reasons edited) gates
    as ``toki certify --baseline FILE`` does: the test fails only on a verdict worse than the file
    accepts (a race or anomaly kind it does not list for the scenario, an unverifiable run, with
    ``fail_on_design`` a by-design finding it does not list), and says which. ``time_budget=S``
    ends the search after S seconds: a search cut short with nothing found fails the test as "not
    certified" (never a silent pass). Returns the :class:`toki.harness.Verdict` (``admits``,
    ``found``, ``tried``, ``search``, as the former ``Certificate``).
    """
    import time

    from toki.engines.registry import load_engine
    from toki.errors import ConfigError
    import toki.harness
    from toki.harness import (Baseline, Decision, PluginError, Random, anomaly_of, certify, connect_database,
                              context_switches)

    def kinds(findings):
        return sorted({anomaly_of(f) for f in findings})

    def run(engine, scenario, *, budget=None, seed=0, expect="excludes", fail_on_design=False, baseline=None,
            time_budget=None, strategy=None, **search):
        started = time.monotonic()
        if expect not in ("excludes", "admits"):
            raise ValueError(f"expect={expect!r}: use 'excludes' or 'admits'")
        options = {o.name.replace("-", "_"): o for o in toki.harness.strategy_options()}  # --pct D: pct=D
        unknown = sorted(set(search) - set(options))
        if unknown:
            raise TypeError(f"toki_certify_engine got an unexpected keyword argument {unknown[0]!r} (searches: "
                            + ", ".join(f"{n}=" for n in options) + ")")
        given = [(n, options[n], search[n]) for n in options if search.get(n) is not None]
        if len(given) + (strategy is not None) > 1:
            named = [f"{n}=" for n, _, _ in given] + (["strategy="] if strategy is not None else [])
            raise ValueError(f"{' and '.join(named)} are {'two' if len(named) == 2 else len(named)} ways to search; "
                             "pass one")
        if baseline is not None and expect != "excludes":
            raise ValueError("baseline= gates a test that expects no new race; leave expect='excludes'")
        if time_budget is not None and not 0 < time_budget < float("inf"):
            raise ValueError(f"time_budget={time_budget!r}: a positive number of seconds")
        try:
            base = Baseline.load(baseline) if baseline is not None else None
        except ConfigError as e:
            pytest.fail(str(e), pytrace=False)
        _, option, value = given[0] if given else (None, None, None)
        if strategy is None:
            if budget is None:
                budget = option.default_budget if option is not None else 100
            strategy = option.make(value, budget=budget, seed=seed) if option is not None else \
                Random(budget=budget, seed=seed)
        certifies = getattr(strategy, "certifies", False)  # an exhaustive search must be complete to exclude
        if isinstance(engine, str):
            engine = load_engine(None, engine) if ":" in engine else load_engine(engine, None)
        if base is not None:
            try:
                base.check_engine(engine)
            except ConfigError as e:
                pytest.fail(str(e), pytrace=False)
        connect_database(engine, None)
        where = f"{engine.name} {scenario}"
        deadline = None if time_budget is None else started + time_budget
        try:
            v = certify(engine, scenario, strategy, deadline=deadline)
        except PluginError as e:
            pytest.fail(f"{where}: {e}", pytrace=False)  # the message names the method and its fix
        if v.decision is Decision.UNVERIFIABLE and not v.silent:
            pytest.fail(f"{where} is unverifiable: {v.error}", pytrace=False)
        if v.silent:
            pytest.fail(f"{where}: the engine's state() is empty in every serial order; a check told nothing "
                        "cannot pass", pytrace=False)
        if v.decision is Decision.OUT_OF_TIME:
            pytest.fail(f"{where}: not certified: {v.searched.guarantee}", pytrace=False)
        design = v.serial_findings[0] if v.serial_findings else None
        complete = v.searched.complete

        def witness(f):
            return (f"\nminimal interleaving ({context_switches(f.trace)} context switches), grants:\n"
                    + " ".join(f.trace.grants))

        if base is not None:
            judged = base.compare(scenario, v.decision.value, kinds(v.found.anomalies) if v.admits else [],
                                  kinds(v.serial_findings), fail_on_design=fail_on_design)
            if judged["fails"]:
                f = v.found
                pytest.fail(f"{where}: worse than baseline {base.path}: " + "; ".join(judged["says"])
                            + ("" if f is None else "\n" + "; ".join(f.anomalies) + witness(f)), pytrace=False)
            if certifies and not v.admits and not complete:
                pytest.fail(f"{where}: {v.searched.guarantee}", pytrace=False)
            return v
        if expect == "excludes" and v.admits:
            f = v.found
            pytest.fail(f"{where} admits: " + "; ".join(f.anomalies) + witness(f), pytrace=False)
        if expect == "excludes" and certifies and not complete:
            pytest.fail(f"{where}: {v.searched.guarantee}", pytrace=False)
        if fail_on_design and design:
            pytest.fail(f"{where}: by design (a serial order shows it): {design}", pytrace=False)
        if expect == "admits" and not v.admits:
            pytest.fail(f"{where}: no anomaly in {v.tried} examples"
                        + (f" (by design, which serial orders show too: {design})" if design else ""), pytrace=False)
        return v

    return run
