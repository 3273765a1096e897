"""Running a compiled query over rows: the general matcher (backtracking over the pattern
program), consumption policies, vectorised DEFINE conditions, the fast path and the
engine's one time axis (elapsed UTC nanoseconds)."""

from .consumption import Consumer, Instance, consume
from .matcher import Conditions, Matcher, RawMatch, SkipPolicy, Window
from .time_axis import order_numbers, time_numbers, time_values
from .vectorized import evaluate_condition

__all__ = ["Conditions", "Consumer", "Instance", "Matcher", "RawMatch", "SkipPolicy",
           "Window", "consume", "evaluate_condition", "order_numbers", "time_numbers",
           "time_values"]
