"""The sessions: domain values over a call that carries raw bytes.

A session encodes what it sends and decodes what it reads itself
(`llmgw_wire.codec.envelope`), so that an `EncodeError` reaches the caller of
`send` and a bad message is seen for what it is; the transport below moves
bytes only. Reading runs in a task of the session's own, which puts what it
reads in an `asyncio.Queue`: a `recv` that times out, or is cancelled from
outside, takes nothing from it, so loses nothing and leaves the call open
(see docs/internals/stream-tasks.md).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, Protocol, TypeAlias, TypeVar, cast

from llmgw_wire.codec import DEFAULT_MAX_ITEMS, DEFAULT_MAX_SIZE
from llmgw_wire.codec._schema import CLASSES
from llmgw_wire.codec.envelope import (
    AGENT_MESSAGE,
    CONTROL_MESSAGE,
    UnknownMember,
    envelope_codec,
)
from llmgw_wire.domain import (
    Ack,
    Heartbeat,
    Registration,
    ShardCommand,
    ShardReport,
    State,
    StopCommand,
)
from llmgw_wire.errors import (
    DecodeError,
    PeerUnavailable,
    StatusCode,
    StreamClosed,
    StreamError,
)
from llmgw_wire.stream._cancel import COUNTED, uncancel
from llmgw_wire.stream._logs import LINE_BUDGET, EscapingFilter, FirstLines, Throttle
from llmgw_wire.stream._metrics import NO_METRICS, StreamMetrics, refusal_of
from llmgw_wire.stream._peers import PeerBytes, decode_turns
from llmgw_wire.stream._protocol import PEER_OVER_BUDGET

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from llmgw_wire.codec.envelope import EnvelopeCodec
    from llmgw_wire.stream._tls import PeerCertificate

__all__ = [
    "AgentSession",
    "BadMessagePolicy",
    "ControlSession",
    "FromAgent",
    "FromControl",
]

logger = logging.getLogger("llmgw_wire.stream")
# The one logger of the stream's modules: the lines peers cause are bounded
# in number, and no argument a peer sent can break a line.
logger.addFilter(LINE_BUDGET)
logger.addFilter(EscapingFilter())

FromAgent: TypeAlias = Registration | ShardReport | Heartbeat
"""What an agent sends on the stream."""

FromControl: TypeAlias = ShardCommand | StopCommand | Ack
"""What the control plane sends on the stream."""

BadMessagePolicy: TypeAlias = Literal["skip", "end"]
"""What a session does with a message it cannot decode: skip it (logged once) or end the call."""

#: How the detail of a FAILED report for a StartShard the agent could not
#: decode begins; the rest is the `DecodeError`'s text.
REFUSED_COMMAND: Final = "command not run: it does not decode"

# How many received values a session holds before it stops reading (and
# HTTP/2 flow control makes the peer wait); the bytes they hold are bounded
# per peer besides (`PeerBytes`).
_READ_AHEAD = 8
#: Bytes of one peer's messages held at once (read, decoded, or the last
#: handed to the reader), by default: a message at the size limit and 1 MiB.
DEFAULT_PEER_BYTES: Final = DEFAULT_MAX_SIZE + 1024 * 1024
# Messages larger than this are decoded in a thread, so that one big
# registration does not hold up every other agent's stream; the event
# loop's slot for them goes to peers in turn (`DecodeTurns`).
_DECODE_OFF_LOOP_ABOVE = 256 * 1024
#: How the status details of a call ended for a message, before the
#: registration, that does not decode begin (INVALID_ARGUMENT); the rest is
#: the `DecodeError`'s text, which names what was wrong and where.
UNREADABLE_BEFORE_REGISTRATION: Final = "a message before the registration does not decode"
#: Before its registration, an agent's message over this many bytes (after
#: decompression) is decoded only if it is a registration; anything else ends
#: the call with FAILED_PRECONDITION: a few kB of gzip that inflate to
#: megabytes cost no decoding before anyone has registered.
UNREGISTERED_MESSAGE_MAX: Final = 64 * 1024


def _is_registration(data: bytes) -> bool:
    """Whether `data` is an AgentMessage holding a Register and nothing else (a cheap look)."""
    # Field 1 (register), length-delimited: tag 0x0a, then a varint length
    # that covers the rest of the message exactly.
    if data[:1] != b"\x0a":
        return False
    length, shift, at = 0, 0, 1
    while at < len(data) and at <= 10:
        byte = data[at]
        length |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return at + length == len(data)
        shift += 7
    return False


S = TypeVar("S")
R = TypeVar("R")


class Call(Protocol):
    """What a session needs of the transport: a call that moves bytes both ways."""

    async def read(self) -> bytes | None:
        """The next message's bytes; None once the peer has ended its side.

        Raises:
            StreamError: the call ended with an error status, or the connection failed.
        """

    async def write(self, data: bytes) -> None:
        """Send one message's bytes.

        Raises:
            StreamError: the call is over.
        """


# The message of the session timer's cancellations (what tells them on 3.10).
_EXPIRY: Final = "the wait's timeout has passed"
# How early a loop timer may run: asyncio runs one that is due within the
# clock's resolution (the loop's clock is `time.monotonic`).
_CLOCK_RESOLUTION: Final = time.get_clock_info("monotonic").resolution
# The deadline of a wait the session's timer has ended.
_EXPIRED: Final = -1.0


class _End:
    """The end of what a peer sends: cleanly (`error` None) or not."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


