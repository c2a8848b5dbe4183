"""Messages that only keep the agent stream going."""

from __future__ import annotations

import datetime as dt

from attrs import frozen

__all__ = ["EPOCH", "Ack", "Heartbeat"]

#: The Unix epoch, in UTC: a heartbeat's time when none is set, and where the
#: wire's milliseconds count from.
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@frozen
class Heartbeat:
    """An agent's sign of life; `sent_at` is the agent's clock, in UTC, to the millisecond."""

    node_id: str = ""
    sent_at: dt.datetime = EPOCH

    @classmethod
    def now(cls, node_id: str) -> Heartbeat:
        """A heartbeat from `node_id` stamped now, to the millisecond the wire carries."""
        now = dt.datetime.now(dt.timezone.utc)
        return cls(node_id, now.replace(microsecond=now.microsecond // 1000 * 1000))


@frozen
class Ack:
    """The control plane's answer to a registration."""

    node_id: str = ""
    adopted_shards: int = 0
    detail: str = ""
