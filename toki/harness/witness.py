"""Witness files: a found anomaly as data that ``toki certify --replay FILE`` re-executes.

A witness records the engine (toki's name for it, or the ``module:factory`` it was loaded from),
the engine's version, whether it ran for real or as a model, the scenario, the search seed and
budget, the grant sequence (one agent name per granted storage call), the steps as they ran, the
anomalies found, and a digest of the outcome, so a replay can say whether it reproduced the same
outcome, not merely some anomaly.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toki.harness.controller import StepRecord
from toki.harness.search import context_switches
from toki.harness.trial import TrialResult
from toki.errors import ConfigError

FORMAT = 1


def _module_of(engine) -> str | None:
    """The ``module:factory`` a replay loads the engine from; None for an engine toki ships (the
    loader marks those, so the witness names it by toki's name and survives a module move)."""
    return None if getattr(engine, "_toki_shipped", False) else getattr(engine, "_toki_spec", None)


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
    anomalies: list[str]
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
                       list(d.get("anomalies", [])), [StepRecord.from_json(s) for s in d.get("steps", [])],
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
