"""Recursive-descent parser: tokens -> :mod:`cep_core.ast` tree.

One ``_parse_<rule>`` method per grammar rule. Unquoted pattern variable names are
normalised to upper case (as Trino does); column names keep their spelling and are resolved
against the input columns later (case-insensitively unless quoted).
"""

from __future__ import annotations

import math

from ..errors import QueryError
from . import ast
from .printer import to_sql
from .tokens import KEYWORDS as KEYWORDS
from .tokens import RESERVED, Kind, Token, tokenize

# Reserved words that are still function names when followed by '(' (TRIM(s)).
_RESERVED_FUNCTIONS = {"TRIM", "EXTRACT", "NORMALIZE", "LISTAGG"}
# CAST target types; the value is how many parenthesised numbers the type may take.
CAST_TYPES = {"BIGINT": 0, "INTEGER": 0, "INT": 0, "DOUBLE": 0, "REAL": 0, "DECIMAL": 2,
              "VARCHAR": 1, "STRING": 0, "BOOLEAN": 0, "TIMESTAMP": 0, "DATE": 0}
_CLAUSES = ("PARTITION BY", "ORDER BY", "MEASURES", "ONE ROW PER MATCH", "ALL ROWS PER MATCH",
            "AFTER MATCH SKIP", "PATTERN", "SUBSET", "DEFINE")
_CONSUMPTION_MODES = ("RECENT", "FIRST", "CHRONICLE", "CUMULATIVE", "CONTINUOUS")
_EVENT_CONSTRAINTS = ("PRIOR", "EXCLUSIVE", "REQUIRE")
_INTERVAL_UNITS = {"SECOND", "MINUTE", "HOUR", "DAY"}
_UNIT_SECONDS = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400}
# pandas timestamps are int64 nanoseconds: an interval longer than that range cannot be
# added to one (pd.Timedelta.max is a little over 106,751 days).
_MAX_INTERVAL_SECONDS = 106_751 * 86_400
_COMPARISONS = {"=", "<>", "!=", "<", "<=", ">", ">="}
# The deepest nesting of parentheses, NOT, signs or pattern groups the parser accepts (a
# recursive-descent parser would otherwise hit Python's recursion limit).
MAX_NESTING = 64


def parse(text: str) -> ast.Query:
    """Parse a ``SELECT ... FROM t MATCH_RECOGNIZE (...)`` query into a tree."""
    try:
        return _Parser(tokenize(text)).parse_query()
    except QueryError as err:
        raise err.with_query(text) from None


def parse_expression(text: str) -> ast.Expr:
    """Parse a single expression (used by tests and tools)."""
    try:
        parser = _Parser(tokenize(text))
        expr = parser._parse_expr()
        parser._expect_eof()
        return expr
    except QueryError as err:
        raise err.with_query(text) from None


