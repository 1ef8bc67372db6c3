"""Witness files: a found anomaly as data that ``toki certify --replay FILE`` re-executes.

A witness records the engine (toki's name for it, or the ``module:factory`` it was loaded from),
the engine's version, whether it ran for real or as a model, the scenario, the search seed and
budget, the grant sequence (one agent name per granted storage call), the steps as they ran, the
anomalies found, and a digest of the outcome, so a replay can say whether it reproduced the same
outcome, not merely some anomaly.

A *baseline* (:class:`Baseline`, ``toki certify --baseline FILE`` / ``--write-baseline FILE``)
records the findings a team has accepted, each with its reason: the races it lives with
(``[[race]]``) apart from the properties of the design (``[[by_design]]``). A gate with a
baseline fails only on a verdict worse than the file accepts (:meth:`Baseline.compare`).
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from datetime import datetime, timezone
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toki.harness.controller import StepRecord, context_switches
from toki.harness.engine import origin
from toki.harness.findings import Finding
from toki.harness.trial import TrialResult
from toki.errors import ConfigError

FORMAT = 1


def _module_of(engine) -> str | None:
    """The ``module:factory`` a replay loads the engine from; None for an engine toki ships (the
    loader marks those, so the witness names it by toki's name and survives a module move)."""
    found = origin(engine)
    return None if found is None or found[1] else found[0]


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass
class Witness:
    engine: str
    engine_module: str | None
    version: str
    executed: str
    scenario: str
    seed: int
    budget: int
    grants: list[str]
    anomalies: list[Finding]
    steps: list[StepRecord]
    outcome: str  # digest of the outcome key
    state: Any = None
    provenance: dict = field(default_factory=dict)
    # The outcome's other parts (None: not recorded, a witness from an older toki)
    errors: dict[str, str] | None = None
    completed: list[str] | None = None
    failed: dict[str, str] | None = None
    observed: dict[str, Any] | None = None

    @property
    def context_switches(self) -> int:
        return context_switches(self.steps)

    def _calls(self) -> list[StepRecord]:
        # Starting an agent touches no storage and is no switch (as context_switches counts them)
        return [s for s in sorted(self.steps, key=lambda s: s.seq) if s.kind != "start"]

    def runs(self) -> str:
        """The grant order as runs of one agent's storage calls: ``A×25 B×77 A×66``."""
        out: list[list] = []
        for s in self._calls():
            if out and out[-1][0] == s.agent:
                out[-1][1] += 1
            else:
                out.append([s.agent, 1])
        return " ".join(f"{a}×{n}" for a, n in out)

    def switches(self) -> list[dict]:
        """Each context switch: the grant where another agent takes over, its call there, and the
        call the paused agent makes when it next runs (None when it never does)."""
        calls = self._calls()
        out = []
        for i, (a, b) in enumerate(zip(calls, calls[1:])):
            if a.agent != b.agent:
                resume = next((s for s in calls[i + 2:] if s.agent == a.agent), None)
                out.append({"seq": b.seq, "from": a.agent, "to": b.agent, "call": b.detail,
                            "paused_before": None if resume is None else {"seq": resume.seq, "call": resume.detail}})
        return out

    @classmethod
    def from_trial(cls, engine, scenario: str, trial: TrialResult, *, seed: int, budget: int,
                   provenance: dict | None = None) -> "Witness":
        return cls(engine.name, _module_of(engine), str(engine.version), getattr(engine, "executed", "real"),
                   scenario, seed, budget, list(trial.trace.grants), list(trial.anomalies), list(trial.trace.steps),
                   digest(trial.outcome.key), trial.outcome.state, provenance or {}, **_parts(trial.outcome))

    @classmethod
    def from_serial(cls, engine, scenario: str, trace, outcome, findings: list[str], *, seed: int,
                    budget: int) -> "Witness":
        """A witness of a property of the design: a serial run that shows it."""
        return cls(engine.name, _module_of(engine), str(engine.version), getattr(engine, "executed", "real"),
                   scenario, seed, budget, list(trace.grants), list(findings), list(trace.steps),
                   digest(outcome.key), outcome.state, **_parts(outcome))

    def differences(self, outcome, limit: int = 5) -> list[str]:
        """Where a replayed outcome differs from the recorded one: the first ``limit`` paths
        (``state.facts[2].status: 'active' recorded, 'superseded' replayed``); [] when equal."""
        found: list[str] = []
        for name, recorded in (("state", self.state), *_parts_of(self).items()):
            if recorded is None and name != "state":
                continue
            replayed = _parts(outcome)[name] if name != "state" else outcome.state
            _diff(_plain(recorded), _plain(replayed), name, found, limit)
        if not found and digest(outcome.key) != self.outcome:
            unknown = [k for k, v in _parts_of(self).items() if v is None]
            found.append(f"the recorded parts are equal; the outcome digest also covers {', '.join(unknown)}, which "
                         "an older toki did not record: record the witness again to compare them" if unknown else
                         "every recorded part is equal but the digest differs (an older toki computed it "
                         "differently): record the witness again")
        return found[:limit]

    def to_json(self) -> dict:
        return {"toki_witness": FORMAT, "engine": self.engine, "engine_module": self.engine_module,
                "version": self.version, "executed": self.executed, "scenario": self.scenario, "seed": self.seed,
                "budget": self.budget, "context_switches": self.context_switches, "anomalies": self.anomalies,
                "outcome": self.outcome, "state": self.state, **_parts_of(self), "grants": self.grants,
                "steps": [s.to_json() for s in self.steps], "provenance": self.provenance}

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_json(), indent=1, default=str) + "\n")
        return p

    @classmethod
    def load(cls, path: str | Path) -> "Witness":
        p = Path(path)
        try:
            d = json.loads(p.read_text())
        except (UnicodeDecodeError, IsADirectoryError):
            raise ConfigError(f"witness file {p} is not a text file", fix="pass the file --witness wrote") from None
        except FileNotFoundError:
            raise ConfigError(f"witness file {p} does not exist", fix="pass the file --witness wrote") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"witness file {p} is not JSON ({e.msg} at line {e.lineno})",
                              fix="pass a file written by toki certify --witness") from None
        if not isinstance(d, dict) or d.get("toki_witness") != FORMAT:
            raise ConfigError(f"{p} is not a toki engine witness (format {FORMAT})",
                              fix="pass a file written by toki certify --engine ... --witness FILE; schedule "
                                  "witnesses of --adapter replay with toki run FILE")
        missing = [k for k in ("engine", "scenario", "grants") if not d.get(k)]
        if missing:
            raise ConfigError(f"witness {p} lacks {', '.join(missing)}", fix="re-create it with toki certify --witness")
        try:
            parts = {k: d.get(k) for k in _PARTS}
            for k, kind in (("errors", dict), ("completed", list), ("failed", dict)):
                if parts[k] is not None and not isinstance(parts[k], kind):
                    raise TypeError(f"{k} is not a {kind.__name__}")
            return cls(d["engine"], d.get("engine_module"), str(d.get("version", "")), d.get("executed", "real"),
                       d["scenario"], int(d.get("seed", 0)), int(d.get("budget", 0)), list(d["grants"]),
                       [Finding.parse(a) for a in d.get("anomalies", [])],
                       [StepRecord.from_json(s) for s in d.get("steps", [])],
                       str(d.get("outcome", "")), d.get("state"), d.get("provenance", {}), **parts)
        except (TypeError, ValueError, AttributeError) as e:  # a field of the wrong shape (hand-edited, cut)
            raise ConfigError(f"witness {p} has a field of the wrong type ({type(e).__name__}: {str(e)[:80]})",
                              fix="re-create it with toki certify --witness") from None


