"""Log lines a peer can neither forge nor flood.

Every argument of a line on the stream's logger is made printable here (a
node id, a status's details and a decode error's text come from the peer:
a newline in one would start a line of its own), and `Throttle` lets a
stream of bad messages through as a few lines with a count.
"""

from __future__ import annotations

import contextvars
import logging
import re
import time
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "BAD_MESSAGE_LOG_INTERVAL",
    "FIRST_LINES_AT_MOST",
    "LINES_PER_MINUTE",
    "LINES_PER_MINUTE_PER_PEER",
    "LINE_BUDGET",
    "WARNING_LINES_PER_MINUTE",
    "EscapingFilter",
    "FirstLines",
    "LineBudget",
    "Throttle",
    "current_peer",
    "escaped_traceback",
    "printable",
]

#: Seconds between two lines about the bad messages of one call; the ones in
#: between are counted, and the next line (or the call's last) says how many.
BAD_MESSAGE_LOG_INTERVAL: Final = 10.0


#: Distinct reasons a `FirstLines` remembers; past them, none is new any more.
FIRST_LINES_AT_MOST: Final = 16


def printable(text: str) -> str:
    """`text` with every character that is not printable escaped, as repr does."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


class EscapingFilter(logging.Filter):
    """Makes every argument of a record printable (numbers are left as they are).

    A record with a traceback gets it formatted here, each exception's text
    made printable: an exception raised by a control plane's `handle` may
    quote what a peer sent, and its text ends the traceback as it is.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple):
            record.args = tuple(
                arg if isinstance(arg, (int, float)) else printable(str(arg)) for arg in args
            )
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            # A formatter uses the text it finds, as it would its own.
            record.exc_text = escaped_traceback(record.exc_info[1])
        return True


# The most exceptions of a chain (causes and contexts) looked into for their text.
_CHAIN_AT_MOST: Final = 64


def escaped_traceback(error: BaseException) -> str:
    """`error`'s traceback as logging formats it, with each exception's text made printable.

    The traceback's own lines (frames, source lines, the chain's headers) come
    from the program; what an exception says may come from a peer. Each text
    that is not printable is replaced by its escaped form where the traceback
    quotes it.
    """
    text = logging.Formatter().formatException((type(error), error, error.__traceback__))
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending and len(seen) < _CHAIN_AT_MOST:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        try:
            said = str(current)
        except Exception:  # an exception whose text fails: the traceback says so itself
            said = ""
        notes = getattr(current, "__notes__", None)
        for quoted in (said, *(notes if isinstance(notes, list) else ())):
            if isinstance(quoted, str) and quoted and not quoted.isprintable():
                # Its backslashes doubled: `sub` reads a replacement's escapes.
                escaped = printable(quoted).replace("\\", "\\\\")
                text = _quoted(quoted).sub(escaped, text)
        group = getattr(current, "exceptions", None)  # an exception group's members
        linked = (
            current.__cause__,
            current.__context__,
            *(group if isinstance(group, tuple) else ()),
        )
        pending.extend(e for e in linked if isinstance(e, BaseException))
    # What is left unprintable within a line (a carriage return, an escape
    # sequence) is nothing the traceback's own structure needs.
    return "\n".join(printable(line) for line in text.split("\n"))


def _quoted(text: str) -> re.Pattern[str]:
    """`text` as a traceback quotes it.

    Inside an exception group, each of its lines after the first begins with
    the group's margin (spaces and bars).
    """
    return re.compile(r"\n[ |]*".join(re.escape(line) for line in text.split("\n")))


class Throttle:
    """At most one line per `interval` seconds; counts what it held back."""

    __slots__ = ("_clock", "_interval", "_next", "held")

    def __init__(
        self,
        interval: float = BAD_MESSAGE_LOG_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._interval = interval
        self._next: float | None = None
        #: Lines held back since the last one let through.
        self.held = 0

    def allow(self) -> tuple[bool, int]:
        """Whether to log this one, and how many were held back before it."""
        now = self._clock()
        if self._next is not None and now < self._next:
            self.held += 1
            return False, 0
        self._next = now + self._interval
        held, self.held = self.held, 0
        return True, held


class FirstLines:
    """Which reasons are said for the first time: at most `FIRST_LINES_AT_MOST` ever are.

    A peer chooses the reasons (unknown field numbers, a TLS error's text):
    remembering each would let it grow the set and the warnings without end.
    """

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def first(self, reason: str) -> bool:
        """Whether `reason` is new (and there is still room to remember it)."""
        if reason in self._seen or len(self._seen) >= FIRST_LINES_AT_MOST:
            return False
        self._seen.add(reason)
        return True


#: Who the lines logged now are about: set by the control plane in each
#: call's task (and so in the tasks and timers it starts); None elsewhere.
current_peer: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "llmgw_wire_stream_peer", default=None
)

