"""Pipeline frequency planning (Perseus): per-instruction SM clocks for pipeline training.

See ``docs/pipeline_frequency.md``. Read a profile (:func:`load_profile`) or make one
(:func:`synthetic_profile`), solve the frontier (:func:`solve_frontier`), pick a point, and apply
its plan while training with :class:`PipelineFrequencyOptimizer`.
"""

from zeus_nb.optimizer.pipeline_frequency.optimizer import (
    PipelineFrequencyOptimizer,
    plan_on_rank0,
)
from zeus_nb.optimizer.pipeline_frequency.profile import (
    InstructionProfile,
    Measurement,
    ProfileFormatError,
    load_profile,
    parse_profile,
)
from zeus_nb.optimizer.pipeline_frequency.schedule import (
    FrequencyPlan,
    Timeline,
    dependencies,
    evaluate,
    stage_order,
)
from zeus_nb.optimizer.pipeline_frequency.solver import (
    DeadlineError,
    Frontier,
    FrontierPoint,
    default_unit_time,
    frontier_gap,
    solve_frontier,
)
from zeus_nb.optimizer.pipeline_frequency.synthetic import (
    split_step,
    stage_works,
    synthetic_profile,
)

__all__ = [
    "DeadlineError",
    "FrequencyPlan",
    "Frontier",
    "FrontierPoint",
    "InstructionProfile",
    "Measurement",
    "PipelineFrequencyOptimizer",
    "ProfileFormatError",
    "Timeline",
    "default_unit_time",
    "dependencies",
    "evaluate",
    "frontier_gap",
    "load_profile",
    "parse_profile",
    "plan_on_rank0",
    "solve_frontier",
    "split_step",
    "stage_works",
    "stage_order",
    "synthetic_profile",
]
