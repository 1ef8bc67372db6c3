"""The z3 wrapper: three verdicts, and unknown is never proved."""

from toki.verify import solver as S


def test_true_claim_is_proved():
    x = S.Int("x")
    ans = S.prove(x + 1 > x)
    assert ans.verdict is S.Verdict.PROVED and ans.model is None


def test_false_claim_is_refuted_with_a_countermodel():
    x, y = S.Ints("x y")
    ans = S.prove(x * 2 != y, assumptions=[x >= 0])
    assert ans.verdict is S.Verdict.REFUTED
    cm = ans.show({"x": x, "y": y})
    assert cm["y"] == 2 * cm["x"] and cm["x"] >= 0


def test_timeout_is_unknown_never_proved():
    # x^3 + y^3 = z^3 has no positive solution (Fermat, n = 3): true, but far beyond a 1 ms budget.
    x, y, z = S.Ints("x y z")
    claim = x * x * x + y * y * y != z * z * z
    ans = S.prove(claim, assumptions=[x > 0, y > 0, z > 0], timeout_s=0.001)
    assert ans.verdict in (S.Verdict.UNKNOWN, S.Verdict.PROVED)
    assert ans.verdict is S.Verdict.UNKNOWN, "a 1 ms budget cannot settle Fermat's cubic case"
    assert ans.reason


def test_search_minimises():
    x = S.Int("x")
    ans = S.search([x >= 3, x <= 100], minimise=x, max_rounds=20)
    assert ans.verdict is S.Found.FOUND and ans.model(x) == 3
    assert S.search([x > 1, x < 1]).verdict is S.Found.NONE


def test_only_solver_imports_z3():
    import pathlib

    import toki.verify

    root = pathlib.Path(toki.verify.__file__).parent
    offenders = [p.name for p in root.glob("*.py") if p.name != "solver.py" and "import z3" in p.read_text()]
    assert offenders == []
