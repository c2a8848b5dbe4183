"""What grpc.aio's client call does not do right for a stream, done here once.

grpc.aio's `StreamStreamCall.write` meets a call that the server ended under
it with a failed batch, and then records its own status, INTERNAL "Internal
error from Core", over the one the server sent: the agent would never learn
that it was refused, or told to come back later. grpc.aio has no public way
round it. `send_message` sends as `write` does, through the same private
parts of the call (`_cython_call`, `_metadata_sent`, `_done_writing_flag`),
but leaves the call's status to the server, so that reading it after a
failed send gives what the server said.

Those parts are checked once, on the first call sent on: a grpc.aio without
them (a release that renamed them) gets `call.write`, and one warning that
names the grpcio version, since a refusal sent while the agent writes then
reads as INTERNAL.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

import grpc
from grpc._cython import cygrpc

__all__ = ["CallOver", "send_message"]

logger = logging.getLogger("llmgw_wire.stream")

#: What the fallback's warning says (after the grpcio version).
FALLBACK_WARNING: Final = (
    "grpcio %s: its call has not the parts the agent's send keeps the control plane's "
    "status with; sending with call.write, so a refusal met while sending reads as "
    "INTERNAL instead of its own status"
)

# Whether the installed grpc.aio has the private parts: None until the first call.
_private: bool | None = None


class CallOver(Exception):  # noqa: N818 (an outcome, read by the one caller)
    """The send did not happen: the call is over; its status says how it ended."""


def _has_private_parts(call: Any) -> bool:
    """Whether `call` has the private parts `send_message` writes through, as it uses them."""
    core = getattr(call, "_cython_call", None)
    sent = getattr(call, "_metadata_sent", None)
    return (
        callable(getattr(core, "send_serialized_message", None))
        and callable(getattr(sent, "is_set", None))
        and callable(getattr(sent, "wait", None))
        and isinstance(getattr(call, "_done_writing_flag", None), bool)
    )


def _private_path(call: Any) -> bool:
    """Whether to write through the private parts: checked on the first call, then kept."""
    global _private  # noqa: PLW0603 (checked once per process)
    if _private is None:
        _private = _has_private_parts(call)
        if not _private:
            logger.warning(FALLBACK_WARNING, grpc.__version__)
    return _private


async def send_message(call: Any, data: bytes) -> None:
    """Send `data` on the grpc.aio stream-stream `call` (raw bytes, no serializer).

    Raises:
        CallOver: the call is over, or ended while sending; read its status.
        asyncio.InvalidStateError: the agent's side is already half-closed.
    """
    if not _private_path(call):
        await _public_write(call, data)
        return
    if call.done():
        raise CallOver
    if call._done_writing_flag:
        raise asyncio.InvalidStateError("the call is half-closed")
    if not call._metadata_sent.is_set():
        await call._metadata_sent.wait()
        if call.done():
            raise CallOver
    try:
        await call._cython_call.send_serialized_message(data)
    except cygrpc.InternalError:
        # The batch failed because the call ended: its status is on its way.
        raise CallOver from None
    except asyncio.CancelledError:
        if not call.cancelled():
            call.cancel()
        raise


async def _public_write(call: Any, data: bytes) -> None:
    """`call.write`: grpc.aio's own send, which loses the status of a call ended under it."""
    try:
        await call.write(data)
    except asyncio.InvalidStateError:
        # grpc.aio says the same for a call that is over and for a side
        # already half-closed: only the first has a status to read.
        if call.done():
            raise CallOver from None
        raise
