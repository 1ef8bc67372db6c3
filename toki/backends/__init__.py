"""The one seam between toki and a database (layer 4: may import model, levels, errors only).

Connect from a DSN, begin a transaction at a level, ask whether a session is blocked, classify
an error, reset a session. The schedule runner (``toki.sched``) and the engine harness
(``toki.engines``) both talk to databases through it. Each backend lives in its own module and
is chosen by the DSN's scheme (:func:`for_dsn`).
"""

from toki.backends.base import Backend, Classified, ErrorKind, UnsupportedLevel
from toki.backends.dsn import for_dsn, scheme_of

__all__ = ["Backend", "Classified", "ErrorKind", "UnsupportedLevel", "for_dsn", "scheme_of"]
