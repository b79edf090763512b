"""Zeus's own unit tests that fail against zeus-nb on purpose, by test id, with the reason.

``tools/zeus_suite/run.py`` runs Zeus 0.16's tests (from its wheel) against zeus-nb;
``tests/test_zeus_suite.py`` fails on a failure or error not listed here, on a listed test that
now passes (remove it), and when the listed ones exceed 1 % of the tests collected.
``docs/zeus_compat.md`` lists them from this table.
"""

from __future__ import annotations

#: test id (as pytest prints it, relative to the unpacked tests' root) -> why it fails here.
KNOWN_FAILURES: dict[str, str] = {}
