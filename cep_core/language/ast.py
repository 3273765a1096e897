"""The query tree: small frozen dataclasses, plain data that the compiler walks.

Positions (``pos``: 1-based line and column) are kept for error messages but do not take
part in equality, so a tree parsed from printed SQL equals the original tree.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

Pos = tuple[int, int]
_NOPOS: Pos = (0, 0)


def _pos() -> Pos:
    return field(default=_NOPOS, compare=False, repr=False)


# ----------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Expr:
    pass


@dataclass(frozen=True)
class Literal(Expr):
    """A number, string, boolean or NULL (value None)."""

    value: object
    pos: Pos = _pos()


@dataclass(frozen=True)
class IntervalLiteral(Expr):
    """``INTERVAL '10' HOUR``; ``amount`` is the quoted text, ``unit`` upper case."""

    amount: str
    unit: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class TimestampLiteral(Expr):
    text: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Column(Expr):
    """A column reference; ``var`` is the pattern variable (None: the universal one)."""

    name: str
    var: str | None = None
    quoted: bool = False
    pos: Pos = _pos()
    # lakecep extension, only in PARTITION BY / ORDER BY: a key computed by this expression
    # (``name`` is then its output column name: the expression as the printer writes it).
    computed: Expr | None = None


@dataclass(frozen=True)
class Star(Expr):
    """``*`` or ``A.*`` inside COUNT."""

    var: str | None = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # '-', '+', 'NOT'
    operand: Expr
    pos: Pos = _pos()


@dataclass(frozen=True)
class Binary(Expr):
    op: str  # + - * / % || = <> < <= > >= AND OR
    left: Expr
    right: Expr
    pos: Pos = _pos()


@dataclass(frozen=True)
class IsNull(Expr):
    operand: Expr
    negated: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class Between(Expr):
    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class InList(Expr):
    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class Case(Expr):
    """``CASE [operand] WHEN .. THEN .. [ELSE ..] END``."""

    operand: Expr | None
    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr | None = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class Call(Expr):
    """A function call. ``semantics`` is 'RUNNING', 'FINAL' or None (not written)."""

    name: str  # upper case
    args: tuple[Expr, ...]
    semantics: str | None = None
    pos: Pos = _pos()
    distinct: bool = False  # COUNT(DISTINCT x)
    # An aggregate's ``FILTER (WHERE condition)``: only rows where it is TRUE are aggregated.
    filter: Expr | None = None


@dataclass(frozen=True)
class Cast(Expr):
    """``CAST(operand AS type_name)``; ``type_name`` upper case, e.g. 'DECIMAL(10,2)'."""

    operand: Expr
    type_name: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Like(Expr):
    """``operand [NOT] LIKE pattern [ESCAPE escape]``."""

    operand: Expr
    pattern: Expr
    escape: Expr | None = None
    negated: bool = False
    pos: Pos = _pos()


# ----------------------------------------------------------------------------- patterns


@dataclass(frozen=True)
class Pattern:
    pass


@dataclass(frozen=True)
class Var(Pattern):
    name: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Anchor(Pattern):
    kind: str  # '^' or '$'
    pos: Pos = _pos()


@dataclass(frozen=True)
class Concat(Pattern):
    items: tuple[Pattern, ...]
    pos: Pos = _pos()


@dataclass(frozen=True)
class Alternation(Pattern):
    items: tuple[Pattern, ...]
    pos: Pos = _pos()


@dataclass(frozen=True)
class Group(Pattern):
    """Parentheses; ``Group(Concat(()))`` is the empty pattern ``()``."""

    body: Pattern
    pos: Pos = _pos()


@dataclass(frozen=True)
class Exclusion(Pattern):
    body: Pattern
    pos: Pos = _pos()


@dataclass(frozen=True)
class Negation(Pattern):
    """lakecep extension ``NOT var`` inside PATTERN: no row satisfying ``var`` may occur
    between the neighbouring terms (or, at the end, within the WITHIN window)."""

    var: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Permute(Pattern):
    items: tuple[Pattern, ...]
    pos: Pos = _pos()


@dataclass(frozen=True)
class Quantified(Pattern):
    """``body{low,high}``; ``high`` None is unbounded; ``greedy`` False for reluctant.

    ``text`` keeps the quantifier's spelling ('*', '+', '?', '{n,m}') for printing.
    """

    body: Pattern
    low: int
    high: int | None
    greedy: bool = True
    text: str = ""
    pos: Pos = _pos()


def pattern_nodes(p: Pattern) -> Iterator[Pattern]:
    """``p`` and every pattern inside it, parents before their parts, left to right."""
    yield p
    if isinstance(p, Concat | Alternation | Permute):
        for item in p.items:
            yield from pattern_nodes(item)
    elif isinstance(p, Group | Exclusion | Quantified):
        yield from pattern_nodes(p.body)


# ----------------------------------------------------------------------------- clauses


@dataclass(frozen=True)
class SortItem:
    column: Column
    descending: bool = False
    nulls_first: bool | None = None


@dataclass(frozen=True)
class Measure:
    expr: Expr
    name: str
    quoted: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class Subset:
    name: str
    vars: tuple[str, ...]
    pos: Pos = _pos()


@dataclass(frozen=True)
class Define:
    var: str
    condition: Expr
    pos: Pos = _pos()


@dataclass(frozen=True)
class SkipTo:
    """AFTER MATCH SKIP: kind 'PAST LAST ROW', 'TO NEXT ROW', 'TO FIRST', 'TO LAST'."""

    kind: str = "PAST LAST ROW"
    var: str | None = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class EventConstraint:
    """lakecep extension, one item of ``EVENT CONSTRAINTS (...)``: ``kind`` is 'PRIOR',
    'EXCLUSIVE' or 'REQUIRE', over the variables (event classes) ``first`` and ``second``."""

    kind: str
    first: str
    second: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class UncertainTime:
    """lakecep extension ``UNCERTAIN TIME BETWEEN lower AND upper [PMF pmf] [GRANULARITY g]
    [EVENT CONSTRAINTS (...)] [WITH PROBABILITY >= p]`` (see docs/uncertain.md).

    ``granularity`` None: the default (1 second for timestamps, 1 for numbers);
    ``min_probability`` None: not written (every match with a positive probability)."""

    lower: Column
    upper: Column
    pmf: Column | None = None
    granularity: IntervalLiteral | Literal | None = None
    constraints: tuple[EventConstraint, ...] = ()
    min_probability: Literal | None = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class MatchRecognize:
    partition_by: tuple[Column, ...]
    order_by: tuple[SortItem, ...]
    measures: tuple[Measure, ...]
    rows_per_match: str  # 'ONE', 'ALL SHOW', 'ALL OMIT', 'ALL UNMATCHED'
    skip: SkipTo
    pattern: Pattern
    within: IntervalLiteral | Literal | None
    subsets: tuple[Subset, ...]
    defines: tuple[Define, ...]
    rows_per_match_written: bool = False
    skip_written: bool = False
    # lakecep extension: 'STRICT' (the standard: consecutive rows), 'NEXT' or 'ANY'
    # (SASE's skip-till-next-match / skip-till-any-match).
    selection: str = "STRICT"
    # lakecep extensions: a consumption mode ('RECENT', 'FIRST', 'CHRONICLE', 'CUMULATIVE',
    # 'CONTINUOUS'; None: the standard's backtracking search) and EMIT TIMEOUTS.
    consumption: str | None = None
    emit_timeouts: bool = False
    consumption_pos: Pos = _pos()  # where CONSUMPTION / EMIT TIMEOUTS (would) start
    # lakecep extension: uncertain event times (None: the ordinary, certain engine).
    uncertain: UncertainTime | None = None


@dataclass(frozen=True)
class SelectItem:
    """A selected output column (``name``) or ``*`` (name None)."""

    name: str | None
    alias: str | None = None
    qualifier: str | None = None
    quoted: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class Query:
    select: tuple[SelectItem, ...]
    table: str
    match: MatchRecognize
    alias: str | None = None
    order_by: tuple[SortItem, ...] = ()
    table_pos: Pos = _pos()
