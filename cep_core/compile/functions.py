"""Scalar SQL functions of DEFINE/MEASURES expressions: ``SCALAR_FUNCTIONS`` (ABS,
ROUND, SUBSTR, COALESCE...) and their implementations, CAST and LIKE; NULL in gives
NULL out."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..errors import QueryError
from ..language import ast
from .values import is_null


def modulo(a: Any, b: Any) -> Any:
    if isinstance(a, float) or isinstance(b, float):
        return math.nan if b == 0 else math.fmod(a, b)
    return int(math.copysign(abs(a) % abs(b), a))


def _round(x: Any, digits: Any = 0) -> Any:
    if is_null(x) or is_null(digits):
        return None
    digits = int(digits)
    if digits > 308:  # finer than any double: unchanged
        return x
    if digits < -308:  # coarser than any double: 0 (as Trino)
        return 0 if isinstance(x, int) else math.copysign(0.0, x)
    scale = 10 ** digits
    value = math.floor(abs(x) * scale + 0.5) / scale
    value = math.copysign(value, x)
    return int(value) if isinstance(x, int) and digits <= 0 else value


def _strict(fn: Callable[..., Any]) -> Callable[..., Any]:
    """NULL in, NULL out."""

    def wrapped(*args: Any) -> Any:
        if any(is_null(a) for a in args):
            return None
        return fn(*args)

    return wrapped


def _substr(s: Any, start: Any, *length: Any) -> Any:
    """SQL SUBSTR: 1-based ``start``; a negative start counts from the end (as Trino)."""
    if is_null(s) or is_null(start) or any(is_null(n) for n in length):
        return None
    text, begin = str(s), int(start)
    if begin == 0 or abs(begin) > len(text):
        return ""
    begin = begin - 1 if begin > 0 else len(text) + begin
    if not length:
        return text[begin:]
    count = int(length[0])
    if count < 0:
        raise ValueError(f"the length must not be negative, got {count}")
    return text[begin:begin + count]


def _double(fn: Callable[..., Any], *args: Any) -> float:
    """``fn`` in IEEE double arithmetic, as Trino's SQRT and POWER: NaN (which counts as
    NULL) for a negative base with a fractional exponent or a negative square root, +-inf
    on overflow -- never a complex number, an exception or a huge exact integer."""
    if not all(isinstance(a, int | float) for a in args):
        raise TypeError(f"needs numbers, got {', '.join(type(a).__name__ for a in args)}")
    with np.errstate(all="ignore"):
        return float(fn(*(np.float64(a) for a in args)))


SCALAR_FUNCTIONS: dict[str, tuple[int, int, Callable[..., Any]]] = {
    # name: (min args, max args, implementation)
    "ABS": (1, 1, _strict(abs)),
    "ROUND": (1, 2, _round),
    "FLOOR": (1, 1, _strict(math.floor)),
    "CEIL": (1, 1, _strict(math.ceil)),
    "CEILING": (1, 1, _strict(math.ceil)),
    "SQRT": (1, 1, _strict(lambda a: _double(np.sqrt, a))),
    "POWER": (2, 2, _strict(lambda a, b: _double(np.power, a, b))),
    "MOD": (2, 2, _strict(modulo)),
    "LOWER": (1, 1, _strict(lambda s: str(s).lower())),
    "UPPER": (1, 1, _strict(lambda s: str(s).upper())),
    "LENGTH": (1, 1, _strict(lambda s: len(str(s)))),
    "CONCAT": (1, 64, _strict(lambda *a: "".join(str(x) for x in a))),
    "SUBSTR": (2, 3, _substr),
    "SUBSTRING": (2, 3, _substr),
    "TRIM": (1, 1, _strict(lambda s: str(s).strip(" "))),
    "LTRIM": (1, 1, _strict(lambda s: str(s).lstrip(" "))),
    "RTRIM": (1, 1, _strict(lambda s: str(s).rstrip(" "))),
    "REPLACE": (2, 3, _strict(lambda s, a, b="": str(s).replace(str(a), str(b)))),
    "COALESCE": (1, 64, lambda *a: next((x for x in a if not is_null(x)), None)),
    "GREATEST": (1, 64, _strict(lambda *a: max(a))),
    "LEAST": (1, 64, _strict(lambda *a: min(a))),
}


# ----------------------------------------------------------------------------- CAST, LIKE

_TRUE_TEXT = {"true": True, "t": True, "1": True, "false": False, "f": False, "0": False}


def cast_fn(type_name: str, pos: ast.Pos) -> Callable[[Any], Any]:
    """CAST to ``type_name``: NULL gives NULL; a value that cannot be converted raises a
    QueryError naming the value and the type (as Trino; there is no TRY_CAST)."""
    base = type_name.split("(")[0]
    scale: int | None = None
    width: int | None = None
    if base == "VARCHAR" and "(" in type_name:
        width = int(type_name[type_name.index("(") + 1:-1])  # longer text is cut (Trino)
    if base == "DECIMAL" and "(" in type_name:
        sizes = type_name[type_name.index("(") + 1:-1].split(",")
        scale = int(sizes[1]) if len(sizes) > 1 else 0
    elif base == "DECIMAL":
        scale = 0  # DECIMAL alone is DECIMAL(38,0), as in Trino

    def convert(v: Any) -> Any:
        if isinstance(v, np.generic) and not isinstance(v, np.datetime64 | np.timedelta64):
            v = v.item()
        if base in ("BIGINT", "INTEGER", "INT"):
            if isinstance(v, bool):
                return int(v)
            if isinstance(v, int):
                return v
            if isinstance(v, float):
                return int(math.copysign(math.floor(abs(v) + 0.5), v))  # half away from 0
            if isinstance(v, str):
                return int(v.strip())
        elif base in ("DOUBLE", "REAL", "DECIMAL"):
            if isinstance(v, bool | int | float):
                out = float(v)
            elif isinstance(v, str):
                out = float(v.strip())
            else:
                raise TypeError
            return out if scale is None else _round(out, scale)
        elif base in ("VARCHAR", "STRING"):
            text = ("true" if v else "false") if isinstance(v, bool) else str(v)
            return text if width is None else text[:width]
        elif base == "BOOLEAN":
            if isinstance(v, bool):
                return v
            if isinstance(v, int | float):
                return v != 0
            if isinstance(v, str):
                return _TRUE_TEXT[v.strip().lower()]
        elif base in ("TIMESTAMP", "DATE") and isinstance(v, str | pd.Timestamp):
            stamp = pd.Timestamp(v.strip() if isinstance(v, str) else v)
            if stamp is pd.NaT:
                raise ValueError
            return stamp.normalize() if base == "DATE" else stamp
        raise TypeError

    def cast(v: Any) -> Any:
        if is_null(v):
            return None
        try:
            return convert(v)
        except (TypeError, ValueError, KeyError, OverflowError):
            raise QueryError(f"cannot cast {type(v).__name__} {v!r} to {type_name}",
                             *pos) from None

    return cast


@functools.lru_cache(maxsize=256)
def like_regex(pattern: str, escape: str | None) -> re.Pattern[str]:
    """The regular expression for a SQL LIKE pattern (``%``: any text, ``_``: one
    character, ``escape`` makes the next character literal). ValueError if malformed."""
    if escape is not None and len(escape) != 1:
        raise ValueError(f"the LIKE escape must be a single character, got {escape!r}")
    parts: list[str] = []
    chars = iter(pattern)
    for ch in chars:
        if ch == escape:
            nxt = next(chars, None)
            if nxt is None or nxt not in ("%", "_", escape):
                raise ValueError(f"bad LIKE pattern {pattern!r}: the escape {escape!r} "
                                 "must be followed by %, _ or itself")
            parts.append(re.escape(nxt))
        elif ch == "%":
            parts.append(".*")
        elif ch == "_":
            parts.append(".")
        else:
            parts.append(re.escape(ch))
    return re.compile("".join(parts), re.DOTALL)


def like_fn(negated: bool, has_escape: bool, pos: ast.Pos) -> Callable[..., Any]:
    def like(v: Any, pattern: Any, escape: Any = None) -> Any:
        if is_null(v) or is_null(pattern) or (has_escape and is_null(escape)):
            return None
        if not isinstance(v, str) or not isinstance(pattern, str) or not (
                escape is None or isinstance(escape, str)):
            raise QueryError(f"LIKE needs strings, got {type(v).__name__} {v!r} and "
                             f"{type(pattern).__name__} {pattern!r}", *pos)
        try:
            regex = like_regex(pattern, escape)
        except ValueError as err:
            raise QueryError(str(err), *pos) from None
        hit = regex.fullmatch(v) is not None
        return hit != negated

    return like
