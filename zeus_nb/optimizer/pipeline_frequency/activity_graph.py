"""A DAG of activities in array form, its longest paths and its critical activities.

Activities are numbered in a topological order and framed by a zero-length source (index 0,
before every activity without a predecessor) and sink (last index, after every activity without a
successor). Longest paths are shortest paths on negated lengths, which scipy's compiled Dijkstra
finds once every arc ``u -> v`` is shifted by ``K * (level(v) - level(u))``, with ``level`` the
number of arcs on the longest path from the source and ``K`` above every length: the shift is the
same for every path between two nodes (a potential), and makes every weight positive.

Each activity is also an arc of the *activity-on-arc* form the time–cost solver cuts: activity
``x`` runs from node ``2x`` to node ``2x + 1``, and a precedence ``u -> v`` is a zero-length arc
from ``2u + 1`` to ``2v``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra


@dataclass
class ActivityGraph:
    """Activities ``1 .. n`` (``0`` is the source, ``n + 1`` the sink) and precedence arcs."""

    num_activities: int
    arc_from: np.ndarray  # u of each arc u -> v, in extended numbering
    arc_to: np.ndarray  # v of each arc u -> v
    _both: sp.csr_matrix = field(init=False, repr=False)
    _entry_length: np.ndarray = field(init=False, repr=False)
    _entry_levels: np.ndarray = field(init=False, repr=False)
    _potential: np.ndarray = field(init=False, repr=False)
    _shift: tuple = field(init=False, repr=False)
    _pick: np.ndarray = field(init=False, repr=False)

    @classmethod
    def from_predecessors(cls, predecessors: Sequence[Sequence[int]]) -> ActivityGraph:
        """Activities ``0 .. n-1`` in a topological order, each with its predecessors' indices."""
        n = len(predecessors)
        has_succ = np.zeros(n, bool)
        us, vs = [], []
        for v, preds in enumerate(predecessors):
            if not preds:
                us.append(0)
                vs.append(v + 1)
            for u in preds:
                if not 0 <= u < v:
                    raise ValueError(f"activity {v}: predecessor {u} is not earlier in the order")
                us.append(u + 1)
                vs.append(v + 1)
                has_succ[u] = True
        for u in np.flatnonzero(~has_succ):
            us.append(int(u) + 1)
            vs.append(n + 1)
        return cls(n, np.array(us, np.int64), np.array(vs, np.int64))

    def __post_init__(self) -> None:
        # One graph holds the DAG (nodes 0 .. size-1) and, beside it, the reversed DAG numbered
        # backwards (node x at 2 size - 1 - x), so that one Dijkstra call with two sources finds
        # heads and tails.
        size = self.num_activities + 2
        last = 2 * size - 1
        rows = np.concatenate([self.arc_from, last - self.arc_to])
        cols = np.concatenate([self.arc_to, last - self.arc_from])
        order = np.lexsort((cols, rows))
        indptr = np.searchsorted(rows[order], np.arange(2 * size + 1)).astype(np.int32)
        self._both = sp.csr_matrix(
            (np.zeros(len(rows)), cols[order].astype(np.int32), indptr), shape=(2 * size,) * 2
        )
        # each stored entry weighs minus the length of its arc's predecessor activity
        self._entry_length = np.concatenate([self.arc_from, self.arc_from])[order]
        level = np.zeros(2 * size, np.int64)  # arcs on the longest path from either source
        for a in order:  # rows ascend in topological order in both halves
            level[cols[a]] = max(level[cols[a]], level[rows[a]] + 1)
        self._potential = level.astype(float)
        self._entry_levels = (level[cols[order]] - level[rows[order]]).astype(float)
        # row 0 of the two-source distances for the DAG's nodes, row 1 for the reversed ones
        self._pick = np.concatenate([np.arange(size), 3 * size + np.arange(size)])
        self._shift = (0, None, None)  # K and the shifts it makes, for the last K used

    @property
    def size(self) -> int:
        """Activities plus source and sink."""
        return self.num_activities + 2

    def longest_paths(self, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """Earliest starts, longest tails (own length to the end) and the total length.

        ``lengths`` holds one integer per extended activity (source and sink: 0). The results
        are whole numbers held as floats (exact far beyond any plan's length).
        """
        size = self.size
        k = float(lengths.max()) + 1.0
        if k != self._shift[0]:
            self._shift = (k, k * self._entry_levels, k * self._potential)
        both = self._both
        both.data = self._shift[1] - lengths[self._entry_length]
        dist = dijkstra(both, directed=True, indices=[0, size]).reshape(-1)
        longest = self._shift[2] - dist[self._pick]
        return longest[:size], longest[size:][::-1], longest[size - 1]

    def critical(self, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """Which activities and which precedence arcs lie on a longest path, and its length."""
        start, tail, total = self.longest_paths(lengths)
        activities = start + tail == total
        arcs = (start + lengths)[self.arc_from] + tail[self.arc_to] == total
        return activities, arcs, total

    def arc_nodes(self) -> tuple[np.ndarray, np.ndarray]:
        """Activity-on-arc form: (from, to) nodes of every activity, then of every precedence."""
        x = np.arange(self.size)
        frm = np.concatenate([2 * x, 2 * self.arc_from + 1])
        to = np.concatenate([2 * x + 1, 2 * self.arc_to])
        return frm, to
