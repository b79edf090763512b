"""Zeus's trace-driven simulator API of the NSDI '23 paper (``zeus._legacy``), for old scripts.

Scripts written for ``zeus._legacy`` (``job.Job``, ``policy``, ``simulate.Simulator``) run with
``zeus`` changed to ``zeus_nb`` in their imports. Underneath, the policies are zeus-nb's
batch-size optimizer (:mod:`zeus_nb.optimizer.batch_size`) and runs are replayed by its
simulator; new code should use those directly. See docs/batch_size_optimizer.md.
"""
