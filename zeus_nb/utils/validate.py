"""Temporary: ``zeus_nb.monitor.energy`` still imports validation by its old path.

Validation moved to the input boundary (:mod:`zeus_nb.inputs.validate`). ``monitor/energy.py`` is
being rewritten elsewhere; once that rewrite imports ``zeus_nb.inputs.validate``, delete this file
(docs/architecture.md says so too).
"""

from zeus_nb.inputs.validate import integer

__all__ = ["integer"]