# What the inbox holds once the peer's messages have ended and nothing else is
# left in it, so that a `recv` waiting on the queue wakes to see the end.
_ENDED: Final = _End(None)


class _Session(Generic[S, R]):
    """What both ends share: sending, and reading in a task of the session's own."""

    _outbound_name: str
    _inbound_name: str
    # Whether the message the reader holds is a registration still to be
    # decoded (the control plane's end; see `ControlSession.registration_due`).
    _arriving = False
    # Messages over this many bytes are looked at before decoding (`_not_decoded`).
    _screened_above = _DECODE_OFF_LOOP_ABOVE

    def __init__(
        self,
        call: Call,
        peer: str,
        *,
        on_bad_message: BadMessagePolicy = "skip",
        max_message_size: int = DEFAULT_MAX_SIZE,
        max_items: int = DEFAULT_MAX_ITEMS,
        peer_bytes: PeerBytes | None = None,
        metrics: StreamMetrics = NO_METRICS,
        send_timeout: float | None = None,
    ) -> None:
        if on_bad_message not in ("skip", "end"):
            raise ValueError(f"Expected 'skip' or 'end', got {on_bad_message!r}")
        self._call = call
        self.peer = peer
        self._outbound: EnvelopeCodec = envelope_codec(self._outbound_name)
        self._inbound: EnvelopeCodec = envelope_codec(self._inbound_name)
        self._on_bad_message = on_bad_message
        self._max_size = max_message_size
        self._max_items = max_items
        # What the reader has read and `recv` not yet taken: values, then
        # `_ENDED` once the end is all there is. A full queue holds the
        # reader back (and HTTP/2 flow control the peer).
        self._inbox: asyncio.Queue[R | _End] = asyncio.Queue(_READ_AHEAD)
        # The bytes each value of the inbox counts against its peer's budget,
        # and those of the last value `recv` gave, until the next `recv`.
        self._sizes: collections.deque[int] = collections.deque()
        self._handed = 0
        # The peer's budget of bytes held: the one its calls share on a
        # server, else the session's own.
        self._bytes = peer_bytes if peer_bytes is not None else PeerBytes(peer, DEFAULT_PEER_BYTES)
        # What the session counts on; a server gives its own.
        self._metrics = metrics
        # How the peer's messages ended, once they have (after what the inbox holds).
        self._end: _End | None = None
        self._reader: asyncio.Task[None] | None = None
        # The loop the session runs on, once it has run (see `_running_loop`).
        self._loop: asyncio.AbstractEventLoop | None = None
        # The tasks waiting in `recv` with a deadline (loop time; `_EXPIRED`
        # once the timer has ended the wait), and the session's one loop
        # timer for the nearest (see `_wait_by`).
        self._deadlines: dict[asyncio.Task[object], float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._send_lock = asyncio.Lock()
        # Whether a send timed out with its message partly written: no more can follow.
        self._cut = False
        # The task of the send being written, if it has a timeout.
        self._writing: asyncio.Task[object] | None = None
        self.send_timeout = send_timeout
        # The bounds of the session's log lines, made at the first line each
        # bounds: most sessions log none, and hold none.
        self._warned: FirstLines | None = None
        self._bad_log: Throttle | None = None
        #: Bad messages skipped so far.
        self.bad_messages = 0
        #: Values received so far.
        self.received = 0
        # What `answered` waits on, once something has waited.
        self._answer: asyncio.Event | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"

    def __str__(self) -> str:
        return self.peer

    async def send(self, value: S, timeout: float | None = None) -> None:
        """Send `value` to the peer, in its envelope.

        A peer that reads nothing stops a send once HTTP/2 flow control has
        filled its window (a few messages of a MiB): `timeout` bounds how
        long a send may wait, for its turn (sends go one at a time) and for
        the peer to take the message.

        Args:
            value: what to send.
            timeout: seconds to wait at most; None takes the session's
                default: on the control plane, `ServerLimits.send_timeout`;
                on the agent, none (as long as it takes).

        Raises:
            EncodeError: a value the wire cannot carry, with its path; nothing is sent.
            StreamError: code RESOURCE_EXHAUSTED, a message over the size
                limit; nothing is sent, and the session stays usable.
            TypeError: a value this end does not send.
            asyncio.TimeoutError: the send did not finish within `timeout`
                (the built-in `TimeoutError` from Python 3.11). If it timed
                out waiting for its turn, nothing was sent and the session
                stays usable. If it timed out with the message partly
                written, which cannot be taken back, the call is ended: on
                the control plane with DEADLINE_EXCEEDED (`handle` is
                cancelled, as for any end of the call); on the agent, the
                call is cancelled and `recv` raises `PeerUnavailable`.
                Later sends raise `StreamClosed`.
            StreamClosed: this side is closed, or the call is over.
            PeerUnavailable: the connection is gone.
        """
        data = self._outbound.encode(value)
        if len(data) > self._max_size:
            # Refused here, so that the call stays usable: grpc would end it.
            raise StreamError(
                f"a {self._outbound.name} of {len(data)} bytes is over the limit of "
                f"{self._max_size}; nothing was sent",
                code="RESOURCE_EXHAUSTED",
            )
        self._check_not_cut()
        if timeout is None:
            timeout = self.send_timeout
        if timeout is None:
            async with self._send_lock:
                await self._write(data)
        else:
            await self._timed_write(data, timeout)
        if self._metrics is not NO_METRICS:  # free without a meter provider
            self._metrics.message("sent", self._outbound.member_of(value))
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("sent %s to %s", type(value).__name__, self)

    async def _timed_write(self, data: bytes, timeout: float) -> None:
        """Write `data` in its turn, within `timeout` seconds, on the session's timer.

        Timed out waiting for its turn, nothing was written. Timed out while
        writing, the message is partly written and cannot be taken back: no
        more can follow it, and the call ends (`_send_timed_out`).
        """
        started = time.monotonic()
        task = self._wait_by(timeout)
        writing = False
        try:
            async with self._send_lock:
                self._check_not_cut()
                writing = True
                # Kept, so that an end of the call can shorten it (`sends_held`).
                self._writing = task
                try:
                    await self._write(data)
                finally:
                    self._writing = None
        except asyncio.CancelledError as exc:
            if not self._expired(task, exc):
                raise  # cancelled from outside
            if writing and not self._cut:
                self._cut = True
                # How long it waited: its timeout, or less once its call was ended.
                self._send_timed_out(time.monotonic() - started)
            raise asyncio.TimeoutError from None
        finally:
            del self._deadlines[task]

    def _check_not_cut(self) -> None:
        if self._cut:
            raise StreamClosed(
                f"the call with {self} is over: a send timed out with its message partly written"
            )

    def _hurry_send(self, within: float) -> None:
        """Give the send being written, if it has a timeout, at most `within` seconds more."""
        task = self._writing
        deadline = None if task is None else self._deadlines.get(task)
        if task is None or deadline is None or deadline == _EXPIRED:
            return
        when = self._running_loop().time() + within
        if deadline > when:
            self._deadlines[task] = when
            self._arm(when)

    def _send_timed_out(self, waited: float) -> None:
        """End the call: a message is partly written, and the peer took nothing for `waited` s."""
        logger.warning(
            "a send to %s timed out after %.3g s with its message partly written: the call ends",
            self,
            waited,
        )

    async def _write(self, data: bytes) -> None:
        await self._call.write(data)

    @contextlib.asynccontextmanager
    async def sends_held(self, within: float) -> AsyncIterator[None]:
        """Hold sends back for the block, once the one being written has been written.

        The send being written, if it has a timeout, gets at most `within`
        seconds more; a send that begins in the block waits for its end.
        What ends a call (the control plane's server) cancels the task of
        its sends in such a block, so that a message being sent arrives whole.
        """
        self._hurry_send(within)
        async with self._send_lock:
            yield

    def start_reading(self) -> None:
        """Start the session's reader, if it has not started yet."""
        if self._reader is None:
            self._reader = self._running_loop().create_task(self._read())

    async def stop_reading(self) -> None:
        """Stop the reader, and let go of what it holds; `recv` then gives the end.

        The bytes of the values not taken leave the peer's budget. A call's
        owner calls it once the call is over (the server once `handle` is
        done; on the agent, `leave`); stopping twice does nothing more.
        """
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        reader = self._reader
        if reader is not None and not reader.done():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        # What was read and not taken is dropped: `recv` gives the end at once.
        inbox = self._inbox
        while not inbox.empty():
            inbox.get_nowait()
        self._ended_with(_End(None))
        # Nothing of the call is held any more: its bytes leave the peer's count.
        self._bytes.give_back(self._handed + sum(self._sizes))
        self._handed = 0
        self._sizes.clear()

    async def answered(self) -> None:
        """Return once the peer has sent a value this end reads, or has ended its side.

        What arrives counts whoever reads it; the session's reader must run
        (`start_reading`, or a `recv`).
        """
        if self.received or not self._inbox.empty() or self._end is not None:
            return
        if self._answer is None:
            self._answer = asyncio.Event()
        await self._answer.wait()

    async def recv(self, timeout: float | None = None) -> R | None:
        """The next value from the peer, or None once the peer has ended its side.

        Envelopes with no member this version knows are skipped (and logged),
        and so, by default, are messages that do not decode. After the end,
        every call gives the same answer again.

        Args:
            timeout: seconds to wait at most; None waits as long as it takes.
                A timeout loses nothing: the session stays usable.

        Raises:
            asyncio.TimeoutError: nothing arrived within `timeout` (the
                built-in `TimeoutError` from Python 3.11).
            StreamError: the call ended with an error status (a subclass
                says which kind: `PeerUnavailable`, `PermissionDenied`, ...).
            DecodeError: the peer sent a bad message and the policy is "end".
        """
        if self._handed:
            # The value given last is the reader's now, no longer the session's.
            self._bytes.give_back(self._handed)
            self._handed = 0
        inbox = self._inbox
        if inbox.empty():
            if self._end is not None:
                self._raise_end()
                return None
            if self._reader is None:
                self.start_reading()
            # Nothing is taken from the queue before the wait is over: a
            # timeout or a cancellation loses nothing.
            if timeout is None:
                item = await inbox.get()
            else:
                task = self._wait_by(timeout)
                try:
                    item = await inbox.get()
                except asyncio.CancelledError as exc:
                    if self._expired(task, exc):
                        raise asyncio.TimeoutError from None
                    raise  # cancelled from outside
                finally:
                    del self._deadlines[task]
        else:
            item = inbox.get_nowait()
        if item.__class__ is _End:
            inbox.put_nowait(item)  # left for the next `recv` waiting, and every later one
            self._raise_end()
            return None
        self._handed = self._sizes.popleft()
        if self._end is not None and inbox.empty():
            inbox.put_nowait(_ENDED)  # the end is all that is left
        return cast("R", item)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        """The loop the session runs on, looked up once (its queue is bound to it too).

        On Python 3.10 and 3.11 each `asyncio.get_running_loop()` makes a
        system call (`getpid`, to tell a forked child): once per session
        rather than at every `recv` with a timeout.
        """
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        return loop

    def _wait_by(self, timeout: float) -> asyncio.Task[object]:
        """Give the current task's wait (a `recv`, a `send`) a deadline `timeout` s away; the task.

        What `asyncio.timeout` does (the task cancelled at the deadline, and
        that cancellation taken back as a timeout: `_expired`), with one
        loop timer for every wait of the session rather than one each: a
        wait over in time leaves the timer armed, and when it runs it ends
        the waits that are due and arms itself for the next one. A message
        received or sent within its timeout thus costs no timer (a loop
        timer is a heap push and a handle with a context, and a cancelled one
        stays in the heap): `asyncio.timeout` around each wait cost 4 µs more
        per message received, measured in process on a fake call (no grpc).
        """
        loop = self._running_loop()
        task = cast("asyncio.Task[object]", asyncio.current_task(loop))
        deadline = loop.time() + timeout
        self._deadlines[task] = deadline
        self._arm(deadline)
        return task

    def _arm(self, deadline: float) -> None:
        """Have the session's timer run by `deadline` (loop time) at the latest."""
        timer = self._timer
        if timer is None or timer.when() > deadline:
            if timer is not None:
                timer.cancel()
            self._timer = self._running_loop().call_at(deadline, self._expire_due)

    def _expired(self, task: asyncio.Task[object], error: asyncio.CancelledError) -> bool:
        """`task`'s wait was cancelled (`error`): whether the timer did it, and nothing else.

        If so, the cancellation is taken back: the wait times out. On
        Python 3.11+ the task's count of cancellations tells; on 3.10, which
        has none, the message of the last cancellation does (so an outside
        cancellation in the same loop turn as the timer's, before it, is
        taken for the timeout).
        """
        if self._deadlines[task] != _EXPIRED:
            return False
        if not COUNTED:
            return error.args[:1] == (_EXPIRY,)
        return uncancel(task)

    def _expire_due(self) -> None:
        """The session's timer: cancel the waits past their deadline, each to time out."""
        self._timer = None
        loop = self._running_loop()
        due = loop.time() + _CLOCK_RESOLUTION
        later: float | None = None
        deadlines = self._deadlines
        for task, deadline in deadlines.items():
            if deadline == _EXPIRED:
                continue
            if deadline <= due:
                deadlines[task] = _EXPIRED  # a value changed: the dict's size is not
                task.cancel(_EXPIRY)
            elif later is None or deadline < later:
                later = deadline
        if later is not None:
            self._timer = loop.call_at(later, self._expire_due)

    def _raise_end(self) -> None:
        """Raise the error the peer's messages ended with, if they ended with one."""
        assert self._end is not None
        if self._end.error is not None:
            raise self._end.error

    def _ended_with(self, end: _End) -> None:
        """The peer's messages end, after what the inbox holds (the first end counts)."""
        if self._end is not None:
            return
        self._end = end
        if self._inbox.empty():
            self._inbox.put_nowait(_ENDED)
        self._heard()

    def _heard(self) -> None:
        """Something arrived, or the end: `answered` is over."""
        answer = self._answer
        if answer is not None:
            answer.set()

    def _decode_here(self, data: bytes) -> object:
        """Decode `data` on the loop (small enough), after the refusals that come first."""
        if len(data) > self._screened_above:
            self._check_decodable(data)
        return self._inbound.decode(data, max_size=self._max_size, max_items=self._max_items)

    def _check_decodable(self, data: bytes) -> None:
        refusal = self._not_decoded(data)  # on the loop: it may end the call
        if refusal is not None:
            raise refusal

    def _decode_only(self, data: bytes) -> object:
        return self._inbound.decode(data, max_size=self._max_size, max_items=self._max_items)

    def __aiter__(self) -> AsyncIterator[R]:
        return self

    async def __anext__(self) -> R:
        value = await self.recv()
        if value is None:
            raise StopAsyncIteration
        return value

    async def _decode_off_loop(self, data: bytes) -> object:
        self._check_decodable(data)
        # One at a time: more threads only fight over the GIL, and each
        # holds a large message's objects at once; peers take turns.
        turns = decode_turns()
        await turns.acquire(self._bytes)
        try:
            return await asyncio.to_thread(self._decode_only, data)
        finally:
            turns.release()

    def _not_decoded(self, data: bytes) -> DecodeError | None:
        """Why `data` is refused without decoding it (a bad message), or None."""
        return None

    async def _wait_for_room(self, size: int) -> None:
        """Wait until the peer's bytes have room for `size` more; a peer over both budgets ends."""
        if not self._bytes.may_wait(size):
            error = StreamError(
                f"{PEER_OVER_BUDGET} ({self._bytes.budget} bytes held and as many waiting)",
                code="RESOURCE_EXHAUSTED",
            )
            self._over_budget(error)
            raise error
        await self._bytes.wait_take(size)

    def _over_budget(self, error: StreamError) -> None:
        """What else to do when a message finds its peer over both budgets of bytes."""

    def _arrived(self, data: bytes) -> None:
        """A message's bytes are read: what to note before it waits for its decoding."""

    def _arrival_over(self) -> None:
        """The message noted by `_arrived` is decoded (or skipped, or refused)."""
        self._arriving = False

    async def _read(self) -> None:
        error: BaseException | None = None
        # What each message uses, looked up once.
        inbox, peer_bytes, call = self._inbox, self._bytes, self._call
        try:
            while True:
                data = await call.read()
                if data is None:
                    logger.info("%s ended its side of the stream", self)
                    await self._inbound_ended()
                    break
                # Counted against the peer's bytes before it is decoded: a peer
                # whose messages fill its budget waits (and flow control makes it).
                size = held = len(data)
                self._arrived(data)
                if not peer_bytes.take(size):
                    await self._wait_for_room(size)
                try:
                    try:
                        # Small messages (all but a few) without a coroutine of their own.
                        value = (
                            self._decode_here(data)
                            if size <= _DECODE_OFF_LOOP_ABOVE
                            else await self._decode_off_loop(data)
                        )
                    except DecodeError as exc:
                        await self._bad_message(data, exc)
                        continue
                    accepted = self._received(value)
                    if accepted is None:
                        continue
                    # Its size first: `recv` takes both once the value is in.
                    self._sizes.append(size)
                    held = 0
                    if inbox.qsize() < _READ_AHEAD:  # room: no coroutine of its own
                        inbox.put_nowait(accepted)
                    else:
                        await inbox.put(accepted)
                finally:
                    peer_bytes.give_back(held)  # what was not handed over is not held
                    if self._arriving:
                        self._arrival_over()
        except asyncio.CancelledError:
            self._log_held_back()
            raise
        except (StreamError, DecodeError) as exc:
            error = exc
            logger.info("stream with %s ended: %s", self, exc)
        except Exception as exc:  # handed to whoever reads the session
            error = exc
            logger.warning("stream with %s failed: %s: %s", self, type(exc).__name__, exc)
        self._log_held_back()
        self._ended_with(_End(error))

    async def _bad_message(self, data: bytes, error: DecodeError) -> None:
        """Skip the message `data` that did not decode; under the policy "end", raise `error`."""
        self._metrics.refused(refusal_of(error))
        if self._on_bad_message == "end":
            await self._bad_message_ends(error)
            raise error
        self.bad_messages += 1
        self._log_bad_message(error)
        await self._bad_message_skipped(data, error)

    def _received(self, value: object) -> R | None:
        """The value to hand over for a decoded `value` (None: nothing)."""
        if isinstance(value, UnknownMember):
            self._skipped(value)
            return None
        if self._metrics is not NO_METRICS:  # free without a meter provider
            self._metrics.message("received", self._inbound.member_of(value))
        return self._accept(value)  # type: ignore[arg-type]

    def _log_bad_message(self, error: DecodeError) -> None:
        # One line, the error's own text, never a traceback; and a flood of
        # bad messages is a line per interval with a count, not a line each.
        if self._bad_log is None:
            self._bad_log = Throttle()
        allowed, held = self._bad_log.allow()
        if allowed:
            more = f" ({held} more since the last line)" if held else ""
            logger.warning("skipped a bad message from %s%s: %s", self, more, error)

    def _log_held_back(self) -> None:
        bad_log = self._bad_log
        if bad_log is not None and bad_log.held:
            logger.warning(
                "skipped %d more bad messages from %s (%d in all)",
                bad_log.held,
                self,
                self.bad_messages,
            )
            bad_log.held = 0

    def _skipped(self, skipped: UnknownMember) -> None:
        # A newer peer may send its new kind of message often: say so once.
        if self._warned is None:
            self._warned = FirstLines()
        level = logging.WARNING if self._warned.first(skipped.reason) else logging.DEBUG
        logger.log(level, "skipped a %s from %s: %s", skipped.envelope, self, skipped.reason)

    def _accept(self, value: R) -> R | None:
        """The value to hand over for `value` (None: nothing); may end the call."""
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("received %s from %s", type(value).__name__, self)
        self.received += 1
        if self._answer is not None:
            self._heard()
        return value

    async def _inbound_ended(self) -> None:
        """What to do once the peer has ended its side."""

    async def _bad_message_skipped(self, data: bytes, error: DecodeError) -> None:
        """What else to do for a bad message skipped (policy "skip")."""

    async def _bad_message_ends(self, error: DecodeError) -> None:
        """End the call for a bad message (policy "end")."""
        logger.warning("ending the stream with %s for a bad message: %s", self, error)


class AgentSession(_Session[FromAgent, FromControl]):
    """The agent's end of the stream, opened by `connect`.

    `send` takes a `Registration`, a `ShardReport` or a `Heartbeat`; `recv`
    and `async for` give `ShardCommand`, `StopCommand` and `Ack` values until
    the control plane ends the call. Every value the control plane sent
    before it ended the call is handed over first; then `recv` gives None for
    status OK, or raises the `StreamError` for the error status
    (`PeerUnavailable` when the control plane stopped or the connection was
    lost: connect again).

    Attributes:
        peer: the control plane's address, for messages.
        send_timeout: the default timeout of `send`, in seconds; None (the
            default) waits as long as it takes.
        received: values received so far (read, whether `recv` has taken them yet).
        bad_messages: messages skipped so far for not decoding.
    """

    _outbound_name = AGENT_MESSAGE
    _inbound_name = CONTROL_MESSAGE

    def __init__(
        self,
        call: ClientCall,
        peer: str,
        *,
        on_bad_message: BadMessagePolicy = "skip",
        max_message_size: int = DEFAULT_MAX_SIZE,
        max_items: int = DEFAULT_MAX_ITEMS,
    ) -> None:
        super().__init__(
            call,
            peer,
            on_bad_message=on_bad_message,
            max_message_size=max_message_size,
            max_items=max_items,
        )
        self._client_call = call
        self._closed = False

    async def _write(self, data: bytes) -> None:
        if self._closed:
            raise StreamClosed(f"the stream to {self} is closed: nothing more can be sent")
        await self._client_call.write(data)

    async def close(self) -> None:
        """End the agent's side of the stream: it sends nothing more.

        The control plane sees the end of its `async for`; what it still sends
        can be read until it ends the call. Closing twice does nothing.
        """
        async with self._send_lock:
            if not self._closed:
                self._closed = True
                with contextlib.suppress(StreamError):
                    await self._client_call.done_writing()

    async def leave(self, grace: float) -> None:
        """Part cleanly: half-close, then read until the control plane ends the call.

        What the control plane still sends is dropped (and counted in a log
        line); after `grace` seconds the call is cancelled instead. A call
        already over is left as it is, without waiting. Either way, a `recv`
        after it gives how the call ended, if it ended before the grace
        did: None for OK, else the error (`PeerUnavailable` for a stop).

        Args:
            grace: seconds to wait at most for the control plane's end.
        """
        dropped = 0
        if not self._client_call.done():
            task = self._wait_by(grace)
            try:
                await self.close()
                with contextlib.suppress(StreamError, DecodeError):
                    while await self.recv() is not None:
                        dropped += 1
            except asyncio.CancelledError as exc:
                if not self._expired(task, exc):
                    raise
                logger.info("%s did not end the call within %g s of leaving", self, grace)
            finally:
                del self._deadlines[task]
            if dropped:
                logger.info("dropped %d values %s sent after the agent left", dropped, self)
        elif self._end is None:
            # Over before the reader read its end (if the reader ran at all):
            # that end, not the OK one `stop_reading` gives a session it stops.
            self._ended_with(_End(await self._client_call.status()))
        await self.stop_reading()
        if not self._client_call.done():
            self._client_call.cancel()

    def _send_timed_out(self, waited: float) -> None:
        super()._send_timed_out(waited)
        # grpc.aio reads a call cancelled here as a cancelled read, not as an
        # end: the session's end is put in the inbox, after what was read.
        if self._reader is not None:
            self._reader.cancel()
        self._ended_with(
            _End(PeerUnavailable(f"the control plane took no message for {waited:.3g} s"))
        )
        self._client_call.cancel()

    def _abandon(self) -> None:
        """Cancel the call: nothing to leave cleanly (nothing was registered)."""
        self._client_call.cancel()

    async def _bad_message_skipped(self, data: bytes, error: DecodeError) -> None:
        # A command that is not run must not look run: a StartShard whose
        # shard can be named is answered with that shard FAILED.
        report = refused_command_report(data, error)
        if report is not None:
            with contextlib.suppress(StreamError):
                await self.send(report)


class ClientCall(Call, Protocol):
    """A call from the agent's side: it can also half-close and cancel."""

    async def done_writing(self) -> None:
        """Half-close: the agent sends nothing more."""

    def cancel(self) -> None:
        """Abandon the call."""

    def done(self) -> bool:
        """Whether the call is over."""

    async def status(self) -> StreamError | None:
        """How the call ended, once it is over: None for OK, else its error."""


def refused_command_report(data: bytes, error: DecodeError) -> ShardReport | None:
    """The report that says a StartShard in `data` was not run, if its shard can be named.

    `data` is a ControlMessage that did not decode into a domain value; Google's
    runtime reads its ids without the domain's checks.
    """
    wire: Any = CLASSES[CONTROL_MESSAGE]
    try:
        envelope = wire.FromString(data)
    except Exception:  # not even protobuf: nothing names a shard
        return None
    if envelope.WhichOneof("msg") != "start_shard":
        return None
    start = envelope.start_shard
    if not start.shard_id:
        return None
    detail = f"{REFUSED_COMMAND}: {error}"
    return ShardReport(start.replica_id, start.shard_id, State.FAILED, detail=detail)


def _node_named(value: FromAgent) -> str | None:
    """The node id `value` names, if it names one."""
    if isinstance(value, Registration):
        return value.node.id
    if isinstance(value, Heartbeat) and value.node_id:
        return value.node_id
    return None


class ControlSession(_Session[FromControl, FromAgent]):
    """The control plane's end of one agent's stream, given to `ControlPlane.handle`.

    `send` takes a `ShardCommand`, a `StopCommand` or an `Ack`; `recv` and
    `async for` give `Registration`, `ShardReport` and `Heartbeat` values
    until the agent ends its side. The call ends when `handle` returns.

    A second `Registration` on the same stream is the agent's new view of the
    same node (a GPU lost, a shard gone): it is handed over like the first.
    A registration for another node id ends the call with INVALID_ARGUMENT
    ("one stream carries one node"). With node identity on, a registration
    or heartbeat whose node id the agent's certificate does not vouch for
    ends it with PERMISSION_DENIED, a heartbeat for another node than the
    one registered with INVALID_ARGUMENT, and anything sent before the
    registration with FAILED_PRECONDITION; none of them reaches `handle`.

    A message that does not decode before the registration ends the call at
    once, under the default policy "skip" too: with INVALID_ARGUMENT, its
    details `UNREADABLE_BEFORE_REGISTRATION`, a colon and the
    `DecodeError`'s text (under "end", the `DecodeError`'s text alone, as
    for any bad message). The agent learns why at once, not from the
    registration deadline.

    Attributes:
        peer: the agent's address, for messages.
        send_timeout: the default timeout of `send`, in seconds (the
            server's `ServerLimits.send_timeout`); None waits as long as it takes.
        node_id: the node id of the registration received; None before.
        metadata: the call's metadata (keys in lower case), e.g. a token.
        certificate: the agent's verified client certificate (mutual TLS), else None.
        registered: an `asyncio.Event`, set once the first registration is accepted.
        received: values received so far (read, whether `recv` has taken them yet).
        bad_messages: messages skipped so far for not decoding.
    """

    _outbound_name = CONTROL_MESSAGE
    _inbound_name = AGENT_MESSAGE
    _screened_above = UNREGISTERED_MESSAGE_MAX

    def __init__(
        self,
        call: Call,
        peer: str,
        *,
        metadata: dict[str, str] | None = None,
        certificate: PeerCertificate | None = None,
        check_node_id: Callable[[str], str | None] | None = None,
        end: Callable[[ControlSession, StreamError], None] | None = None,
        on_registered: Callable[[ControlSession], None] | None = None,
        on_bad_message: BadMessagePolicy = "skip",
        max_message_size: int = DEFAULT_MAX_SIZE,
        max_items: int = DEFAULT_MAX_ITEMS,
        peer_bytes: PeerBytes | None = None,
        metrics: StreamMetrics = NO_METRICS,
        send_timeout: float | None = None,
    ) -> None:
        super().__init__(
            call,
            peer,
            on_bad_message=on_bad_message,
            max_message_size=max_message_size,
            max_items=max_items,
            peer_bytes=peer_bytes,
            metrics=metrics,
            send_timeout=send_timeout,
        )
        self.node_id: str | None = None
        self.metadata: dict[str, str] = dict(metadata or {})
        self.certificate = certificate
        self._check_node_id = check_node_id
        # What ends the call (the server's), and what it does once the first
        # registration is accepted: each is given the session, and holds none.
        self._end_call = end
        self._on_registered = on_registered
        self.registered = asyncio.Event()
        # What the registration deadline does once the registration held is decoded.
        self._late: Callable[[ControlSession], None] | None = None
        self._started = StreamMetrics.now()
        # Whether the call has been refused (it is ending).
        self._refused = False

    def __str__(self) -> str:
        if self.node_id is None:
            return f"agent at {self.peer}"
        return f"agent of node {self.node_id} at {self.peer}"

    def _refuse(self, error: StreamError, reason: str) -> None:
        logger.warning("refused %s: %s", self, error)
        self._metrics.refused(reason)
        self._refused = True
        self.end(error)

    def end(self, error: StreamError) -> None:
        """End the call with `error`'s status, as if `handle` had raised it.

        `handle` is cancelled, once the send being written, if any, has been
        written (a send with a timeout gets a second more at most); the
        first end wins over any later one and over how `handle` ends. The
        server ends calls so (a refusal, the registration deadline, a stop);
        a session made outside a server has no call to end.
        """
        if self._end_call is not None:
            self._end_call(self, error)

    def _accept(self, value: FromAgent) -> FromAgent | None:
        if self._check_node_id is None and not isinstance(value, Registration):
            return super()._accept(value)  # only a registration binds, without node identity
        refusal = self._refusal(value)
        if refusal is not None:
            reason = "identity" if refusal.code is StatusCode.PERMISSION_DENIED else "protocol"
            self._refuse(refusal, reason)
            return None
        if isinstance(value, Registration):
            self.node_id = value.node.id
            if not self.registered.is_set():
                self._metrics.registration(StreamMetrics.now() - self._started)
                self.registered.set()
                if self._on_registered is not None:
                    self._on_registered(self)
        return super()._accept(value)

    def _refusal(self, value: FromAgent) -> StreamError | None:
        """Why `value` must not reach `handle` (the call ends with it), or None."""
        named = _node_named(value)
        if self._check_node_id is not None:
            problem = None if named is None else self._check_node_id(named)
            if problem is not None:
                return StreamError(problem, code="PERMISSION_DENIED")
            if self.node_id is None and not isinstance(value, Registration):
                # Nothing is handed over before a vouched-for registration.
                return StreamError(
                    f"register first: a {type(value).__name__} before the registration",
                    code="FAILED_PRECONDITION",
                )
        registering = isinstance(value, Registration)
        binding = registering or self._check_node_id is not None
        if binding and named is not None and self.node_id not in (None, named):
            what = "as" if registering else f"a {type(value).__name__} of"
            return StreamError(
                f"one stream carries one node: registered as {self.node_id!r}, "
                f"then {what} {named!r}",
                code="INVALID_ARGUMENT",
            )
        return None

    def _over_budget(self, error: StreamError) -> None:
        self._refuse(error, "limit")

    def _arrived(self, data: bytes) -> None:
        if self.node_id is None and _is_registration(data):
            self._arriving = True

    def _arrival_over(self) -> None:
        super()._arrival_over()
        late, self._late = self._late, None
        if late is not None:
            late(self)

    def registration_due(self, late: Callable[[ControlSession], None]) -> None:
        """The registration deadline has passed: `late(self)` now, or after the registration held.

        A registration whose bytes arrived in time keeps its deadline while it
        waits for its decoding (other peers' large messages may hold the
        decode slot); `late` then runs once it is decoded, and finds the
        agent registered, or not.
        """
        if self._arriving:
            self._late = late
        else:
            late(self)

    async def stop_reading(self) -> None:
        """Stop the reader, and let go of what it holds; `recv` then gives the end.

        The bytes of the values not taken leave the peer's budget, and a
        registration deadline waiting for a registration's decoding is
        dropped. The server calls it once `handle` is done.
        """
        self._late = None
        await super().stop_reading()

    def _not_decoded(self, data: bytes) -> DecodeError | None:
        unregistered = self.node_id is None and len(data) > UNREGISTERED_MESSAGE_MAX
        if not unregistered or _is_registration(data):
            return None
        why = (
            f"register first: {len(data)} bytes before the registration, and not a "
            f"registration (over {UNREGISTERED_MESSAGE_MAX} bytes, only a registration is "
            "decoded before it)"
        )
        # No honest agent sends this: the call ends, so that a flood of them
        # costs a new call each, not a message each.
        self._refuse(StreamError(why, code="FAILED_PRECONDITION"), "protocol")
        return DecodeError(AGENT_MESSAGE, why)

    async def _bad_message_ends(self, error: DecodeError) -> None:
        await super()._bad_message_ends(error)
        self.end(StreamError(str(error), code="INVALID_ARGUMENT"))

    async def _bad_message_skipped(self, data: bytes, error: DecodeError) -> None:
        # Before the registration, a message that cannot be read ends the call
        # at once, under "skip" too: the agent learns why now, not from the
        # registration deadline, and nothing is served without a registration.
        # A `DecodeError`'s text shows no secret's value.
        if self.node_id is not None or self._refused or self._end_call is None:
            return
        details = f"{UNREADABLE_BEFORE_REGISTRATION}: {error}"
        logger.warning("refused %s: %s", self, details)
        self._refused = True
        self.end(StreamError(details, code="INVALID_ARGUMENT"))

    def _send_timed_out(self, waited: float) -> None:
        super()._send_timed_out(waited)
        self.end(
            StreamError(
                f"the agent took no message for {waited:.3g} s: a send timed out",
                code="DEADLINE_EXCEEDED",
            )
        )
