"""Findings as data: what a detector (or the harness) found, made where it fires.

A :class:`Finding` carries ``anomaly`` (the detector's name: ``lost-update``, ``double-supersede``,
``failed-call``, ``non-serializable``...), ``message`` (for people) and ``evidence`` (JSON values).
Callers read ``finding.anomaly``; nothing cuts a string apart to learn the kind.

For one release a Finding is also the string ``"anomaly: message"`` it used to be (a ``str``
subclass): plug-ins, scripts and result files written when findings were strings keep working,
and the JSON toki writes (verdict rows, witnesses) is unchanged. Text read back from such a file
becomes a Finding again through :meth:`Finding.parse`, the one place a finding's text is split.
"""

from __future__ import annotations

from typing import Any, Mapping


class Finding(str):
    anomaly: str
    message: str
    evidence: dict

    def __new__(cls, anomaly: str, message: str, evidence: Mapping[str, Any] | None = None) -> "Finding":
        self = super().__new__(cls, f"{anomaly}: {message}")
        self.anomaly, self.message, self.evidence = anomaly, message, dict(evidence or {})
        return self

    @classmethod
    def parse(cls, text: str) -> "Finding":
        """A finding stored as its text (a witness file, a verdict row): ``"anomaly: message"``."""
        if isinstance(text, Finding):
            return text
        anomaly, sep, message = str(text).partition(": ")
        if not sep:
            anomaly, _, message = str(text).partition(":")
        return cls(anomaly.strip(), message.strip())

    def to_json(self) -> dict:
        return {"anomaly": self.anomaly, "message": self.message, "evidence": self.evidence}

    def __reduce__(self):  # pickled across processes (sharded searches, Dask) as data, not as text
        return (Finding, (self.anomaly, self.message, self.evidence))


class DesignFinding(Finding):
    """A finding of an ``always`` detector in serial orders: a property of the design, reported
    apart from races. ``orders`` of ``of`` serial orders show it."""

    orders: int
    of: int

    def __new__(cls, finding: Finding, orders: int, of: int) -> "DesignFinding":
        self = str.__new__(cls, f"by design (in {orders} of {of} serial orders): {finding}")
        self.anomaly, self.message, self.evidence = finding.anomaly, finding.message, finding.evidence
        self.orders, self.of = orders, of
        return self

    @property
    def finding(self) -> Finding:
        return Finding(self.anomaly, self.message, self.evidence)

    def __reduce__(self):
        return (DesignFinding, (self.finding, self.orders, self.of))


def anomaly_of(finding: str) -> str:
    """The anomaly a finding names, whether a Finding or text read back from a file."""
    return finding.anomaly if isinstance(finding, Finding) else Finding.parse(finding).anomaly
