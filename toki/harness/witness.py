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

    @property
    def context_switches(self) -> int:
        return context_switches(self.steps)

    @classmethod
    def from_trial(cls, engine, scenario: str, trial: TrialResult, *, seed: int, budget: int,
                   provenance: dict | None = None) -> "Witness":
        return cls(engine.name, _module_of(engine), str(engine.version), getattr(engine, "executed", "real"),
                   scenario, seed, budget, list(trial.trace.grants), list(trial.anomalies), list(trial.trace.steps),
                   digest(trial.outcome.key), trial.outcome.state, provenance or {})

    @classmethod
    def from_serial(cls, engine, scenario: str, trace, outcome, findings: list[str], *, seed: int,
                    budget: int) -> "Witness":
        """A witness of a property of the design: a serial run that shows it."""
        return cls(engine.name, _module_of(engine), str(engine.version), getattr(engine, "executed", "real"),
                   scenario, seed, budget, list(trace.grants), list(findings), list(trace.steps),
                   digest(outcome.key), outcome.state)

    def to_json(self) -> dict:
        return {"toki_witness": FORMAT, "engine": self.engine, "engine_module": self.engine_module,
                "version": self.version, "executed": self.executed, "scenario": self.scenario, "seed": self.seed,
                "budget": self.budget, "context_switches": self.context_switches, "anomalies": self.anomalies,
                "outcome": self.outcome, "state": self.state, "grants": self.grants,
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
            return cls(d["engine"], d.get("engine_module"), str(d.get("version", "")), d.get("executed", "real"),
                       d["scenario"], int(d.get("seed", 0)), int(d.get("budget", 0)), list(d["grants"]),
                       list(d.get("anomalies", [])), [StepRecord.from_json(s) for s in d.get("steps", [])],
                       str(d.get("outcome", "")), d.get("state"), d.get("provenance", {}))
        except (TypeError, ValueError, AttributeError) as e:  # a field of the wrong shape (hand-edited, cut)
            raise ConfigError(f"witness {p} has a field of the wrong type ({type(e).__name__}: {str(e)[:80]})",
                              fix="re-create it with toki certify --witness") from None
