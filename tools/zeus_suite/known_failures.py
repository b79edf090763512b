"""Zeus's own unit tests that fail against zeus-nb on purpose: test id, failure, reason.

``tools/zeus_suite/run.py`` runs Zeus 0.16's tests (from its wheel) against zeus-nb;
``tests/test_zeus_suite.py`` fails on a failure or error not listed here, on a listed test that
fails with a message its ``failure`` pattern does not match (a new cause hiding behind a known
id), on a listed test that now passes (remove it), and when the listed ones exceed 1 % of the
tests collected. ``docs/zeus_compat.md`` lists them from this table.
"""

from __future__ import annotations

from typing import NamedTuple


class KnownFailure(NamedTuple):
    """``failure``: a regular expression the test's one-line failure message must match
    (``re.search``); ``why``: the reason, for the docs."""

    failure: str
    why: str


#: test id (as pytest prints it, relative to the unpacked tests' root) -> its known failure.
#: Empty since every Zeus 0.16 test passes; keep the mechanism for a deliberate difference.
KNOWN_FAILURES: dict[str, KnownFailure] = {}
