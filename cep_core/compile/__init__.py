"""From a checked syntax tree to what the runtime executes, never seeing rows: the
pattern compiler (regex -> program), the expression compiler (DEFINE/MEASURES -> Python
functions) and the checks of the extensions (SEQ/AND/OR, NOT, consumption...)."""

from . import patterns
from .checks import check_extensions, has_negation
from .expressions import ExprCompiler, Scope, walk
from .patterns import Program, compile_pattern, pattern_variables
from .state import MatchState

__all__ = ["ExprCompiler", "MatchState", "Program", "Scope", "check_extensions",
           "compile_pattern", "has_negation", "pattern_variables", "patterns", "walk"]
