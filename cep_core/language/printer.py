"""Printer: :mod:`cep_core.ast` tree -> SQL text that parses back to an equal tree."""

from __future__ import annotations

import re
from functools import singledispatch

from . import ast
from .tokens import KEYWORDS

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def to_sql(node: ast.Query | ast.Expr | ast.Pattern) -> str:
    """Render a query, expression or pattern as SQL text."""
    if isinstance(node, ast.Query):
        return _query(node)
    if isinstance(node, ast.Pattern):
        return _pattern(node)
    return _expr(node)


def _ident(name: str, quoted: bool = False) -> str:
    if quoted or not _PLAIN.match(name) or name.upper() in KEYWORDS:
        return '"' + name.replace('"', '""') + '"'
    return name


def _var(name: str) -> str:
    # Unquoted variables were normalised to upper case; anything else must be quoted.
    if _PLAIN.match(name) and name == name.upper() and name not in KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def _string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _query(q: ast.Query) -> str:
    select = ", ".join(_select_item(item) for item in q.select)
    text = f"SELECT {select}\nFROM {_ident(q.table)} MATCH_RECOGNIZE (\n"
    text += _match(q.match)
    text += "\n)"
    if q.alias is not None:
        text += f" AS {_ident(q.alias)}"
    if q.order_by:
        text += " ORDER BY " + ", ".join(_sort_item(s) for s in q.order_by)
    return text


def _select_item(item: ast.SelectItem) -> str:
    if item.name is None:
        return f"{_ident(item.qualifier)}.*" if item.qualifier else "*"
    text = _ident(item.name, item.quoted)
    if item.qualifier:
        text = f"{_ident(item.qualifier)}.{text}"
    if item.alias is not None:
        text += f" AS {_ident(item.alias)}"
    return text


def _sort_item(item: ast.SortItem) -> str:
    text = _column(item.column)
    if item.descending:
        text += " DESC"
    if item.nulls_first is not None:
        text += " NULLS FIRST" if item.nulls_first else " NULLS LAST"
    return text


def _match(m: ast.MatchRecognize) -> str:
    lines: list[str] = []
    if m.partition_by:
        lines.append("PARTITION BY " + ", ".join(_column(c) for c in m.partition_by))
    if m.order_by:
        lines.append("ORDER BY " + ", ".join(_sort_item(s) for s in m.order_by))
    if m.measures:
        lines.append("MEASURES " + ", ".join(
            f"{_expr(me.expr)} AS {_ident(me.name, me.quoted)}" for me in m.measures))
    if m.rows_per_match_written:
        lines.append({
            "ONE": "ONE ROW PER MATCH",
            "ALL SHOW": "ALL ROWS PER MATCH SHOW EMPTY MATCHES",
            "ALL OMIT": "ALL ROWS PER MATCH OMIT EMPTY MATCHES",
            "ALL UNMATCHED": "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
        }[m.rows_per_match])
    if m.skip_written:
        if m.skip.var is None:
            lines.append(f"AFTER MATCH SKIP {m.skip.kind}")
        else:
            lines.append(f"AFTER MATCH SKIP {m.skip.kind} {_var(m.skip.var)}")
    pattern = f"PATTERN ({_pattern(m.pattern)})"
    if m.within is not None:
        pattern += f" WITHIN {_expr(m.within)}"
    if m.selection != "STRICT":
        pattern += f" SKIP TILL {m.selection} MATCH"
    if m.consumption is not None:
        pattern += f" CONSUMPTION {m.consumption}"
    if m.emit_timeouts:
        pattern += " EMIT TIMEOUTS"
    lines.append(pattern)
    if m.uncertain is not None:
        lines.extend(_uncertain(m.uncertain))
    if m.subsets:
        lines.append("SUBSET " + ", ".join(
            f"{_var(s.name)} = ({', '.join(_var(v) for v in s.vars)})" for s in m.subsets))
    if m.defines:
        lines.append("DEFINE " + ",\n       ".join(
            f"{_var(d.var)} AS {_expr(d.condition)}" for d in m.defines))
    return "\n".join("  " + line for line in lines)


def _uncertain(u: ast.UncertainTime) -> list[str]:
    text = f"UNCERTAIN TIME BETWEEN {_column(u.lower)} AND {_column(u.upper)}"
    if u.pmf is not None:
        text += f" PMF {_column(u.pmf)}"
    if u.granularity is not None:
        text += f" GRANULARITY {_expr(u.granularity)}"
    lines = [text]
    if u.constraints:
        lines.append("EVENT CONSTRAINTS (" + ", ".join(
            f"{c.kind}({_var(c.first)}, {_var(c.second)})" for c in u.constraints) + ")")
    if u.min_probability is not None:
        lines.append(f"WITH PROBABILITY >= {_expr(u.min_probability)}")
    return lines


# ----------------------------------------------------------------------------- patterns


def _pattern(p: ast.Pattern) -> str:
    if isinstance(p, ast.Var):
        return _var(p.name)
    if isinstance(p, ast.Anchor):
        return p.kind
    if isinstance(p, ast.Concat):
        return " ".join(_pattern_term(i) for i in p.items)
    if isinstance(p, ast.Alternation):
        return " | ".join(_pattern(i) for i in p.items)
    if isinstance(p, ast.Group):
        return f"({_pattern(p.body)})"
    if isinstance(p, ast.Exclusion):
        return f"{{- {_pattern(p.body)} -}}"
    if isinstance(p, ast.Negation):
        return f"NOT {_var(p.var)}"
    if isinstance(p, ast.Permute):
        return "PERMUTE(" + ", ".join(_pattern(i) for i in p.items) + ")"
    if isinstance(p, ast.Quantified):
        text = p.text or _quantifier_text(p.low, p.high)
        body = f"({_pattern(p.body)})" if isinstance(p.body, ast.Quantified) else (
            _pattern_term(p.body))
        return body + text + ("" if p.greedy else "?")
    raise TypeError(f"not a pattern node: {p!r}")