class _Parser:
    def __init__(self, tokens: list[Token]):
        self.tokens = tokens
        self.i = 0
        self.depth = 0

    def _nest(self, tok: Token) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self._error(f"expression or pattern nested too deeply (more than "
                              f"{MAX_NESTING} levels)", tok)

    # ------------------------------------------------------------------ token helpers
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def _peek(self, offset: int = 1) -> Token:
        return self.tokens[min(self.i + offset, len(self.tokens) - 1)]

    def _advance(self) -> Token:
        tok = self.tokens[self.i]
        if tok.kind is not Kind.EOF:
            self.i += 1
        return tok

    def _error(self, message: str, tok: Token | None = None) -> QueryError:
        tok = tok or self.tok
        return QueryError(message, tok.line, tok.column)

    def _is_kw(self, *words: str) -> bool:
        return all(self._peek(k).upper == w for k, w in enumerate(words))

    def _match_kw(self, *words: str) -> bool:
        if self._is_kw(*words):
            self.i += len(words)
            return True
        return False

    def _expect_kw(self, *words: str) -> Token:
        for word in words:
            if self.tok.upper != word:
                raise self._error(f"expected {word}, found {self.tok.describe()}")
            self._advance()
        return self.tokens[self.i - 1]

    def _is_sym(self, sym: str) -> bool:
        return self.tok.kind is Kind.SYMBOL and self.tok.text == sym

    def _match_sym(self, sym: str) -> bool:
        if self._is_sym(sym):
            self._advance()
            return True
        return False

    def _expect_sym(self, sym: str, context: str = "") -> Token:
        if not self._is_sym(sym):
            where = f" {context}" if context else ""
            raise self._error(f"expected '{sym}'{where}, found {self.tok.describe()}")
        return self._advance()

    def _expect_eof(self) -> None:
        if self.tok.kind is not Kind.EOF:
            raise self._error(f"unexpected {self.tok.describe()} after the end of the query")

    def _pos(self, tok: Token | None = None) -> ast.Pos:
        tok = tok or self.tok
        return (tok.line, tok.column)

    def _parse_name(self, what: str) -> tuple[str, bool, Token]:
        """An identifier: returns (text, quoted, token)."""
        tok = self.tok
        if tok.kind is Kind.QUOTED:
            self._advance()
            return tok.text, True, tok
        if tok.kind is Kind.IDENT and tok.upper not in RESERVED:
            self._advance()
            return tok.text, False, tok
        raise self._error(f"expected {what}, found {tok.describe()}")

    def _parse_var_name(self) -> tuple[str, Token]:
        text, quoted, tok = self._parse_name("a pattern variable")
        return (text if quoted else text.upper()), tok

    # ------------------------------------------------------------------ query
    def parse_query(self) -> ast.Query:
        self._expect_kw("SELECT")
        select = self._parse_select_list()
        self._expect_kw("FROM")
        table, _, table_tok = self._parse_name("a table name")
        self._expect_kw("MATCH_RECOGNIZE")
        self._expect_sym("(", "after MATCH_RECOGNIZE")
        match = self._parse_match_recognize()
        self._expect_sym(")", "to close MATCH_RECOGNIZE")
        alias = None
        if self._match_kw("AS"):
            alias = self._parse_name("an alias")[0]
        elif self.tok.kind in (Kind.IDENT, Kind.QUOTED) and self.tok.upper not in RESERVED:
            alias = self._parse_name("an alias")[0]
        order_by: tuple[ast.SortItem, ...] = ()
        if self._match_kw("ORDER", "BY"):
            order_by = self._parse_sort_list()
        self._match_sym(";")
        self._expect_eof()
        return ast.Query(select, table, match, alias, order_by, self._pos(table_tok))

    def _parse_select_list(self) -> tuple[ast.SelectItem, ...]:
        items = [self._parse_select_item()]
        while self._match_sym(","):
            items.append(self._parse_select_item())
        return tuple(items)

    def _parse_select_item(self) -> ast.SelectItem:
        pos = self._pos()
        if self._match_sym("*"):
            return ast.SelectItem(None, pos=pos)
        name, quoted, _ = self._parse_name("a column name or '*'")
        qualifier = None
        if self._match_sym("."):
            if self._match_sym("*"):
                return ast.SelectItem(None, qualifier=name, pos=pos)
            qualifier = name
            name, quoted, _ = self._parse_name("a column name")
        alias = None
        if self._match_kw("AS"):
            alias = self._parse_name("an alias")[0]
        elif self.tok.kind in (Kind.IDENT, Kind.QUOTED) and self.tok.upper not in RESERVED:
            alias = self._parse_name("an alias")[0]
        return ast.SelectItem(name, alias, qualifier, quoted, pos)

    # ------------------------------------------------------------------ MATCH_RECOGNIZE body
    def _parse_match_recognize(self) -> ast.MatchRecognize:
        partition_by: tuple[ast.Column, ...] = ()
        order_by: tuple[ast.SortItem, ...] = ()
        measures: tuple[ast.Measure, ...] = ()
        rows = "ONE"
        rows_written = skip_written = False
        skip = ast.SkipTo()
        if self._match_kw("PARTITION", "BY"):
            partition_by = self._parse_key_list()
        if self._match_kw("ORDER", "BY"):
            order_by = self._parse_sort_list(keys=True)
        if self._match_kw("MEASURES"):
            measures = self._parse_measures()
        if self._is_kw("ONE") or self._is_kw("ALL"):
            rows = self._parse_rows_per_match()
            rows_written = True
        if self._is_kw("AFTER"):
            skip = self._parse_skip()
            skip_written = True
        if not self._is_kw("PATTERN"):
            raise self._unexpected_clause()
        pattern = self._parse_pattern_clause()
        within: ast.IntervalLiteral | ast.Literal | None = None
        if self._match_kw("WITHIN"):
            within = self._parse_within()
        selection = self._parse_selection()
        consumption: str | None = None
        consumption_pos = self._pos()
        if self._match_kw("CONSUMPTION"):
            consumption = self._parse_consumption()
        emit_timeouts = self._match_kw("EMIT", "TIMEOUTS")
        uncertain = self._parse_uncertain()
        subsets: tuple[ast.Subset, ...] = ()
        defines: tuple[ast.Define, ...] = ()
        if self._match_kw("SUBSET"):
            subsets = self._parse_subsets()
        if self._match_kw("DEFINE"):
            defines = self._parse_defines()
        if not self._is_sym(")"):
            raise self._unexpected_clause()
        return ast.MatchRecognize(partition_by, order_by, measures, rows, skip, pattern, within,
                                  subsets, defines, rows_written, skip_written, selection,
                                  consumption, emit_timeouts, consumption_pos, uncertain)

    # ------------------------------------------------------------------ UNCERTAIN TIME
    def _parse_uncertain(self) -> ast.UncertainTime | None:
        """lakecep extension (docs/uncertain.md): ``UNCERTAIN TIME BETWEEN lower AND upper
        [PMF pmf] [GRANULARITY g] [EVENT CONSTRAINTS (...)] [WITH PROBABILITY >= p]``."""
        if not self._is_kw("UNCERTAIN"):
            for words in (("EVENT", "CONSTRAINTS"), ("WITH", "PROBABILITY")):
                if self._is_kw(*words):
                    raise self._error(f"{' '.join(words)} is only allowed after UNCERTAIN "
                                      "TIME BETWEEN lower AND upper")
            return None
        pos = self._pos()
        self._expect_kw("UNCERTAIN", "TIME", "BETWEEN")
        lower = self._parse_plain_column()
        self._expect_kw("AND")
        upper = self._parse_plain_column()
        pmf = self._parse_plain_column() if self._match_kw("PMF") else None
        granularity: ast.IntervalLiteral | ast.Literal | None = None
        if self._is_kw("GRANULARITY"):
            tok = self._advance()
            granularity = self._parse_within("GRANULARITY")
            amount = (float(granularity.amount) if isinstance(granularity, ast.IntervalLiteral)
                      else float(granularity.value))  # type: ignore[arg-type]
            if not amount > 0:
                raise self._error("GRANULARITY must be positive", tok)
        constraints: tuple[ast.EventConstraint, ...] = ()
        if self._match_kw("EVENT", "CONSTRAINTS"):
            constraints = self._parse_event_constraints()
        min_probability: ast.Literal | None = None
        if self._match_kw("WITH", "PROBABILITY"):
            self._expect_sym(">=", "after WITH PROBABILITY")
            tok = self.tok
            if tok.kind is not Kind.NUMBER:
                raise self._error(f"expected a probability between 0 and 1 after WITH "
                                  f"PROBABILITY >=, found {tok.describe()}")
            self._advance()
            value = _number(tok.text)
            if not 0 <= value <= 1:
                raise self._error(f"WITH PROBABILITY >= {tok.text}: the probability must be "
                                  "between 0 and 1", tok)
            min_probability = ast.Literal(value, self._pos(tok))
        if self._is_kw("EVENT", "CONSTRAINTS"):
            raise self._error("EVENT CONSTRAINTS is out of place; the UNCERTAIN TIME clauses go "
                              "UNCERTAIN TIME BETWEEN .. AND .. [PMF ..] [GRANULARITY ..], "
                              "EVENT CONSTRAINTS (...), WITH PROBABILITY >= p")
        return ast.UncertainTime(lower, upper, pmf, granularity, constraints, min_probability,
                                 pos)

    def _parse_event_constraints(self) -> tuple[ast.EventConstraint, ...]:
        self._expect_sym("(", "after EVENT CONSTRAINTS")
        items = [self._parse_event_constraint()]
        while self._match_sym(","):
            items.append(self._parse_event_constraint())
        self._expect_sym(")", "to close EVENT CONSTRAINTS")
        return tuple(items)

    def _parse_event_constraint(self) -> ast.EventConstraint:
        tok = self.tok
        if tok.upper not in _EVENT_CONSTRAINTS:
            raise self._error(f"expected an event constraint ({', '.join(_EVENT_CONSTRAINTS)}) "
                              f"in EVENT CONSTRAINTS, found {tok.describe()}")
        self._advance()
        self._expect_sym("(", f"after {tok.upper}")
        first, _ = self._parse_var_name()
        self._expect_sym(",", f"between the two variables of {tok.upper}")
        second, _ = self._parse_var_name()
        self._expect_sym(")", f"to close {tok.upper}(")
        return ast.EventConstraint(tok.upper, first, second, self._pos(tok))

    def _parse_consumption(self) -> str:
        """lakecep extension: ``CONSUMPTION RECENT | FIRST | CHRONICLE | CUMULATIVE |
        CONTINUOUS``."""
        tok = self.tok
        if tok.upper in _CONSUMPTION_MODES:
            self._advance()
            return tok.upper
        raise self._error(f"expected one of {', '.join(_CONSUMPTION_MODES)} after CONSUMPTION, "
                          f"found {tok.describe()}")

    def _parse_selection(self) -> str:
        """lakecep extension: ``SKIP TILL NEXT MATCH`` / ``SKIP TILL ANY MATCH``."""
        if not self._is_kw("SKIP"):
            return "STRICT"
        self._expect_kw("SKIP", "TILL")
        if self._match_kw("NEXT"):
            mode = "NEXT"
        elif self._match_kw("ANY"):
            mode = "ANY"
        else:
            raise self._error(f"expected NEXT or ANY after SKIP TILL, found "
                              f"{self.tok.describe()}")
        self._expect_kw("MATCH")
        return mode

    def _unexpected_clause(self) -> QueryError:
        tok = self.tok
        if tok.kind is Kind.EOF:
            return self._error("expected ')' to close MATCH_RECOGNIZE, found end of query")
        if tok.upper in ("UNCERTAIN", "PMF", "GRANULARITY") or self._is_kw("EVENT", "CONSTRAINTS") \
                or self._is_kw("WITH", "PROBABILITY"):
            return self._error(f"{tok.describe()} is out of place; UNCERTAIN TIME BETWEEN .. "
                               "AND .. [PMF ..] [GRANULARITY ..] [EVENT CONSTRAINTS (...)] "
                               "[WITH PROBABILITY >= p] follows PATTERN and its extensions "
                               "and comes before SUBSET and DEFINE", tok)
        if tok.upper in ("WITHIN", "SKIP", "CONSUMPTION", "EMIT"):
            return self._error(f"{tok.describe()} is out of place; the lakecep extensions "
                               "follow PATTERN (...) in the order WITHIN, SKIP TILL ... MATCH, "
                               "CONSUMPTION, EMIT TIMEOUTS", tok)
        for clause in _CLAUSES:
            words = clause.split()
            if self._is_kw(*words[:1]):
                return self._error(f"clause {clause} is out of order; MATCH_RECOGNIZE clauses "
                                   "go PARTITION BY, ORDER BY, MEASURES, ROWS PER MATCH, AFTER "
                                   "MATCH SKIP, PATTERN, SUBSET, DEFINE", tok)
        expected = ", ".join(_CLAUSES)
        return self._error(f"unknown clause {tok.describe()} in MATCH_RECOGNIZE; expected one "
                           f"of {expected}", tok)

    def _parse_column_list(self) -> tuple[ast.Column, ...]:
        cols = [self._parse_plain_column()]
        while self._match_sym(","):
            cols.append(self._parse_plain_column())
        return tuple(cols)

    def _parse_key_list(self) -> tuple[ast.Column, ...]:
        keys = [self._parse_key()]
        while self._match_sym(","):
            keys.append(self._parse_key())
        return tuple(keys)

    def _parse_key(self) -> ast.Column:
        """A PARTITION BY / ORDER BY key: a column, or (lakecep extension) an expression of
        the input row, named by its printed text (docs/query-language.md)."""
        pos = self._pos()
        expr = self._parse_expr()
        if isinstance(expr, ast.Column) and expr.var is None and expr.computed is None:
            return ast.Column(expr.name, None, expr.quoted, pos)
        return ast.Column(to_sql(expr), None, True, pos, expr)

    def _parse_plain_column(self) -> ast.Column:
        name, quoted, tok = self._parse_name("a column name")
        return ast.Column(name, None, quoted, self._pos(tok))

    def _parse_sort_list(self, keys: bool = False) -> tuple[ast.SortItem, ...]:
        items = [self._parse_sort_item(keys)]
        while self._match_sym(","):
            items.append(self._parse_sort_item(keys))
        return tuple(items)

    def _parse_sort_item(self, key: bool = False) -> ast.SortItem:
        if key:
            col = self._parse_key()
        else:
            col = self._parse_plain_column()
            if self._match_sym("."):  # alias.column in the outer ORDER BY
                col = self._parse_plain_column()
        descending = False
        if self._match_kw("DESC"):
            descending = True
        else:
            self._match_kw("ASC")
        nulls_first = None
        if self._match_kw("NULLS"):
            if self._match_kw("FIRST"):
                nulls_first = True
            else:
                self._expect_kw("LAST")
                nulls_first = False
        return ast.SortItem(col, descending, nulls_first)

    def _parse_measures(self) -> tuple[ast.Measure, ...]:
        items = [self._parse_measure()]
        while self._match_sym(","):
            items.append(self._parse_measure())
        return tuple(items)

    def _parse_measure(self) -> ast.Measure:
        pos = self._pos()
        expr = self._parse_expr()
        self._expect_kw("AS")
        name, quoted, _ = self._parse_name("a measure name")
        return ast.Measure(expr, name, quoted, pos)

    def _parse_rows_per_match(self) -> str:
        if self._match_kw("ONE"):
            self._expect_kw("ROW", "PER", "MATCH")
            return "ONE"
        self._expect_kw("ALL", "ROWS", "PER", "MATCH")
        if self._match_kw("SHOW"):
            self._expect_kw("EMPTY", "MATCHES")
            return "ALL SHOW"
        if self._match_kw("OMIT"):
            self._expect_kw("EMPTY", "MATCHES")
            return "ALL OMIT"
        if self._match_kw("WITH"):
            self._expect_kw("UNMATCHED", "ROWS")
            return "ALL UNMATCHED"
        return "ALL SHOW"

    def _parse_skip(self) -> ast.SkipTo:
        pos = self._pos()
        self._expect_kw("AFTER", "MATCH", "SKIP")
        if self._match_kw("PAST"):
            self._expect_kw("LAST", "ROW")
            return ast.SkipTo("PAST LAST ROW", pos=pos)
        self._expect_kw("TO")
        if self._match_kw("NEXT", "ROW"):
            return ast.SkipTo("TO NEXT ROW", pos=pos)
        kind = "TO LAST"
        # FIRST / LAST are non-reserved: a variable may be named so (SKIP TO FIRST FIRST).
        if self._is_kw("FIRST") and self._peek().kind in (Kind.IDENT, Kind.QUOTED):
            self._advance()
            kind = "TO FIRST"
        elif self._is_kw("LAST") and self._peek().kind in (Kind.IDENT, Kind.QUOTED):
            self._advance()
            kind = "TO LAST"
        var, tok = self._parse_var_name()
        return ast.SkipTo(kind, var, self._pos(tok))

    # ------------------------------------------------------------------ PATTERN
    def _parse_pattern_clause(self) -> ast.Pattern:
        self._expect_kw("PATTERN")
        self._expect_sym("(", "after PATTERN")
        if self._is_sym(")"):
            pos = self._pos()
            self._advance()
            return ast.Concat((), pos)
        pattern = self._parse_alternation()
        if not self._is_sym(")"):
            raise self._error(f"unexpected {self.tok.describe()} in PATTERN; expected a "
                              "variable, '(', '|', a quantifier or ')'")
        self._advance()
        return pattern

    def _parse_alternation(self) -> ast.Pattern:
        pos = self._pos()
        self._nest(self.tok)
        items = [self._parse_concat()]
        while self._match_sym("|"):
            items.append(self._parse_concat())
        self.depth -= 1
        return items[0] if len(items) == 1 else ast.Alternation(tuple(items), pos)

    def _parse_concat(self) -> ast.Pattern:
        pos = self._pos()
        items: list[ast.Pattern] = []
        while self._starts_term():
            items.append(self._parse_quantified())
        if not items:
            raise self._error(f"expected a pattern term, found {self.tok.describe()}")
        return items[0] if len(items) == 1 else ast.Concat(tuple(items), pos)

    def _starts_term(self) -> bool:
        tok = self.tok
        if tok.kind is Kind.QUOTED:
            return True
        if tok.kind is Kind.IDENT:
            return tok.upper not in RESERVED or tok.upper == "NOT"
        return tok.kind is Kind.SYMBOL and tok.text in ("(", "{-", "^", "$")

    def _parse_quantified(self) -> ast.Pattern:
        pos = self._pos()
        term = self._parse_term()
        quant = self._parse_quantifier()
        if quant is None:
            return term
        low, high, text = quant
        greedy = not self._match_sym("?")
        if isinstance(term, ast.Anchor):
            raise QueryError("an anchor cannot be quantified", *pos)
        if self.tok.kind is Kind.SYMBOL and self.tok.text in ("*", "+", "?", "{"):
            raise self._error("a quantifier cannot follow another quantifier; use parentheses, "
                              "e.g. (A*){2}")
        return ast.Quantified(term, low, high, greedy, text, pos)

    def _parse_quantifier(self) -> tuple[int, int | None, str] | None:
        if self._match_sym("*"):
            return 0, None, "*"
        if self._match_sym("+"):
            return 1, None, "+"
        if self._match_sym("?"):
            return 0, 1, "?"
        if not self._is_sym("{"):
            return None
        open_tok = self._advance()
        low: int | None = None
        high: int | None = None
        if self.tok.kind is Kind.NUMBER:
            low = self._parse_count()
        if self._match_sym(","):
            if self.tok.kind is Kind.NUMBER:
                high = self._parse_count()
            text = f"{{{'' if low is None else low},{'' if high is None else high}}}"
        else:
            if low is None:
                raise self._error(f"bad quantifier: expected a number, found "
                                  f"{self.tok.describe()}")
            high = low
            text = f"{{{low}}}"
        if not self._is_sym("}"):
            raise self._error(f"bad quantifier: expected '}}', found {self.tok.describe()}")
        self._advance()
        low_val = 0 if low is None else low
        if high is not None and high < low_val:
            raise QueryError(f"bad quantifier {text}: the upper bound is below the lower bound",
                             open_tok.line, open_tok.column)
        if high == 0:
            raise QueryError(f"bad quantifier {text}: the upper bound must be positive",
                             open_tok.line, open_tok.column)
        return low_val, high, text

    def _parse_count(self) -> int:
        tok = self._advance()
        if not tok.text.isdigit():
            raise self._error("bad quantifier: expected a whole number", tok)
        return int(tok.text)

    def _parse_term(self) -> ast.Pattern:
        tok = self.tok
        pos = self._pos()
        if self._match_sym("("):
            if self._match_sym(")"):
                return ast.Group(ast.Concat((), pos), pos)
            body = self._parse_alternation()
            self._expect_sym(")", "to close the pattern group")
            return ast.Group(body, pos)
        if self._match_sym("{-"):
            body = self._parse_alternation()
            self._expect_sym("-}", "to close the exclusion")
            return ast.Exclusion(body, pos)
        if self._match_sym("^"):
            return ast.Anchor("^", pos)
        if self._match_sym("$"):
            return ast.Anchor("$", pos)
        if tok.kind is Kind.IDENT and tok.upper == "NOT":
            # lakecep extension: negation of a single variable
            self._advance()
            name, _ = self._parse_var_name()
            if self.tok.kind is Kind.SYMBOL and self.tok.text in ("*", "+", "?", "{"):
                raise self._error("a negated variable (NOT var) cannot be quantified")
            return ast.Negation(name, pos)
        if tok.upper == "PERMUTE" and self._peek().kind is Kind.SYMBOL \
                and self._peek().text == "(":
            self._advance()
            self._expect_sym("(", "after PERMUTE")
            items = [self._parse_alternation()]
            while self._match_sym(","):
                items.append(self._parse_alternation())
            self._expect_sym(")", "to close PERMUTE")
            return ast.Permute(tuple(items), pos)
        name, _ = self._parse_var_name()
        return ast.Var(name, pos)

    def _parse_within(self, clause: str = "WITHIN") -> ast.IntervalLiteral | ast.Literal:
        if self._is_kw("INTERVAL"):
            return self._parse_interval()
        tok = self.tok
        if tok.kind is Kind.NUMBER:
            self._advance()
            return ast.Literal(_number(tok.text), self._pos(tok))
        raise self._error(f"expected INTERVAL '<n>' <unit> or a number after {clause}, found "
                          f"{tok.describe()}")

    def _parse_subsets(self) -> tuple[ast.Subset, ...]:
        items = [self._parse_subset()]
        while self._match_sym(","):
            items.append(self._parse_subset())
        return tuple(items)

    def _parse_subset(self) -> ast.Subset:
        name, tok = self._parse_var_name()
        self._expect_sym("=", "in SUBSET")
        self._expect_sym("(", "in SUBSET")
        names = [self._parse_var_name()[0]]
        while self._match_sym(","):
            names.append(self._parse_var_name()[0])
        self._expect_sym(")", "to close SUBSET")
        return ast.Subset(name, tuple(names), self._pos(tok))

    def _parse_defines(self) -> tuple[ast.Define, ...]:
        items = [self._parse_define()]
        while self._match_sym(","):
            items.append(self._parse_define())
        return tuple(items)

    def _parse_define(self) -> ast.Define:
        name, tok = self._parse_var_name()
        self._expect_kw("AS")
        return ast.Define(name, self._parse_expr(), self._pos(tok))

    # ------------------------------------------------------------------ expressions
    def _parse_expr(self) -> ast.Expr:
        self._nest(self.tok)
        expr = self._parse_or()
        self.depth -= 1
        return expr

    def _parse_or(self) -> ast.Expr:
        left = self._parse_and()
        while self._is_kw("OR"):
            pos = self._pos()
            self._advance()
            left = ast.Binary("OR", left, self._parse_and(), pos)
        return left

    def _parse_and(self) -> ast.Expr:
        left = self._parse_not()
        while self._is_kw("AND"):
            pos = self._pos()
            self._advance()
            left = ast.Binary("AND", left, self._parse_not(), pos)
        return left

    def _parse_not(self) -> ast.Expr:
        if self._is_kw("NOT"):
            pos = self._pos()
            self._nest(self._advance())
            operand = self._parse_not()
            self.depth -= 1
            return ast.Unary("NOT", operand, pos)
        return self._parse_comparison()

    def _parse_comparison(self) -> ast.Expr:
        left = self._parse_additive()
        while True:
            tok = self.tok
            pos = self._pos()
            if tok.kind is Kind.SYMBOL and tok.text in _COMPARISONS:
                self._advance()
                op = "<>" if tok.text == "!=" else tok.text
                left = ast.Binary(op, left, self._parse_additive(), pos)
            elif self._is_kw("IS"):
                self._advance()
                negated = self._match_kw("NOT")
                self._expect_kw("NULL")
                left = ast.IsNull(left, negated, pos)
            elif self._is_kw("BETWEEN") or self._is_kw("NOT", "BETWEEN"):
                negated = self._match_kw("NOT")
                self._advance()
                low = self._parse_additive()
                self._expect_kw("AND")
                high = self._parse_additive()
                left = ast.Between(left, low, high, negated, pos)
            elif self._is_kw("LIKE") or self._is_kw("NOT", "LIKE"):
                negated = self._match_kw("NOT")
                self._advance()
                pattern = self._parse_additive()
                escape = self._parse_additive() if self._match_kw("ESCAPE") else None
                left = ast.Like(left, pattern, escape, negated, pos)
            elif self._is_kw("IN") or self._is_kw("NOT", "IN"):
                negated = self._match_kw("NOT")
                self._advance()
                self._expect_sym("(", "after IN")
                items = [self._parse_expr()]
                while self._match_sym(","):
                    items.append(self._parse_expr())
                self._expect_sym(")", "to close IN (...)")
                left = ast.InList(left, tuple(items), negated, pos)
            else:
                return left

    def _parse_additive(self) -> ast.Expr:
        left = self._parse_multiplicative()
        while self.tok.kind is Kind.SYMBOL and self.tok.text in ("+", "-", "||"):
            pos = self._pos()
            op = self._advance().text
            left = ast.Binary(op, left, self._parse_multiplicative(), pos)
        return left

    def _parse_multiplicative(self) -> ast.Expr:
        left = self._parse_unary()
        while self.tok.kind is Kind.SYMBOL and self.tok.text in ("*", "/", "%"):
            pos = self._pos()
            op = self._advance().text
            left = ast.Binary(op, left, self._parse_unary(), pos)
        return left

    def _parse_unary(self) -> ast.Expr:
        if self.tok.kind is Kind.SYMBOL and self.tok.text in ("-", "+"):
            pos = self._pos()
            sign = self._advance()
            op = sign.text
            self._nest(sign)
            operand = self._parse_unary()
            self.depth -= 1
            if op == "-" and isinstance(operand, ast.Literal) and _is_number(operand.value):
                return ast.Literal(-operand.value, pos)  # type: ignore[operator]
            return ast.Unary(op, operand, pos)
        return self._parse_primary()

    def _parse_primary(self) -> ast.Expr:
        tok = self.tok
        pos = self._pos()
        if tok.kind is Kind.NUMBER:
            self._advance()
            return ast.Literal(_number(tok.text), pos)
        if tok.kind is Kind.STRING:
            self._advance()
            return ast.Literal(tok.text, pos)
        if self._match_sym("("):
            expr = self._parse_expr()
            self._expect_sym(")", "to close the parenthesis")
            return expr
        if tok.kind is Kind.IDENT:
            word = tok.upper
            if word in ("TRUE", "FALSE"):
                self._advance()
                return ast.Literal(word == "TRUE", pos)
            if word == "NULL":
                self._advance()
                return ast.Literal(None, pos)
            if word == "INTERVAL" and self._peek().kind in (Kind.STRING, Kind.NUMBER):
                return self._parse_interval()
            if word == "TIMESTAMP" and self._peek().kind is Kind.STRING:
                self._advance()
                return ast.TimestampLiteral(self._advance().text, pos)
            if word == "CASE":
                return self._parse_case()
            if word == "CAST" and self._peek().text == "(":
                return self._parse_cast()
            if word in ("RUNNING", "FINAL") and self._peek().kind is Kind.IDENT \
                    and self._peek(2).kind is Kind.SYMBOL and self._peek(2).text == "(":
                self._advance()
                call = self._parse_primary()
                if not isinstance(call, ast.Call):
                    raise QueryError(f"{word} must be followed by a function call such as "
                                     "LAST(...) or SUM(...)", *pos)
                if call.name in ("PREV", "NEXT", "MATCH_NUMBER", "CLASSIFIER"):
                    # Trino / SQL:2016: RUNNING and FINAL qualify logical navigation
                    # (FIRST, LAST) and aggregates; PREV/NEXT navigate physically. The
                    # final classifier is written FINAL LAST(CLASSIFIER()).
                    raise QueryError(f"{word} cannot be applied to {call.name}; it applies "
                                     "to FIRST, LAST and aggregates (e.g. FINAL "
                                     "LAST(CLASSIFIER()))", *pos)
                return ast.Call(call.name, call.args, word, pos, call.distinct, call.filter)
            if self._peek().kind is Kind.SYMBOL and self._peek().text == "(" and (
                    word not in RESERVED or word in _RESERVED_FUNCTIONS):
                return self._parse_call()
        if tok.kind in (Kind.IDENT, Kind.QUOTED):
            return self._parse_column_ref()
        raise self._error(f"expected an expression, found {tok.describe()}")

    def _parse_interval(self) -> ast.IntervalLiteral:
        pos = self._pos()
        self._expect_kw("INTERVAL")
        tok = self.tok
        if tok.kind is Kind.STRING:
            amount = tok.text
        elif tok.kind is Kind.NUMBER:
            amount = tok.text
        else:
            raise self._error(f"expected the interval amount in quotes, e.g. INTERVAL '10' "
                              f"HOUR, found {tok.describe()}")
        try:
            value = float(amount)
        except ValueError:
            raise self._error(f"bad interval amount '{amount}'", tok) from None
        if not math.isfinite(value):
            raise self._error(f"bad interval amount '{amount}'", tok)
        self._advance()
        unit_tok = self.tok
        unit = unit_tok.upper
        if unit.endswith("S") and unit[:-1] in _INTERVAL_UNITS:
            unit = unit[:-1]
        if unit not in _INTERVAL_UNITS:
            raise self._error(f"unknown interval unit {unit_tok.describe()}; expected SECOND, "
                              "MINUTE, HOUR or DAY", unit_tok)
        if abs(value) * _UNIT_SECONDS[unit] > _MAX_INTERVAL_SECONDS:
            raise self._error(f"interval '{amount}' {unit} is out of range: at most "
                              f"{_MAX_INTERVAL_SECONDS // 86400:,} days (the span of "
                              "nanosecond timestamps)", tok)
        self._advance()
        return ast.IntervalLiteral(amount, unit, pos)

    def _parse_case(self) -> ast.Case:
        pos = self._pos()
        self._expect_kw("CASE")
        operand = None if self._is_kw("WHEN") else self._parse_expr()
        whens: list[tuple[ast.Expr, ast.Expr]] = []
        while self._match_kw("WHEN"):
            cond = self._parse_expr()
            self._expect_kw("THEN")
            whens.append((cond, self._parse_expr()))
        if not whens:
            raise self._error(f"expected WHEN, found {self.tok.describe()}")
        default = self._parse_expr() if self._match_kw("ELSE") else None
        self._expect_kw("END")
        return ast.Case(operand, tuple(whens), default, pos)

    def _parse_cast(self) -> ast.Cast:
        pos = self._pos()
        self._expect_kw("CAST")
        self._expect_sym("(", "after CAST")
        operand = self._parse_expr()
        self._expect_kw("AS")
        tok = self.tok
        word = tok.upper
        if word not in CAST_TYPES:
            raise self._error(f"unknown type {tok.describe()} in CAST; expected one of "
                              f"{', '.join(CAST_TYPES)}")
        self._advance()
        type_name = word
        if self._is_sym("(") and CAST_TYPES[word]:
            self._advance()
            sizes = [self._parse_type_size()]
            while len(sizes) < CAST_TYPES[word] and self._match_sym(","):
                sizes.append(self._parse_type_size())
            self._expect_sym(")", f"to close the {word} size")
            type_name += "(" + ",".join(sizes) + ")"
        self._expect_sym(")", "to close CAST(")
        return ast.Cast(operand, type_name, pos)

    def _parse_type_size(self) -> str:
        tok = self.tok
        if tok.kind is not Kind.NUMBER or not tok.text.isdigit():
            raise self._error(f"expected a whole number in the type, found {tok.describe()}")
        self._advance()
        return str(int(tok.text))

    def _parse_call(self) -> ast.Call:
        pos = self._pos()
        name = self._advance().text.upper()
        self._expect_sym("(")
        args: list[ast.Expr] = []
        distinct = False
        if self._is_kw("DISTINCT"):
            if name != "COUNT":
                raise self._error(f"DISTINCT is only supported in COUNT, not {name}")
            self._advance()
            distinct = True
            if self._is_sym("*") or self._is_sym(")"):
                raise self._error("COUNT(DISTINCT ...) needs an expression")
        if not self._is_sym(")"):
            args.append(self._parse_call_arg())
            while self._match_sym(","):
                args.append(self._parse_call_arg())
        self._expect_sym(")", f"to close {name}(")
        if distinct and len(args) != 1:
            raise QueryError("COUNT(DISTINCT ...) takes exactly one expression", *pos)
        condition = None
        # FILTER is non-reserved: it starts a filter clause only as FILTER ( WHERE.
        if self._is_kw("FILTER") and self._peek().text == "(" and self._peek(2).upper == "WHERE":
            self._advance()
            self._advance()
            self._expect_kw("WHERE")
            condition = self._parse_expr()
            self._expect_sym(")", "to close FILTER (WHERE ...")
        elif self._is_kw("FILTER") and name in ("COUNT", "SUM", "AVG", "MIN", "MAX"):
            raise self._error(f"expected FILTER (WHERE condition) after {name}(...), found "
                              f"{self._peek().describe()} after FILTER")
        return ast.Call(name, tuple(args), None, pos, distinct, condition)

    def _parse_call_arg(self) -> ast.Expr:
        pos = self._pos()
        if self._match_sym("*"):
            return ast.Star(None, pos)
        if (self.tok.kind in (Kind.IDENT, Kind.QUOTED) and self._peek().text == "."
                and self._peek(2).text == "*" and self._peek(2).kind is Kind.SYMBOL):
            var, _ = self._parse_var_name()
            self._advance()
            self._advance()
            return ast.Star(var, pos)
        return self._parse_expr()

    def _parse_column_ref(self) -> ast.Column:
        pos = self._pos()
        name, quoted, tok = self._parse_name("a column name")
        if self._is_sym(".") and self._peek().kind in (Kind.IDENT, Kind.QUOTED):
            self._advance()
            var = name if quoted else name.upper()
            col, col_quoted, _ = self._parse_name("a column name")
            return ast.Column(col, var, col_quoted, pos)
        return ast.Column(name, None, quoted, pos)


def _number(text: str) -> int | float:
    if text.isdigit():
        return int(text)
    return float(text)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
