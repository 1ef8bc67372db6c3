"""PostgreSQL isolation tester ``.spec`` files, so PostgreSQL's own isolation specs run unchanged.

Grammar (src/test/isolation/specparse.y): ``setup { SQL }`` and ``teardown { SQL }`` blocks,
``session NAME`` with its own optional setup, ``step NAME { SQL }`` and teardown, and
``permutation`` lines whose steps may carry blocking markers: ``s1(s2)`` waits for step s2,
``s1(*)`` waits until some other step completes, ``s1(notices 1)`` waits for a notice. With no
permutation line, every interleaving that keeps each session's order is run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from toki.errors import ScheduleError
from toki.sched.schedule import Schedule, Step


@dataclass
class SpecSession:
    name: str
    setup: list[str] = field(default_factory=list)
    steps: dict[str, str] = field(default_factory=dict)  # name -> SQL, in file order
    teardown: list[str] = field(default_factory=list)


@dataclass
class PermStep:
    name: str
    blockers: tuple[str, ...] = ()
    star: bool = False


@dataclass
class SpecFile:
    name: str
    source: str
    setup: list[str]
    teardown: list[str]
    sessions: list[SpecSession]
    permutations: list[list[PermStep]]

    def step_session(self) -> dict[str, str]:
        return {step: s.name for s in self.sessions for step in s.steps}

    def all_permutations(self) -> list[list[PermStep]]:
        if self.permutations:
            return self.permutations
        lists = [[PermStep(n) for n in s.steps] for s in self.sessions]
        return [list(p) for p in _interleavings(lists)]

    def schedules(self) -> list[Schedule]:
        owner = self.step_session()
        sqls = {step: sql for s in self.sessions for step, sql in s.steps.items()}
        out = []
        for perm in self.all_permutations():
            steps = []
            for ps in perm:
                if ps.name not in owner:
                    raise ScheduleError(f"{self.source}: permutation names unknown step {ps.name!r}",
                                        fix=f"steps are {sorted(owner)}")
                steps.append(Step(session=owner[ps.name], sql=sqls[ps.name], name=ps.name,
                                  await_steps=ps.blockers, star_marker=ps.star))
            out.append(Schedule(
                name=self.name, steps=steps, setup=list(self.setup), teardown=list(self.teardown),
                session_setup={s.name: s.setup for s in self.sessions if s.setup},
                session_teardown={s.name: s.teardown for s in self.sessions if s.teardown},
                on_blocked="defer", source=self.source,
                sessions_declared=tuple(s.name for s in self.sessions),
            ).validate())
        return out


def _interleavings(lists):
    lists = [lst for lst in lists if lst]
    if not lists:
        yield ()
        return
    for i, lst in enumerate(lists):
        rest = lists[:i] + [lst[1:]] + lists[i + 1:]
        for tail in _interleavings(rest):
            yield (lst[0],) + tail


_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<sql>\{)
  | (?P<lparen>\()
  | (?P<rparen>\))
  | (?P<comma>,)
  | (?P<star>\*)
  | (?P<qident>"(?:[^"]|"")*")
  | (?P<int>[0-9]+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
""", re.VERBOSE)


def _read_sql(text: str, pos: int, source: str) -> tuple[str, int]:
    """Read an SQL block after '{' up to its closing '}' (quotes respected)."""
    i, depth = pos, 0
    while i < len(text):
        ch = text[i]
        if ch in ("'", '"'):
            j = text.find(ch, i + 1)
            while j != -1 and j + 1 < len(text) and text[j + 1] == ch:
                j = text.find(ch, j + 2)
            if j == -1:
                break
            i = j + 1
            continue
        if ch == "-" and text.startswith("--", i):
            nl = text.find("\n", i)
            i = len(text) if nl == -1 else nl
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            if depth == 0:
                return text[pos:i].strip(), i + 1
            depth -= 1
        i += 1
    line = text.count("\n", 0, pos) + 1
    raise ScheduleError(f"{source}:{line}: SQL block is never closed", fix="close it with '}'")


def _tokens(text: str, source: str):
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            line = text.count("\n", 0, pos) + 1
            raise ScheduleError(f"{source}:{line}: unexpected {text[pos]!r}",
                                fix="see PostgreSQL's src/test/isolation/README for the spec syntax")
        kind = m.lastgroup
        if kind == "sql":
            sql, pos = _read_sql(text, m.end(), source)
            yield "sql", sql, text.count("\n", 0, m.start()) + 1
            continue
        pos = m.end()
        if kind in ("ws", "comment"):
            continue
        value = m.group()
        if kind == "qident":
            kind, value = "ident", value[1:-1].replace('""', '"')
        yield kind, value, text.count("\n", 0, m.start()) + 1


