"""Full recomputation oracles for the cep_core.windows tests (exact, with Fractions)."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import strategies as st

NAMES = ("count", "sum", "avg", "var", "min", "max")

values = st.one_of(
    st.none(), st.just(math.nan),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    st.integers(-5, 5).map(float),
    st.sampled_from([0.1, 0.2, 0.3, 1e-300, -0.0, 123456.789]))


def expect(name: str, raw: list[float | None]) -> float | None:
    """The aggregate recomputed from scratch over ``raw`` (NULL/NaN ignored)."""
    vals = [v for v in raw if v is not None and v == v]
    n = len(vals)
    if name == "count":
        return float(n)
    if not vals:
        return None
    if name == "min":
        return min(vals)
    if name == "max":
        return max(vals)
    total = sum((Fraction(v) for v in vals), Fraction(0))
    if name == "sum":
        return float(total)
    mean = total / n
    if name == "avg":
        return float(mean)
    if n < 2:
        return None
    return float(sum(((Fraction(v) - mean) ** 2 for v in vals), Fraction(0)) / (n - 1))


def close(got: float | None, want: float | None) -> bool:
    if got is None or want is None:
        return got is None and want is None
    return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)


def assert_close(got: dict[str, float | None], raw: list[float | None], where: object) -> None:
    for name, value in got.items():
        want = expect(name, raw)
        assert close(value, want), (where, name, value, want, raw)
