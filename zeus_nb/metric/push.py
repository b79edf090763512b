"""Pushing one Prometheus registry to a Pushgateway, with errors that say what to do.

:mod:`zeus_nb.metric` builds on this: each metric object owns one :class:`Pusher` (its registry,
the gateway URL and the job name). A push the caller waits for raises :class:`PushgatewayError`;
a push from a background thread logs one warning when pushes start failing and one line when
they work again, so a gateway that restarts does not flood the log or stop training.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit

from zeus_nb.errors import InputError, ZeusNbError

try:
    from prometheus_client import CollectorRegistry, push_to_gateway
except ImportError:  # the `prometheus` extra is missing
    raise ImportError(
        "zeus_nb.metric needs prometheus-client: pip install 'zeus-nb[prometheus]'"
    ) from None

log = logging.getLogger("zeus_nb.metric")

#: Seconds a push may take (connecting included) before it counts as failed; short, so that an
#: unreachable gateway costs a training loop little.
PUSH_TIMEOUT = 3.0

START_HINT = (
    "start one (`prometheus-pushgateway`, or `docker run -d -p 9091:9091 prom/pushgateway`) "
    "or pass the right pushgateway_url"
)


class PushgatewayError(ZeusNbError, ConnectionError):
    """Metrics could not be pushed to the Prometheus Pushgateway (unreachable or refused)."""


def check_url(url: object) -> str:
    """``url`` if it can name a Pushgateway (``host:port`` or ``http(s)://host:port``)."""
    text = url.strip() if isinstance(url, str) else ""
    full = text if "://" in text else f"http://{text}"
    try:
        parts = urlsplit(full)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        ok = False
    if not ok:
        raise InputError(
            f"pushgateway_url {url!r} is not a Pushgateway URL; use e.g. 'http://localhost:9091'"
        )
    return text


def check_job(job: object) -> str:
    if not isinstance(job, str) or not job.strip():
        raise InputError(
            f"job {job!r} must be a non-empty name for the Prometheus job, e.g. 'training_energy'"
        )
    return job


def check_period(update_period: object) -> float:
    """``update_period`` in seconds, a finite number > 0."""
    try:
        value = float(update_period)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(update_period, bool) or not (math.isfinite(value) and value > 0):
        raise InputError(f"update_period {update_period!r} must be a number of seconds > 0, e.g. 2")
    return value


def check_buckets(values: Sequence[float], name: str) -> list[float]:
    """Histogram bucket bounds: a non-empty, strictly increasing list of numbers (J)."""
    example = "e.g. [50.0, 100.0, 200.0, 500.0, 1000.0], or leave it out for the defaults"
    try:
        bounds = [float(v) for v in values]
    except (TypeError, ValueError):
        raise InputError(f"{name} {values!r} must be a list of numbers (J), {example}") from None
    if not bounds:
        raise InputError(f"{name} is empty; give bucket bounds in J, {example}")
    pairs = zip(bounds[:-1], bounds[1:], strict=True)
    if any(math.isnan(b) for b in bounds) or any(b <= a for a, b in pairs):
        raise InputError(f"{name} {list(values)!r} must be strictly increasing, {example}")
    return bounds


def resolve_url(pushgateway_url: str | None, prometheus_url: str | None, who: str) -> str:
    """The gateway URL from Zeus's ``pushgateway_url`` or its documentation's ``prometheus_url``."""
    if pushgateway_url is None and prometheus_url is None:
        raise InputError(
            f"{who} needs pushgateway_url, e.g. pushgateway_url='http://localhost:9091'"
        )
    if None not in (pushgateway_url, prometheus_url) and pushgateway_url != prometheus_url:
        raise InputError(
            f"{who} got pushgateway_url={pushgateway_url!r} and prometheus_url={prometheus_url!r}; "
            "give only one (they name the same Pushgateway)"
        )
    return check_url(pushgateway_url if pushgateway_url is not None else prometheus_url)


class Pusher:
    """A registry and where it goes; pushes replace the job's metrics on the gateway (HTTP PUT)."""

    def __init__(self, url: str, job: str):
        self.url = check_url(url)
        self.job = check_job(job)
        self.registry = CollectorRegistry()
        self._lock = threading.Lock()  # one push at a time: the newest state lands last
        self._failing = False
        self._families: dict[str, Any] = {}
        self._families_lock = threading.Lock()

    def families(self, update: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
        """The metric families registered here, after ``update`` (given the known ones, it
        returns them with any it registered added); one update at a time."""
        with self._families_lock:
            self._families = update(dict(self._families))
            return dict(self._families)

    def push(self) -> None:
        """Push now; raise :class:`PushgatewayError` (one line) when it fails."""
        with self._lock:
            try:
                push_to_gateway(
                    self.url, job=self.job, registry=self.registry, timeout=PUSH_TIMEOUT
                )
            except HTTPError as e:
                lines = e.read().decode(errors="replace").strip().splitlines()
                detail = lines[0] if lines else e.reason
                raise PushgatewayError(
                    f"the Prometheus Pushgateway at {self.url} refused job {self.job!r}'s "
                    f"metrics (HTTP {e.code}: {detail}); check that the URL is a Pushgateway "
                    "and that no other job pushed these metric names with another type"
                ) from None
            except (URLError, OSError, ValueError) as e:
                reason = getattr(e, "reason", None) or e
                if isinstance(reason, TimeoutError) or "timed out" in str(reason):
                    reason = f"no answer in {PUSH_TIMEOUT:g} s"
                raise PushgatewayError(
                    f"could not push metrics to the Prometheus Pushgateway at {self.url} "
                    f"({reason}); {START_HINT}"
                ) from None

    def push_logged(self, every: float) -> bool:
        """Push from a background thread: failures are logged (once until pushes work again)."""
        try:
            self.push()
        except PushgatewayError as e:
            level = logging.DEBUG if self._failing else logging.WARNING
            log.log(level, "%s (retrying every %g s)", e, every)
            self._failing = True
            return False
        if self._failing:
            log.info("pushes to the Prometheus Pushgateway at %s work again", self.url)
            self._failing = False
        return True


_shared: dict[tuple[str, str], Pusher] = {}
_shared_lock = threading.Lock()


def shared_pusher(url: str, job: str) -> Pusher:
    """The one :class:`Pusher` of this process for a gateway and job: loops pushing there share
    its registry, so each push carries every window's series."""
    key = (check_url(url), check_job(job))
    with _shared_lock:
        if key not in _shared:
            _shared[key] = Pusher(*key)
        return _shared[key]
