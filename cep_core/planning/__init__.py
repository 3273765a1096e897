"""Plan-based event acquisition (seed 003: Akdere, Cetintemel, Tatbul, VLDB 2008).

Read the rare event types first and pull the frequent ones only over the intervals where a
match is still possible. See ``docs/acquisition.md`` for the semantics and the formulas."""

from .loads import (
    acquire,
    count_in,
    intersect,
    live_plan,
    merge,
    next_steps,
    step_loads,
    step_types,
    sub_events,
)
from .matching import ComplexEvent, complex_events
from .model import (
    AcquisitionPlan,
    And,
    Distribution,
    Event,
    Histogram,
    Item,
    LatencyModel,
    NodeModel,
    Not,
    Option,
    Or,
    Pattern,
    PlanningError,
    Poisson,
    Requirement,
    Seq,
    Statistics,
    and_,
    expected_measure,
    not_,
    occurrence_rate,
    or_,
    parse_pattern,
    primitive_types,
    seq,
    validate,
)
from .pareto import KEEP_STRATEGIES, dominates, keep, pareto
from .planners import (
    METHODS,
    Planner,
    backward,
    brute_force,
    choose,
    dp,
    forward,
    frequency_order,
    heuristic,
    ordered_partitions,
    plan,
    pull_everything,
    step_options,
)
from .predict import draw, expected_reads, predicted_rows
from .sharing import SharedPlan, common_subexpressions, plan_shared, shared_cost, union_measure

__all__ = [
    "KEEP_STRATEGIES", "METHODS", "AcquisitionPlan", "And", "Distribution", "Event",
    "Histogram", "Item", "LatencyModel", "NodeModel", "Not", "Option", "Or", "Pattern",
    "Planner", "PlanningError", "Poisson", "Requirement", "Seq", "Statistics", "and_",
    "backward", "brute_force", "choose", "dominates", "dp", "expected_measure", "forward",
    "frequency_order", "heuristic", "keep", "not_", "occurrence_rate", "or_",
    "ordered_partitions", "pareto", "plan", "primitive_types", "pull_everything", "seq",
    "step_options", "validate", "acquire", "count_in", "intersect", "live_plan", "merge",
    "step_loads", "SharedPlan", "common_subexpressions", "plan_shared", "shared_cost",
    "union_measure", "next_steps", "step_types", "sub_events", "ComplexEvent",
    "complex_events", "parse_pattern", "draw", "expected_reads", "predicted_rows",
]
