"""The stream's metrics, through OpenTelemetry's API when it is installed (the `otel` extra).

Without the API package nothing of it is imported and every hook is a call
that does nothing. With it, the instruments come from the meter provider
given, or else from OpenTelemetry's global one (which does nothing until the
service sets a provider). The instruments, their units and attributes are
documented in one table, `docs/guides/operating.md`; attribute values come
from small fixed sets, never from a node id, a peer address or a message.
"""

from __future__ import annotations

import time
from typing import Any, Final

__all__ = ["NO_METRICS", "StreamMetrics", "metrics_for", "refusal_of"]

#: The meter's name: the instrumentation scope of every instrument here.
METER_NAME: Final = "llmgw_wire.stream"

#: The boundaries, in seconds, advised for `llmgw.stream.registration.duration`:
#: from a registration on loopback (milliseconds) to one held up by a slow
#: agent or a busy control plane (tens of seconds; the registration timeout is 30 s).
REGISTRATION_BOUNDARIES: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip


class StreamMetrics:
    """The hooks the stream calls; this base records nothing."""

    def agents(self, delta: int) -> None:
        """An agent's stream opened (+1) or ended (-1)."""

    def message(self, direction: str, member: str) -> None:
        """A message went through: `direction` "received" or "sent", `member` its envelope's."""

    def refused(self, reason: str) -> None:
        """A message or call was refused, for `reason` (decode, limit, identity, ...)."""

    def registration(self, seconds: float) -> None:
        """A first registration reached `handle`, `seconds` after the call started."""

    def reconnect(self, reason: str) -> None:
        """An agent connects again after a round that ended for `reason`."""

    @staticmethod
    def now() -> float:
        """The clock durations are measured with."""
        return time.monotonic()


#: Records nothing: what a session holds unless a server gives it metrics.
NO_METRICS: Final = StreamMetrics()


class _OpenTelemetry(StreamMetrics):
    """The hooks, recorded on OpenTelemetry instruments."""

    def __init__(self, meter: Any) -> None:
        self._agents = meter.create_up_down_counter(
            "llmgw.stream.agents", unit="{agent}", description="Agents connected now."
        )
        self._messages = meter.create_counter(
            "llmgw.stream.messages", unit="{message}", description="Messages of the agent stream."
        )
        self._refused = meter.create_counter(
            "llmgw.stream.refused",
            unit="{message}",
            description="Messages and calls refused, by reason.",
        )
        # Advised, so that the SDK's default boundaries (for milliseconds) do not
        # apply: the histogram reads without a View (opentelemetry-api >= 1.30).
        self._registration = meter.create_histogram(
            "llmgw.stream.registration.duration",
            unit="s",
            description="From the start of an agent's call to its registration reaching handle.",
            explicit_bucket_boundaries_advisory=list(REGISTRATION_BOUNDARIES),
        )
        self._reconnects = meter.create_counter(
            "llmgw.stream.reconnects",
            unit="{reconnect}",
            description="An agent's reconnections, by the reason the last round ended.",
        )
        # One attributes mapping per value, made once: recording allocates nothing.
        self._attributes: dict[tuple[str, str], dict[str, str]] = {}

    def _of(self, key: str, value: str) -> dict[str, str]:
        found = self._attributes.get((key, value))
        if found is None:
            found = self._attributes[key, value] = {key: value}
        return found

    def agents(self, delta: int) -> None:
        self._agents.add(delta)

    def message(self, direction: str, member: str) -> None:
        key = (direction, member)
        found = self._attributes.get(key)
        if found is None:
            found = self._attributes[key] = {"direction": direction, "member": member}
        self._messages.add(1, found)

    def refused(self, reason: str) -> None:
        self._refused.add(1, self._of("reason", reason))

    def registration(self, seconds: float) -> None:
        self._registration.record(seconds)

    def reconnect(self, reason: str) -> None:
        self._reconnects.add(1, self._of("reason", reason))


def metrics_for(meter_provider: Any = None) -> StreamMetrics:
    """The stream's metrics on `meter_provider`, or OpenTelemetry's global provider.

    Args:
        meter_provider: an OpenTelemetry `MeterProvider`; None takes the
            global one if the API package is installed; False records nothing.
    """
    if meter_provider is False:
        return NO_METRICS
    if meter_provider is None:
        try:
            from opentelemetry import metrics
        except ImportError:
            return NO_METRICS
        meter_provider = metrics.get_meter_provider()
    from llmgw_wire._version import __version__

    return _OpenTelemetry(meter_provider.get_meter(METER_NAME, __version__))


def refusal_of(error: BaseException) -> str:
    """The `reason` attribute of a refused message, for the error it was refused with."""
    reason = getattr(error, "reason", "")
    # Both of the codec's limits (size, elements) say so in these words.
    if isinstance(reason, str) and "over the limit" in reason:
        return "limit"
    return "decode"
