"""Hypothesis settings profiles for toki's property suites: ``dev``, ``ci`` and ``paper``.

* ``dev`` - randomised, no deadline (database round trips vary), the example database on, a
  modest budget: for working on the suites;
* ``ci`` - derandomised (the same examples on every run), no deadline, no example database,
  small budgets: a gate that costs seconds and never flakes on a slow runner;
* ``paper`` - large budgets for the numbers quoted in the README (minutes, not for CI).

:func:`load_profile` picks one: an explicit name, else ``$TOKI_HYPOTHESIS_PROFILE``, else
``ci`` when ``$CI`` is set, else ``dev``. The pytest plugin exposes ``--toki-profile``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

from toki.errors import ConfigError

PROFILES = ("dev", "ci", "paper")
#: examples per database search (a contract cell, a stateful run) in each profile
BUDGETS = {"dev": 60, "ci": 25, "paper": 2000}

_SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
_registered = False


def register_profiles() -> None:
    global _registered
    if _registered:
        return
    # dev and ci keep Hypothesis's default example count for ordinary @given tests; the
    # database searches (contract cells, stateful runs) take theirs from budget().
    settings.register_profile("dev", deadline=None, suppress_health_check=_SLOW)
    settings.register_profile("ci", derandomize=True, deadline=None, database=None, print_blob=True,
                              suppress_health_check=_SLOW)
    settings.register_profile("paper", deadline=None, database=None, max_examples=1000,
                              stateful_step_count=50, suppress_health_check=_SLOW)
    _registered = True


def profile_name(name: str | None = None) -> str:
    chosen = name or os.environ.get("TOKI_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
    if chosen not in PROFILES:
        raise ConfigError(f"unknown Hypothesis profile {chosen!r}",
                          fix=f"use one of {', '.join(PROFILES)} (--toki-profile or $TOKI_HYPOTHESIS_PROFILE)")
    return chosen


def load_profile(name: str | None = None) -> str:
    """Register the profiles and load one (see the module doc for how it is chosen)."""
    register_profiles()
    chosen = profile_name(name)
    settings.load_profile(chosen)
    return chosen


def budget(name: str | None = None) -> int:
    """Examples per search in the current (or named) profile."""
    return BUDGETS[profile_name(name)]