#: INFO lines a minute that the peers of the stream may cause, all of them together.
LINES_PER_MINUTE: Final = 240
#: Lines at WARNING and above a minute that they may cause, a budget of their own.
WARNING_LINES_PER_MINUTE: Final = 240
#: Lines a minute, at any level, that one peer may cause.
LINES_PER_MINUTE_PER_PEER: Final = 60
# Peers whose own budget is remembered; past them the oldest is forgotten
# (the budget of all of them together still holds).
_PEERS_AT_MOST: Final = 1024


class _Bucket:
    """A token bucket of lines: `per_minute` a minute, as many at once."""

    __slots__ = ("_at", "_per_second", "capacity", "tokens")

    def __init__(self, per_minute: int, now: float) -> None:
        self.capacity = float(per_minute)
        self._per_second = per_minute / 60.0
        self.tokens = self.capacity
        self._at = now

    def has(self, now: float) -> bool:
        self.tokens = min(self.capacity, self.tokens + (now - self._at) * self._per_second)
        self._at = now
        return self.tokens >= 1.0


class LineBudget(logging.Filter):
    """Bounds the lines peers cause a minute: from one peer, and from all of them at each level.

    A line counts when it is logged in a call of the control plane
    (`current_peer` is set), at INFO or above: a line a peer can cause by
    opening calls and sending what it likes. Each counts against its peer's
    budget, `per_peer` lines a minute whatever their level, and against the
    budget of all peers for its level: `per_minute` INFO lines, and
    `warnings_per_minute` lines at WARNING and above. So INFO lines
    ("connected", "ended") from a storm of agents spend their own budget and
    cannot hold back the warnings and errors (a refusal, a failed `handle`)
    of others. Lines over a budget are dropped and counted; the next line
    let through is preceded by a WARNING that says how many were held back
    (it counts against no budget). Lines outside any call (the server's
    own, an agent's) and debug lines (asked for) are not counted.
    """

    def __init__(
        self,
        per_minute: int = LINES_PER_MINUTE,
        per_peer: int = LINES_PER_MINUTE_PER_PEER,
        clock: Callable[[], float] = time.monotonic,
        warnings_per_minute: int = WARNING_LINES_PER_MINUTE,
    ) -> None:
        super().__init__()
        self._clock = clock
        self._per_minute = per_minute
        self._warnings_per_minute = warnings_per_minute
        self._per_peer = per_peer
        self.reset()

    def reset(self) -> None:
        """Start afresh: every budget full, nothing held back."""
        now = self._clock()
        self._info = _Bucket(self._per_minute, now)
        self._warnings = _Bucket(self._warnings_per_minute, now)
        self._peers: dict[str, _Bucket] = {}
        #: Lines held back since the last one let through.
        self.held = 0
        #: Lines held back in all.
        self.suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.INFO:
            return True
        peer = current_peer.get()
        if peer is None or getattr(record, "_held_back_line", False):
            return True
        now = self._clock()
        bucket = self._peers.pop(peer, None)  # back in last: the most recent peers stay
        if bucket is None:
            bucket = _Bucket(self._per_peer, now)
            if len(self._peers) >= _PEERS_AT_MOST:
                del self._peers[next(iter(self._peers))]
        self._peers[peer] = bucket
        shared = self._warnings if record.levelno >= logging.WARNING else self._info
        # Both budgets must have room: a flood from one peer leaves the rest to others.
        if not (bucket.has(now) and shared.has(now)):
            self.held += 1
            self.suppressed += 1
            return False
        bucket.tokens -= 1.0
        shared.tokens -= 1.0
        if self.held:
            held, self.held = self.held, 0
            line = logging.LogRecord(
                record.name,
                logging.WARNING,
                record.pathname,
                record.lineno,
                "held back %d lines of the stream's log (over the budgets of %d a minute "
                "at INFO, %d at WARNING and above, %d from one peer)",
                (held, self._per_minute, self._warnings_per_minute, self._per_peer),
                None,
            )
            line._held_back_line = True
            logging.getLogger(record.name).handle(line)
        return True


#: The budget of the stream's logger (one per process: every server in it shares it).
LINE_BUDGET: Final = LineBudget()