_PARTS = ("errors", "completed", "failed", "observed")


def _parts(outcome) -> dict:
    """The outcome's parts other than the state, as JSON values (completed as a sorted list)."""
    return {"errors": dict(outcome.errors), "completed": sorted(outcome.completed), "failed": dict(outcome.failed),
            "observed": outcome.observed}


def _parts_of(w: Witness) -> dict:
    return {k: getattr(w, k) for k in _PARTS}


def _plain(value: Any) -> Any:
    """``value`` as it reads back from the witness file (tuples become lists, keys strings)."""
    return json.loads(json.dumps(value, default=str))


def _diff(a: Any, b: Any, path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit or a == b:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in b:
                out.append(f"{path}.{k}: recorded {_short(a[k])}, missing in the replay")
            elif k not in a:
                out.append(f"{path}.{k}: not recorded, replayed {_short(b[k])}")
            else:
                _diff(a[k], b[k], f"{path}.{k}", out, limit)
            if len(out) >= limit:
                return
        return
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", out, limit)
        if len(a) != len(b) and len(out) < limit:
            extra = a[len(b):] if len(a) > len(b) else b[len(a):]
            out.append(f"{path}: {len(a)} items recorded, {len(b)} replayed "
                       f"({'recorded only' if len(a) > len(b) else 'replayed only'}: {_short(extra)})")
        return
    out.append(f"{path}: recorded {_short(a)}, replayed {_short(b)}")


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


# -- baselines: the findings a team has accepted -----------------------------------------------

BASELINE_FORMAT = 1
RACE_PLACEHOLDER = "TODO: say why the team accepts this race (who decided, and the issue that tracks it)"
DESIGN_PLACEHOLDER = "TODO: say why this property of the design is accepted"
_BASELINE_HEAD = """\
# Findings accepted for `toki certify --baseline FILE` (written by --write-baseline FILE).
# The gate fails only on a verdict worse than this file accepts: a race (an anomaly kind, in a
# scenario) not listed under [[race]], an unverifiable run, a search cut short by --time-budget,
# and, with --fail-on-design, a property of the design not listed under [[by_design]].
# Replace each TODO reason with why the team lives with the finding; review changes to this file.
"""


@dataclass
class Accepted:
    """One scenario's accepted findings: anomaly kinds (the detector names) and why."""

    scenario: str
    anomalies: list[str]
    reason: str
    extra: dict = field(default_factory=dict)  # what else the entry says (example, witness)

    @property
    def placeholder(self) -> bool:
        return self.reason.strip().upper().startswith("TODO")

    def to_toml(self) -> dict:
        return {"scenario": self.scenario, "anomalies": self.anomalies, "reason": self.reason,
                **{k: v for k, v in self.extra.items() if v is not None}}


@dataclass
class Baseline:
    """A file of accepted findings for one engine: races apart from by-design findings."""

    path: Path
    engine: str
    races: dict[str, Accepted] = field(default_factory=dict)
    by_design: dict[str, Accepted] = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> "Baseline":
        """Read and check a baseline; anything malformed is a :class:`ConfigError` naming the file
        and what is wrong with it (the CLI's one-line exit 2)."""
        p = Path(path)
        fix = f"record one with toki certify ... --write-baseline {p}, or fix the file"
        try:
            d = tomllib.loads(p.read_text())
        except FileNotFoundError:
            raise ConfigError(f"baseline {p} does not exist", fix=f"record one with toki certify ... "
                              f"--write-baseline {p}") from None
        except (UnicodeDecodeError, IsADirectoryError):
            raise ConfigError(f"baseline {p} is not a text file", fix=fix) from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"baseline {p} is not valid TOML ({e})", fix=fix) from None

        def bad(what: str):
            return ConfigError(f"baseline {p}: {what}", fix=fix)

        if d.get("format") != BASELINE_FORMAT:
            raise bad(f"format is {d.get('format')!r}, not {BASELINE_FORMAT} (not a toki baseline, or a newer toki's)")
        prov = d.get("provenance")
        if not isinstance(prov, dict) or not isinstance(prov.get("engine"), str) or not prov["engine"]:
            raise bad("[provenance] must name the engine (engine = \"NAME\")")
        unknown = sorted(set(d) - {"format", "provenance", "race", "by_design"})
        if unknown:
            raise bad(f"unknown table or key {', '.join(unknown)} (a baseline holds [provenance], [[race]] and "
                      "[[by_design]])")
        base = cls(p, prov["engine"], provenance=prov)
        for section, into in (("race", base.races), ("by_design", base.by_design)):
            entries = d.get(section, [])
            if not isinstance(entries, list):
                raise bad(f"{section} must be an array of tables ([[{section}]])")
            for i, e in enumerate(entries, 1):
                where = f"[[{section}]] entry {i}"
                if not isinstance(e, dict):
                    raise bad(f"{where} is not a table")
                sc, kinds, reason = e.get("scenario"), e.get("anomalies"), e.get("reason")
                if not isinstance(sc, str) or not sc:
                    raise bad(f"{where} has no scenario (scenario = \"NAME\")")
                if (not isinstance(kinds, list) or not kinds
                        or not all(isinstance(k, str) and k for k in kinds)):
                    raise bad(f"{where} ({sc}): anomalies must be a non-empty list of anomaly names")
                if not isinstance(reason, str) or not reason.strip():
                    raise bad(f"{where} ({sc}) has no reason (reason = \"why the team accepts it\")")
                if sc in into:
                    raise bad(f"[[{section}]] lists scenario {sc} twice (one entry per scenario)")
                extra = {k: v for k, v in e.items() if k not in ("scenario", "anomalies", "reason")}
                into[sc] = Accepted(sc, list(kinds), reason, extra)
        return base

    def check_engine(self, engine) -> list[str]:
        """Refuse a baseline of another engine (bad input); notes when the version or toki differ."""
        if engine.name != self.engine:
            raise ConfigError(f"baseline {self.path} was recorded for engine {self.engine}, not {engine.name}",
                              fix="pass the baseline of this engine, or record one with --write-baseline")
        notes = []
        was = self.provenance.get("version")
        if was is not None and str(was) != str(engine.version):
            notes.append(f"the baseline was recorded with {self.engine} {was}; this is {engine.version}")
        notes += [f"{kind} {a.scenario}: the reason is still the placeholder (edit {self.path})"
                  for kind, entries in (("race", self.races), ("by-design", self.by_design))
                  for a in entries.values() if a.placeholder]
        return notes

    def compare(self, scenario: str, verdict: str, anomalies: list[str], by_design: list[str], *,
                fail_on_design: bool = False) -> dict:
        """Judge one scenario's verdict against the accepted findings: ``{"status", "fails",
        "says"}``. ``anomalies`` and ``by_design`` are the kinds found (detector names). A race
        fails unless every kind found is accepted for the scenario; a by-design finding fails
        only with ``fail_on_design`` and unless accepted; an unverifiable run or one cut short by
        the time budget is never accepted (fail closed). ``status`` is the worst of: new-race,
        new-design, unverifiable, out-of-time; else accepted-race, accepted-design, by-design
        (a note), fixed (an accepted finding not seen this time), clean."""
        race, design = self.races.get(scenario), self.by_design.get(scenario)
        says: list[str] = []
        statuses: list[str] = []
        if verdict == "unverifiable":
            statuses.append("unverifiable")
            says.append("unverifiable: no baseline accepts a run the harness could not judge")
        if verdict == "out-of-time":
            statuses.append("out-of-time")
            says.append("not certified: the --time-budget ended the search (no baseline accepts an unfinished one)")
        found = sorted(set(anomalies))
        if verdict == "admits":
            new = [k for k in found if race is None or k not in race.anomalies]
            if new:
                statuses.append("new-race")
                says.append(f"NEW race: admits {', '.join(new)}, which the baseline does not accept "
                            + (f"(it accepts {', '.join(race.anomalies)} here)" if race
                               else "(it accepts no race in this scenario)"))
            else:
                statuses.append("accepted-race")
                says.append(f"accepted race: admits {', '.join(found)} (reason: {race.reason})")
        elif race is not None and verdict in ("excludes", "by-design"):
            statuses.append("fixed")
            says.append(f"fixed, or not found this time: the baseline accepts the race {', '.join(race.anomalies)} "
                        "here, which this run did not show (drop the entry once the fix is certain)")
        design_found = sorted(set(by_design))
        if design_found:
            new = [k for k in design_found if design is None or k not in design.anomalies]
            if not new:
                statuses.append("accepted-design")
                says.append(f"accepted by design: {', '.join(design_found)} (reason: {design.reason})")
            elif fail_on_design:
                statuses.append("new-design")
                says.append(f"NEW by-design finding: {', '.join(new)}, which the baseline does not accept "
                            "(--fail-on-design)")
            else:
                statuses.append("by-design")
                says.append(f"by design: {', '.join(new)}, not in the baseline (a note; --fail-on-design fails on it)")
        elif design is not None and verdict in ("excludes", "admits"):
            statuses.append("fixed")
            says.append(f"no longer shown: the baseline accepts {', '.join(design.anomalies)} by design here")
        order = ("new-race", "new-design", "unverifiable", "out-of-time", "accepted-race", "accepted-design",
                 "by-design", "fixed")
        status = min(statuses, key=order.index) if statuses else "clean"
        return {"status": status, "fails": status in ("new-race", "new-design", "unverifiable"), "says": says}

    @classmethod
    def record(cls, path: str | Path, findings: list[dict], *, engine, options: dict,
               previous: "Baseline | None" = None) -> tuple["Baseline", list[str]]:
        """Write a baseline of this run's findings (each ``{"scenario", "verdict", "anomalies",
        "by_design", "example", "design_example", "witness"}``, kinds as names), keeping
        ``previous``'s reasons where it accepted as much, and its entries for scenarios this run
        did not judge (not run, unverifiable, out of time). Returns it and what was not recorded."""
        base = cls(Path(path), engine.name)
        skipped: list[str] = []
        judged = set()
        for f in findings:
            sc, verdict = f["scenario"], f["verdict"]
            if verdict in ("unverifiable", "out-of-time"):
                skipped.append(f"{sc}: {verdict}, not recorded (a baseline accepts only findings)"
                               + (": its earlier entries are kept" if previous and (
                                   sc in previous.races or sc in previous.by_design) else ""))
                continue
            judged.add(sc)
            for kinds, into, was, placeholder, example in (
                    (f["anomalies"] if verdict == "admits" else [], base.races,
                     previous.races.get(sc) if previous else None, RACE_PLACEHOLDER, f.get("example")),
                    (f["by_design"], base.by_design, previous.by_design.get(sc) if previous else None,
                     DESIGN_PLACEHOLDER, f.get("design_example"))):
                if not kinds:
                    continue
                kinds = sorted(set(kinds))
                kept = was is not None and set(kinds) <= set(was.anomalies)
                extra = {"example": example}
                if into is base.races and f.get("witness"):
                    extra["witness"] = f["witness"]
                into[sc] = Accepted(sc, sorted(set(kinds) | set(was.anomalies if was else ())),
                                    was.reason if kept else placeholder, extra)
        if previous is not None:
            for mine, theirs in ((base.races, previous.races), (base.by_design, previous.by_design)):
                for sc, a in theirs.items():
                    if sc not in judged and sc not in mine:
                        mine[sc] = a
        base.provenance = {"toki_version": _toki_version(), "engine": engine.name,
                           "engine_module": _module_of(engine), "version": str(engine.version),
                           "executed": getattr(engine, "executed", "real"), "options": _no_none(options),
                           "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        base.save()
        return base, skipped

    def save(self) -> Path:
        import tomli_w

        doc = {"format": BASELINE_FORMAT, "provenance": _no_none(self.provenance),
               "race": [a.to_toml() for _, a in sorted(self.races.items())],
               "by_design": [a.to_toml() for _, a in sorted(self.by_design.items())]}
        doc = {k: v for k, v in doc.items() if v != []}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(_BASELINE_HEAD + tomli_w.dumps(doc))
        return self.path


def _toki_version() -> str:
    import toki

    return toki.__version__


def _no_none(value: Any) -> Any:
    """TOML has no null: drop None values (and empty tables they leave)."""
    if isinstance(value, dict):
        return {str(k): _no_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_no_none(v) for v in value if v is not None]
    return value
