"""A store that binds ``fsync`` at import, as some libraries do (``from os import fsync``)."""

from __future__ import annotations

import os
from os import fsync
from pathlib import Path

from toki.harness import Scenario


class FsyncAlias:
    name, version, executed = "fsync-alias", "1.0", "real"

    def __init__(self, durable: bool = False):
        self.durable = durable
        self.scenarios = {"put": Scenario("put", "one durable put", ("A",), self.call)}

    def open(self, location):
        return Path(location)

    def close(self, folder) -> None:
        pass

    def state(self, folder):
        p = folder / "v.txt"
        return {"v": p.read_text() if p.exists() else None}

    def call(self, folder, agent):
        fd = os.open(folder / "v.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            os.write(fd, agent.encode())
            fsync(fd)
        finally:
            os.close(fd)
        if self.durable:  # the file's creation is durable once its directory is fsynced
            d = os.open(folder, os.O_RDONLY)
            try:
                fsync(d)
            finally:
                os.close(d)


def engine():
    return FsyncAlias()


def durable():
    return FsyncAlias(durable=True)
