"""The MATCH_RECOGNIZE language: text <-> tree. Tokens, the parser (text -> :mod:`ast`),
the syntax tree and the printer (tree -> SQL text). No pandas, no rows."""

from . import ast
from .parser import parse, parse_expression
from .printer import to_sql
from .tokens import Kind, Token, tokenize

__all__ = ["Kind", "Token", "ast", "parse", "parse_expression", "to_sql", "tokenize"]
