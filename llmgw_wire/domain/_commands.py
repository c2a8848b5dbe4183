"""The control plane's commands to an agent: start a shard, stop one (the `reconciler`)."""

from __future__ import annotations

import datetime as dt

from attrs import field, frozen

from llmgw_wire.domain._engines import ShardSpec

__all__ = ["ShardCommand", "StopCommand"]


@frozen
class ShardCommand:
    """The control plane's decision to start one shard: its spec, and how long it may take.

    The ids, pool, fabric and profile fingerprint the wire carries beside the
    spec are the spec's own: they are read from it, never stated twice.
    `startup_timeout` travels as whole milliseconds.
    """

    spec: ShardSpec = field(factory=ShardSpec)
    startup_timeout: dt.timedelta = dt.timedelta(0)

    @property
    def replica_id(self) -> str:
        """The spec's replica id."""
        return self.spec.replica_id

    @property
    def shard_id(self) -> str:
        """The spec's shard id."""
        return self.spec.shard_id

    @property
    def pool(self) -> str:
        """The spec's pool."""
        return self.spec.pool

    @property
    def fabric(self) -> str:
        """The spec's fabric."""
        return self.spec.fabric

    @property
    def profile_fp(self) -> str:
        """The spec's profile fingerprint."""
        return self.spec.profile_fp


@frozen
class StopCommand:
    """The control plane's decision to stop one shard, draining it for `grace` first."""

    replica_id: str = ""
    shard_id: str = ""
    grace: dt.timedelta = dt.timedelta(0)
