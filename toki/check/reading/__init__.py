"""Reading histories into columns: Jepsen histories (:mod:`~toki.check.reading.history`: op maps,
JSON, EDN, and the pairing of invocations with completions), the vectorised scanner of JSON and
Jepsen's EDN (:mod:`~toki.check.reading.json_scan`), and memory histories
(:mod:`~toki.check.reading.memory`). A fast reader accepts a strict subset and hands anything
else to the general one, which decides what is accepted and names a bad op; none decides an
anomaly."""