def parse_spec(text: str, source: str = "<spec>") -> SpecFile:
    from pathlib import Path

    toks = list(_tokens(text, source))
    i = 0
    setup: list[str] = []
    teardown: list[str] = []
    sessions: list[SpecSession] = []
    perms: list[list[PermStep]] = []

    def expect(kind: str, what: str):
        nonlocal i
        if i >= len(toks) or toks[i][0] != kind:
            got = toks[i][1] if i < len(toks) else "end of file"
            line = toks[i][2] if i < len(toks) else text.count("\n") + 1
            raise ScheduleError(f"{source}:{line}: expected {what}, got {got!r}",
                                fix="see PostgreSQL's src/test/isolation/README for the spec syntax")
        i += 1
        return toks[i - 1][1]

    while i < len(toks):
        kind, value, line = toks[i]
        word = value.lower() if kind == "ident" else None
        if word == "setup" and not sessions:
            i += 1
            setup.append(expect("sql", "an SQL block { ... } after setup"))
        elif word == "teardown" and not sessions:
            i += 1
            teardown.append(expect("sql", "an SQL block after teardown"))
        elif word == "session":
            i += 1
            sess = SpecSession(expect("ident", "a session name"))
            while i < len(toks) and toks[i][0] == "ident" and toks[i][1].lower() in ("setup", "step", "teardown"):
                w = toks[i][1].lower()
                i += 1
                if w == "setup":
                    sess.setup.append(expect("sql", "an SQL block after setup"))
                elif w == "teardown":
                    sess.teardown.append(expect("sql", "an SQL block after teardown"))
                else:
                    name = expect("ident", "a step name")
                    if any(name in s.steps for s in sessions) or name in sess.steps:
                        raise ScheduleError(f"{source}:{toks[i - 1][2]}: step name {name!r} is used twice",
                                            fix="step names must be unique across sessions")
                    sess.steps[name] = expect("sql", f"an SQL block for step {name}")
            if not sess.steps:
                raise ScheduleError(f"{source}:{line}: session {sess.name!r} has no steps", fix="add step NAME { SQL }")
            sessions.append(sess)
        elif word == "permutation":
            i += 1
            perm: list[PermStep] = []
            while i < len(toks) and toks[i][0] == "ident" and toks[i][1].lower() not in ("permutation",):
                name = toks[i][1]
                i += 1
                blockers: list[str] = []
                star = False
                if i < len(toks) and toks[i][0] == "lparen":
                    i += 1
                    while i < len(toks) and toks[i][0] != "rparen":
                        k, v, _ = toks[i]
                        if k == "star":
                            star = True
                        elif k == "ident" and v.lower() == "notices":
                            i += 1  # "notices N": wait for N notices; treated as a plain wait marker
                            star = True
                        elif k == "ident":
                            blockers.append(v)
                        elif k not in ("comma", "int"):
                            raise ScheduleError(f"{source}:{toks[i][2]}: bad blocker marker {v!r}",
                                                fix="write step(other_step) or step(*)")
                        i += 1
                    expect("rparen", "')' after blocker markers")
                perm.append(PermStep(name, tuple(blockers), star))
            if not perm:
                raise ScheduleError(f"{source}:{line}: empty permutation", fix="list step names after permutation")
            perms.append(perm)
        else:
            raise ScheduleError(f"{source}:{line}: unexpected {value!r}",
                                fix="a spec has setup, teardown, session and permutation blocks")
    if not sessions:
        raise ScheduleError(f"{source}: no sessions", fix="add session NAME with step NAME { SQL } blocks")
    spec = SpecFile(Path(source).stem if source != "<spec>" else "spec", source, setup, teardown, sessions, perms)
    owner = spec.step_session()
    for perm in perms:
        for ps in perm:
            for name in (ps.name, *ps.blockers):
                if name not in owner:
                    raise ScheduleError(f"{source}: permutation names unknown step {name!r}",
                                        fix=f"steps are {sorted(owner)}")
    return spec


__all__ = ["SpecFile", "SpecSession", "PermStep", "parse_spec"]
