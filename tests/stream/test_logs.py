"""`escaped_traceback`: a traceback whose exceptions quote a peer stays the program's lines."""

from __future__ import annotations

import sys

import pytest

from llmgw_wire.stream._logs import escaped_traceback

FORGED = "node-1\nCRITICAL llmgw_wire.stream: forged"


def _raised(error: BaseException) -> BaseException:
    try:
        raise error
    except BaseException as exc:
        return exc


def test_every_exception_of_a_chain_is_escaped() -> None:
    try:
        try:
            raise KeyError(FORGED)
        except KeyError as inner:
            raise RuntimeError(f"adopting {FORGED}") from inner
    except RuntimeError as exc:
        text = escaped_traceback(exc)
    assert "\nCRITICAL" not in text
    assert "RuntimeError: adopting node-1\\nCRITICAL" in text
    assert "direct cause" in text  # the chain's own lines are kept as they are


@pytest.mark.skipif(sys.version_info < (3, 11), reason="notes and groups are Python 3.11's")
def test_notes_and_group_members_are_escaped() -> None:
    member = _raised(ValueError(FORGED))
    member.add_note(f"seen from {FORGED}")  # type: ignore[attr-defined,unused-ignore]
    group = _raised(ExceptionGroup("several", [member]))  # type: ignore[name-defined,unused-ignore]  # noqa: F821
    text = escaped_traceback(group)
    assert "\nCRITICAL" not in text
    assert "seen from node-1\\nCRITICAL" in text


def test_a_carriage_return_or_an_escape_sequence_is_escaped_too() -> None:
    text = escaped_traceback(_raised(ValueError("node-1\rCRITICAL \x1b[31mred")))
    assert "ValueError: node-1\\rCRITICAL \\x1b[31mred" in text
    assert "\r" not in text
    assert "\x1b" not in text


def test_a_printable_traceback_is_logging_s_own() -> None:
    import logging

    error = _raised(ValueError("plain"))
    expected = logging.Formatter().formatException((ValueError, error, error.__traceback__))
    assert escaped_traceback(error) == expected


def test_the_line_budget_keeps_a_share_for_each_peer_and_says_what_it_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    from llmgw_wire.stream._logs import LineBudget, current_peer

    now = [0.0]
    logger = logging.getLogger("tests.line_budget")
    budget = LineBudget(per_minute=10, per_peer=4, clock=lambda: now[0])
    logger.addFilter(budget)
    caplog.set_level(logging.INFO, logger="tests.line_budget")

    def lines_from(peer: str | None, count: int) -> None:
        token = current_peer.set(peer)
        try:
            for number in range(count):
                logger.warning("line %d from %s", number, peer)
        finally:
            current_peer.reset(token)

    try:
        lines_from("flood", 100)
        lines_from("agent", 3)  # the flood took its share only
        lines_from(None, 50)  # outside any call: the server's own lines, not counted
        assert [r.getMessage() for r in caplog.records][:5] == [
            *(f"line {n} from flood" for n in range(4)),
            "held back 96 lines of the stream's log "
            "(over the budgets of 10 a minute at INFO, 240 at WARNING and above, 4 from one peer)",
        ]
        assert sum("from agent" in r.getMessage() for r in caplog.records) == 3
        assert sum("from None" in r.getMessage() for r in caplog.records) == 50
        assert budget.suppressed == 96
        now[0] += 60.0  # a minute on: the budgets are full again
        caplog.clear()
        lines_from("flood", 1)
        assert [r.getMessage() for r in caplog.records] == ["line 0 from flood"]
    finally:
        logger.removeFilter(budget)


def test_info_lines_from_many_peers_cannot_hold_back_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A connect storm: each agent's "connected" at INFO; then a refusal, at WARNING."""
    import logging

    from llmgw_wire.stream._logs import LineBudget, current_peer

    now = [0.0]
    logger = logging.getLogger("tests.line_budget_levels")
    budget = LineBudget(per_minute=10, per_peer=4, warnings_per_minute=5, clock=lambda: now[0])
    logger.addFilter(budget)
    caplog.set_level(logging.INFO, logger="tests.line_budget_levels")

    def line(peer: str, level: int, text: str) -> None:
        token = current_peer.set(peer)
        try:
            logger.log(level, "%s %s", peer, text)
        finally:
            current_peer.reset(token)

    try:
        for number in range(1000):
            line(f"agent-{number}", logging.INFO, "connected")
        assert sum("connected" in r.getMessage() for r in caplog.records) == 10
        line("agent-late", logging.INFO, "connected")  # the INFO budget stays spent
        line("agent-refused", logging.WARNING, "refused: not serving")
        line("agent-failed", logging.ERROR, "handling failed")
        assert [r.getMessage() for r in caplog.records][10:] == [
            "held back 991 lines of the stream's log "
            "(over the budgets of 10 a minute at INFO, 5 at WARNING and above, 4 from one peer)",
            "agent-refused refused: not serving",
            "agent-failed handling failed",
        ]
        # Warnings from many peers are bounded too, by their own budget.
        caplog.clear()
        for number in range(100):
            line(f"agent-{number}", logging.WARNING, "refused")
        assert sum(r.getMessage().endswith(" refused") for r in caplog.records) == 3
        assert budget.suppressed == 991 + 97
    finally:
        logger.removeFilter(budget)
