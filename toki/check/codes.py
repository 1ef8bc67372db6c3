"""The codes a history's columns hold: op types and micro-op functions. The checker's lowest
module (it imports nothing), so that the readers, the semantics and the compiled twins all name
the same codes."""

OK, INFO, FAIL, INVOKE = 0, 1, 2, 3
TYPE_CODES = {"ok": OK, "info": INFO, "fail": FAIL, "invoke": INVOKE}
TYPE_NAMES = {OK: "ok", INFO: "info", FAIL: "fail", INVOKE: "invoke"}
R, APPEND, W = 0, 1, 2
F_CODES = {"r": R, "append": APPEND, "w": W}
F_NAMES = {R: "r", APPEND: "append", W: "w"}
