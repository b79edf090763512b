"""The frontier's plans from the ``lowtime`` package's Phillips–Dessouky solver (the reference).

Each instruction becomes a ``lowtime`` operation with the options and cost model of
:mod:`~zeus_nb.optimizer.pipeline_frequency.cost_model` built from ``lowtime``'s own classes, on
a networkx DAG of the 1F1B iteration; the solver's assigned clocks are read after every step.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np

from zeus_nb.optimizer.pipeline_frequency.cost_model import (
    convex_hull_model,
    initial_guess,
    quantized_options,
)
from zeus_nb.optimizer.pipeline_frequency.plan_table import PlanTable
from zeus_nb.optimizer.pipeline_frequency.profile import InstructionProfile

logger = logging.getLogger(__name__)


def _cost_model(options):
    """lowtime's exponential model fitted from a data-driven guess; convex fallback otherwise."""
    from lowtime.cost_model import CostModel, ExponentialModel
    from scipy.optimize import OptimizeWarning

    q = np.array([o.quant_time for o in options.options], float)
    c = np.array([o.cost for o in options.options], float)
    if len(q) >= 3 and np.ptp(c) > 0:
        try:
            with warnings.catch_warnings():  # the fit's covariance is never used
                warnings.simplefilter("ignore", OptimizeWarning)
                model = ExponentialModel(options, initial_guess=initial_guess(q, c))
            a, b, _ = model.coefficients
            if a > 0 and b < 0 and np.all(np.isfinite(model.coefficients)):
                return model
        except (ValueError, RuntimeError) as e:
            logger.debug("exponential fit failed (%s); using the convex hull", e)
    hull = convex_hull_model(q, c)

    class _Hull(CostModel):
        def __call__(self, quant_time: int) -> float:
            return hull(quant_time)

    return _Hull()


def _build_dag(profile: InstructionProfile, table: PlanTable, unit: float, scale: float):
    import networkx as nx
    from lowtime.graph_utils import add_sink_node, add_source_node
    from lowtime.operation import CandidateExecutionOptions, ExecutionOption, OperationSpec
    from lowtime.perseus.instruction import Backward, Forward

    specs, models = {}, {}
    for s in range(profile.num_stages):
        for inst in ("forward", "backward"):
            opts = [
                ExecutionOption(real_time=o.real_time, unit_time=unit, cost=o.cost, knob=o.knob)
                for o in quantized_options(profile, s, inst, unit, scale)
            ]
            cands = CandidateExecutionOptions(options=opts)
            model = _cost_model(cands)
            specs[(s, inst)] = OperationSpec(options=cands, cost_model=model)
            models[(s, inst)] = (cands, model)
    dag = nx.DiGraph()
    for k, (s, inst, j) in enumerate(table.ops):
        cls = Forward if inst == "forward" else Backward
        dag.add_node(k, op=cls(spec=specs[(s, inst)], stage_id=s, micro_batch_id=j))
    for k, preds in enumerate(table.predecessors):
        for p in preds:
            dag.add_edge(p, k)
    source, sink = len(table.ops), len(table.ops) + 1
    add_source_node(dag, source)
    add_sink_node(dag, sink)
    dag.graph["source_node"], dag.graph["sink_node"] = source, sink
    return dag, models


def lowtime_clocks(profile: InstructionProfile, table: PlanTable, unit: float, scale: float = 1.0):
    """Clock rows (all-slowest first, then one per step) and the cost models per instruction."""
    from lowtime.solver import PhillipsDessouky

    dag, models = _build_dag(profile, table, unit, scale)
    columns = range(len(table.ops))

    def snapshot() -> list[int]:
        return [dag.nodes[k]["op"].assigned_knob for k in columns]

    rows = [snapshot()]
    for _ in PhillipsDessouky(dag).run():
        rows.append(snapshot())
    return np.array(rows, np.int64), models
