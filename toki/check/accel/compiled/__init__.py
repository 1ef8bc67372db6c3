"""The compiled twins: numba kernels, one module per numpy module they stand in for (``ranges``
for :mod:`toki.check.accel.ranges`, ``joins`` for :mod:`toki.check.joins`, ``transactions`` for
the pairing in :mod:`toki.check.reading.history`, ``json_scan`` for
:mod:`toki.check.reading.json_scan`, ``memory_scan`` for :mod:`toki.check.reading.memory`).

Each imports numba when it is imported; nothing imports them but :func:`toki.check.accel.load`,
which the one policy (:func:`toki.check.accel.compiled_twin`) calls. Kernels are compiled with
``cache=True`` and never with ``inline="always"`` on a large function (that made compiles take
minutes).
"""
