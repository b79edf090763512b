"""Minimum s-t cut of a network whose arcs carry flow lower and upper bounds, on scipy's max flow.

The Phillips–Dessouky step needs, over the cuts ``(S, T)`` of a network with arc bounds
``[lb, ub]``, the one minimizing ``sum(ub forward) - sum(lb backward)``, and needs to know whether
any flow meets all the bounds (``lowtime`` stops when none does). Writing ``e(v)`` for the lower
bounds entering ``v`` minus those leaving it, that cut value equals ``sum((ub - lb) forward) +
sum(e(v) for v in T)``: up to a constant, the value of the cut in one network without lower
bounds, with capacities ``ub - lb``, an arc ``source -> v`` of capacity ``e(v)`` where it is
positive and ``v -> sink`` of ``-e(v)`` where negative (merged with the network's own arc between
the two where there is one). One max flow there gives the cut: the smallest source side, the
nodes still reachable from the source through arcs with residual capacity above ``threshold``. If
that flow saturates every ``e`` arc (none of them merged), adding the lower bounds back to it
gives a flow that meets all bounds; only otherwise does the textbook feasibility flow (from a
super source feeding every lower bound to a super sink draining them, with an unbounded arc from
sink to source) have to decide. Like ``lowtime``, which checks that flow's saturation to within
its ``1e-6`` J resolution, both tests let each node's lower bounds fall short by ``tolerance``.

scipy's :func:`~scipy.sparse.csgraph.maximum_flow` takes 32-bit integer capacities (and wraps
larger ones silently), so bounds arrive as integers of a caller-chosen resolution, with
``INFINITE`` standing for "no upper bound"; the caller keeps finite bounds summing to less than
``FINITE_TOTAL_LIMIT``. The source must have one outgoing arc and no incoming one, so that no
flow exceeds ``INFINITE`` plus that sum. The network's arcs are fixed and only the bounds change
between calls, so the sparse pattern is built once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

INFINITE = 2**30
FINITE_TOTAL_LIMIT = 2**27


@dataclass(frozen=True)
class Cut:
    """The source side of a minimum cut (bool per node), or why there is none."""

    source_side: np.ndarray | None
    reason: str = ""


def _feasible(n, frm, to, lower, upper, source, sink, tolerance) -> bool:
    """Whether some flow meets every arc's bounds, each node's lower bounds in and out short by at
    most ``tolerance`` (the textbook super source/sink test)."""
    into = np.bincount(to, lower, minlength=n).astype(np.int64)
    out = np.bincount(frm, lower, minlength=n).astype(np.int64)
    nodes = np.arange(n)
    rows = np.concatenate([frm, np.full(n, n), nodes, [sink]])
    cols = np.concatenate([to, nodes, np.full(n, n + 1), [source]])
    caps = np.concatenate([upper - lower, into, out, [INFINITE]])
    keep = caps > 0
    mat = sp.csr_matrix((caps[keep].astype(np.int32), (rows[keep], cols[keep])), shape=(n + 2,) * 2)
    flow = maximum_flow(mat, n, n + 1).flow[[n, n + 1]].toarray()[:, :n]
    return bool(np.all(into - flow[0] <= tolerance) and np.all(out + flow[1] <= tolerance))


class BoundedCutNetwork:
    """Arcs ``frm -> to`` among ``n`` nodes whose bounds change from one cut to the next."""

    def __init__(self, n: int, frm: np.ndarray, to: np.ndarray, source: int, sink: int) -> None:
        if np.count_nonzero(frm == source) != 1 or (to == source).any():
            raise ValueError("the source needs exactly one outgoing arc and no incoming one")
        self.n, self.frm, self.to, self.source, self.sink = n, frm, to, source, sink
        nodes = np.flatnonzero((np.arange(n) != source) & (np.arange(n) != sink))
        self._excess_nodes = nodes
        # where an excess arc coincides with an arc of the network, their flows mix
        self._shared = np.zeros(n, bool)
        self._shared[to[frm == source]] = self._shared[frm[to == sink]] = True
        self._shared[[source, sink]] = False
        rows = np.concatenate([frm, np.full(len(nodes), source), nodes])
        cols = np.concatenate([to, nodes, np.full(len(nodes), sink)])
        keys = np.concatenate([rows * n + cols, cols * n + rows])  # every arc and its reverse
        unique, inverse = np.unique(keys, return_inverse=True)
        self._entry = inverse[: len(rows)]  # entry of each forward arc in the pattern
        self._row = unique // n
        self._indices = (unique % n).astype(np.int32)
        self._reverse = np.searchsorted(unique, self._indices.astype(np.int64) * n + self._row)
        own = ~np.concatenate([self._shared[nodes], self._shared[nodes]])
        self._own_excess = np.zeros(len(unique), bool)  # entries of excess arcs not merged
        self._own_excess[self._entry[len(frm) :][own]] = True

    def _matrix(self, keep: np.ndarray, data: np.ndarray) -> sp.csr_matrix:
        """The pattern's entries where ``keep``, holding ``data`` (one value per kept entry)."""
        indptr = np.zeros(self.n + 1, np.int32)
        np.cumsum(np.bincount(self._row[keep], minlength=self.n), out=indptr[1:])
        return sp.csr_matrix((data, self._indices[keep], indptr), shape=(self.n, self.n))

    def min_cut(
        self, lower: np.ndarray, upper: np.ndarray, threshold: int = 0, tolerance: int = 0
    ) -> Cut:
        """The minimum cut under integer bounds ``[lower, upper]`` per arc (0, 0: no arc).

        ``upper`` is :data:`INFINITE` where unbounded. Returns no cut when no flow meets the
        lower bounds, each node's short by at most ``tolerance``.
        """
        n, source, sink = self.n, self.source, self.sink
        excess = np.bincount(self.to, lower, n) - np.bincount(self.frm, lower, n)
        ex = excess[self._excess_nodes]
        caps = np.concatenate([upper - lower, np.maximum(ex, 0), np.maximum(-ex, 0)])
        cap = np.bincount(self._entry, caps, minlength=len(self._row)).astype(np.int32)
        # only arcs with capacity, and their reverses, which the max flow needs anyway
        live = cap > 0
        live |= live[self._reverse]
        net = self._matrix(live, cap[live])
        flow = maximum_flow(net, source, sink, method="dinic").flow
        if not np.array_equal(flow.indices, net.indices):
            raise RuntimeError("scipy's max flow changed the network's sparse pattern")
        residual = net.data - flow.data
        met = not (residual[self._own_excess[live]] > tolerance).any()
        if not (met and not excess[self._shared].any()) and not _feasible(
            n, self.frm, self.to, lower, upper, source, sink, tolerance
        ):
            return Cut(None, "no flow meets the lower bounds")
        net.data = (residual > threshold).astype(float)  # the arcs left to search along
        net.eliminate_zeros()
        side = np.zeros(n, bool)
        side[breadth_first_order(net, source, directed=True, return_predecessors=False)] = True
        return Cut(side)
