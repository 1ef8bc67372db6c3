"""The stateful machine over the Store on the real database (every operator and schema mode)."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from toki.properties.machine import store_machine

pytestmark = pytest.mark.db


@pytest.mark.slow
def test_store_machine(toki_server):
    machine = store_machine(toki_server)
    try:
        run_state_machine_as_test(machine, settings=settings(max_examples=25, stateful_step_count=15,
                                                             deadline=None, database=None,
                                                             report_multiple_bugs=False))
    finally:
        if "store" in machine.shared:
            machine.shared["store"].close()
