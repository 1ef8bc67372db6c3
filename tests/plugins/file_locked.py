"""A JSON counter guarded by a file lock, written from docs/engines.md as a new user would: the
commonest ways Python code guards a file.

- ``racy``: no lock (a lost update, which toki must find);
- ``flock``: a blocking ``fcntl.flock(LOCK_EX)`` on ``c.json.lock`` (correct: certified);
- ``polled``: the ``filelock`` package's ``FileLock`` (``flock(LOCK_NB)``, close, ``sleep``, retry;
  correct: certified, and never a false "hangs");
- ``lockf``: ``fcntl.lockf``, a POSIX record lock, which belongs to the process: the agents are
  threads of one process, so it excludes nothing (a lost update, as real threads show).
"""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

from toki.harness import Detector, Scenario


def _lost(state, errors):
    return [f"counter is {state['n']} after two increments"] if state.get("n") == 1 else []


class FileLockedCounter:
    version, executed = "1.0", "real"

    def __init__(self, how: str):
        self.how = how
        self.name = f"file-locked-{how}"
        self.scenarios = {"increment": Scenario("increment", "two agents add one to n in c.json", ("A", "B"),
                                                self.call, setup=self.setup,
                                                detectors=(Detector("lost-update", _lost),))}

    def open(self, location):
        return Path(location)

    def close(self, folder) -> None:
        pass

    def setup(self, folder) -> None:
        (folder / "c.json").write_text('{"n": 0}')

    def state(self, folder):
        return json.loads((folder / "c.json").read_text())

    def _increment(self, folder: Path) -> None:
        with open(folder / "c.json") as f:
            n = json.load(f)["n"]
        with open(folder / "c.json", "w") as f:
            json.dump({"n": n + 1}, f)

    def call(self, folder, agent):
        lock = folder / "c.json.lock"
        if self.how == "racy":
            self._increment(folder)
        elif self.how == "flock":
            with open(lock, "a") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                try:
                    self._increment(folder)
                finally:
                    fcntl.flock(f, fcntl.LOCK_UN)
        elif self.how == "polled":
            import filelock

            with filelock.FileLock(str(lock), poll_interval=0.05):
                self._increment(folder)
        elif self.how == "lockf":
            with open(lock, "a") as f:
                fcntl.lockf(f, fcntl.LOCK_EX)
                try:
                    self._increment(folder)
                finally:
                    fcntl.lockf(f, fcntl.LOCK_UN)


def racy():
    return FileLockedCounter("racy")


def flock():
    return FileLockedCounter("flock")


def polled():
    return FileLockedCounter("polled")


def lockf():
    return FileLockedCounter("lockf")