def _pattern_term(p: ast.Pattern) -> str:
    # Concatenations and alternations inside a concatenation or quantifier, and quantifiers
    # inside a quantifier, need parentheses; the parser only builds those inside a Group,
    # so this is for hand-built trees.
    if isinstance(p, ast.Concat | ast.Alternation):
        return f"({_pattern(p)})"
    return _pattern(p)


def _quantifier_text(low: int, high: int | None) -> str:
    if high is None:
        return "*" if low == 0 else "+" if low == 1 else f"{{{low},}}"
    if low == high:
        return f"{{{low}}}"
    return "?" if (low, high) == (0, 1) else f"{{{low},{high}}}"


# ----------------------------------------------------------------------------- expressions

_PRECEDENCE = {"OR": 1, "AND": 2, "NOT": 3, "=": 4, "<>": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
               "+": 5, "-": 5, "||": 5, "*": 6, "/": 6, "%": 6}


def _expr(e: ast.Expr) -> str:
    return _render(e)


def _column(c: ast.Column) -> str:
    if c.computed is not None:  # a PARTITION BY / ORDER BY expression
        return _render(c.computed)
    name = _ident(c.name, c.quoted)
    return name if c.var is None else f"{_var(c.var)}.{name}"


def _prec(e: ast.Expr) -> int:
    if isinstance(e, ast.Binary):
        return _PRECEDENCE[e.op]
    if isinstance(e, ast.Unary):
        return 3 if e.op == "NOT" else 7
    if isinstance(e, ast.IsNull | ast.Between | ast.InList | ast.Like):
        return 4
    return 8


def _wrap(e: ast.Expr, minimum: int) -> str:
    text = _render(e)
    return f"({text})" if _prec(e) < minimum else text


@singledispatch
def _render(e: ast.Expr) -> str:
    raise TypeError(f"not an expression node: {e!r}")


@_render.register
def _(e: ast.Literal) -> str:
    if e.value is None:
        return "NULL"
    if isinstance(e.value, bool):
        return "TRUE" if e.value else "FALSE"
    if isinstance(e.value, str):
        return _string(e.value)
    text = repr(e.value) if isinstance(e.value, float) else str(e.value)
    # Parenthesised so that "a - (-1)" can never print as a "--" comment.
    return f"({text})" if text.startswith("-") else text


@_render.register
def _(e: ast.IntervalLiteral) -> str:
    return f"INTERVAL {_string(e.amount)} {e.unit}"


@_render.register
def _(e: ast.TimestampLiteral) -> str:
    return f"TIMESTAMP {_string(e.text)}"


@_render.register
def _(e: ast.Column) -> str:
    return _column(e)


@_render.register
def _(e: ast.Star) -> str:
    return "*" if e.var is None else f"{_var(e.var)}.*"


@_render.register
def _(e: ast.Unary) -> str:
    if e.op == "NOT":
        return f"NOT {_wrap(e.operand, 3)}"
    return f"{e.op}{_wrap(e.operand, 8)}"


@_render.register
def _(e: ast.Binary) -> str:
    prec = _PRECEDENCE[e.op]
    # Left-associative: the right operand needs parentheses at equal precedence.
    return f"{_wrap(e.left, prec)} {e.op} {_wrap(e.right, prec + 1)}"


@_render.register
def _(e: ast.IsNull) -> str:
    return f"{_wrap(e.operand, 5)} IS {'NOT ' if e.negated else ''}NULL"


@_render.register
def _(e: ast.Between) -> str:
    neg = "NOT " if e.negated else ""
    return f"{_wrap(e.operand, 5)} {neg}BETWEEN {_wrap(e.low, 5)} AND {_wrap(e.high, 5)}"


@_render.register
def _(e: ast.InList) -> str:
    items = ", ".join(_render(i) for i in e.items)
    return f"{_wrap(e.operand, 5)} {'NOT ' if e.negated else ''}IN ({items})"


@_render.register
def _(e: ast.Case) -> str:
    parts = ["CASE"]
    if e.operand is not None:
        parts.append(_render(e.operand))
    for cond, value in e.whens:
        parts.append(f"WHEN {_render(cond)} THEN {_render(value)}")
    if e.default is not None:
        parts.append(f"ELSE {_render(e.default)}")
    parts.append("END")
    return " ".join(parts)


@_render.register
def _(e: ast.Call) -> str:
    prefix = f"{e.semantics} " if e.semantics else ""
    distinct = "DISTINCT " if e.distinct else ""
    text = f"{prefix}{e.name}({distinct}{', '.join(_render(a) for a in e.args)})"
    return text if e.filter is None else f"{text} FILTER (WHERE {_render(e.filter)})"


@_render.register
def _(e: ast.Cast) -> str:
    return f"CAST({_render(e.operand)} AS {e.type_name})"


@_render.register
def _(e: ast.Like) -> str:
    text = f"{_wrap(e.operand, 5)} {'NOT ' if e.negated else ''}LIKE {_wrap(e.pattern, 5)}"
    return text if e.escape is None else f"{text} ESCAPE {_wrap(e.escape, 5)}"
