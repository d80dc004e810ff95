"""The turn rule without an event loop: scripted and generated runs of replies and outcomes.

`TurnRule` decides, for the in-process loop and the durable workflow alike, what a run does
after each reply and each turn's outcomes. Its decisions are checked here against an
independent statement of the limits (`_expected`, the in-process loop's former chain of
checks, written out), and for the invariants a loop relies on: turns never exceed
``max_turns``, tries are counted once per tool and per response, the output is asked for at
most ``output_retries`` times, a stop is final, and a rule rebuilt from what a durable run
carries across continue-as-new decides as the one it replaces.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolnexus.client._output import ASK_FOR_OUTPUT, OUTPUT_TOOL
from toolnexus.client._turn_rule import (
    ASK_OUTPUT,
    CONTINUE,
    DEFAULT_RETRIES,
    DONE,
    PAUSED,
    PENDING,
    RUN_CALLS,
    Ask,
    Stop,
    TurnRule,
    call_without_an_id,
    output_accepted,
    provider_stop,
)
from toolnexus.scheduling import Outcome, ToolCall
from toolnexus.tools._outcome import retry_outcome

TOOLS = ("look", "write", OUTPUT_TOOL)


@dataclass(frozen=True)
class Call:
    """One scripted call: its tool, whether it has an id, and how it ends."""

    name: str
    has_id: bool = True
    result: str = "ok"  # "ok", "retry" (asks the model to try again) or "failed"


@dataclass(frozen=True)
class Reply:
    """One scripted model reply and what its calls do."""

    ending: str = "answered"
    calls: tuple[Call, ...] = ()
    pending: bool = False  # some calls wait for the host first


def _calls(reply: Reply) -> list[ToolCall]:
    return [ToolCall(f"c{n}" if c.has_id else "", c.name, {}) for n, c in enumerate(reply.calls)]


def _outcomes(reply: Reply) -> list[Outcome]:
    made = {
        "ok": lambda name: Outcome(value="fine"),
        "retry": lambda name: retry_outcome(name, "try again"),
        "failed": lambda name: Outcome.failure(name, "no"),
    }
    return [made[c.result](c.name) for c in reply.calls]


def _drive(
    rule: TurnRule, script: list[Reply], output: bool, allowed: dict[str, int | None]
) -> tuple[list[Any], Stop]:
    """Run ``rule`` as a loop does, over the scripted replies (the last one repeats): every
    decision in order, and the stop."""
    decisions: list[Any] = []
    for index in range(1000):
        asked = rule.request()
        decisions.append(asked)
        if isinstance(asked, Stop):
            return decisions, asked
        reply = script[min(index, len(script) - 1)]
        calls = _calls(reply)
        decided = rule.reply(reply.ending, calls, stop_reason=None, stop_details=None)
        decisions.append(decided)
        if decided is RUN_CALLS:
            if reply.pending:
                decisions.append(rule.waiting())
            outcomes = _outcomes(reply)
            received = output and output_accepted(calls, outcomes)
            decided = rule.settle(calls, outcomes, allowed.get, received=received)
            decisions.append(decided)
        if isinstance(decided, Stop):
            return decisions, decided
    raise AssertionError("the rule never stopped")


def _expected(
    max_turns: int, output_retries: int | None, script: list[Reply], allowed: dict[str, int | None]
) -> tuple[Stop, int, int]:
    """How the run ends (the stop, the replies taken, the times the output was asked for),
    written as the in-process loop checked it before the rule, independently of the rule."""
    tries: collections.Counter[str] = collections.Counter()
    asks = 0
    for turns in range(max_turns):
        reply = script[min(turns, len(script) - 1)]
        taken = turns + 1
        if reply.ending in ("refused", "context_window"):
            return Stop(*provider_stop(reply.ending, None, None)), taken, asks
        nameless = [c for c in reply.calls if not c.has_id]
        if nameless:
            return Stop("error", call_without_an_id(_calls(reply))), taken, asks
        if reply.calls:
            asked_again = []
            for call in reply.calls:
                if call.result == "retry" and call.name not in asked_again:
                    asked_again.append(call.name)
            past = None
            for name in asked_again:
                tries[name] += 1
                limit = allowed.get(name)
                limit = DEFAULT_RETRIES if limit is None else limit
                if tries[name] > limit and past is None:
                    past = f"tool '{name}' needed another try more often than its retries ({limit}) allow"
            if past is not None:
                return Stop("incomplete", past), taken, asks
            accepted = any(c.name == OUTPUT_TOOL and c.result == "ok" for c in reply.calls)
            if output_retries is not None and accepted:
                return DONE, taken, asks
            continue
        if reply.ending == "paused":
            continue
        if output_retries is None:
            return DONE, taken, asks
        tries[OUTPUT_TOOL] += 1
        if tries[OUTPUT_TOOL] > output_retries:
            past = f"tool '{OUTPUT_TOOL}' needed another try more often than its retries ({output_retries}) allow"
            return Stop("incomplete", past), taken, asks
        asks += 1
    return Stop("incomplete"), max_turns, asks


calls = st.builds(
    Call,
    name=st.sampled_from(TOOLS),
    has_id=st.sampled_from([True] * 15 + [False]),  # now and then a call without an id
    result=st.sampled_from(["ok", "retry", "retry", "failed"]),
)
replies = st.builds(
    Reply,
    ending=st.sampled_from(["answered"] * 6 + ["paused", "paused", "refused", "context_window"]),
    calls=st.lists(calls, max_size=4).map(tuple),
    pending=st.booleans(),
)
scripts = st.lists(replies, min_size=1, max_size=12)
limits = st.dictionaries(st.sampled_from(TOOLS), st.none() | st.integers(0, 3))


@settings(max_examples=200, deadline=None)
@given(
    script=scripts,
    max_turns=st.integers(1, 10),
    output_retries=st.none() | st.integers(0, 3),
    allowed=limits,
)
def test_the_rule_ends_each_run_as_the_limits_say(
    script: list[Reply], max_turns: int, output_retries: int | None, allowed: dict[str, int | None]
) -> None:
    if output_retries is not None:  # the output tool's retries are output_retries, as offered
        allowed = {**allowed, OUTPUT_TOOL: output_retries}
    rule = TurnRule(max_turns, output_retries)
    decisions, stop = _drive(rule, script, output_retries is not None, allowed)
    expected, taken, asks = _expected(max_turns, output_retries, script, allowed)
    assert stop == expected
    assert rule.turns == taken <= max_turns
    assert [d.turn for d in decisions if isinstance(d, Ask)] == list(range(1, taken + 1))
    assert decisions.count(ASK_OUTPUT) == asks
    if output_retries is None:
        assert asks == 0
    else:
        assert asks <= output_retries  # so the model hands its result over at most +1 times


@settings(max_examples=150, deadline=None)
@given(
    script=scripts,
    max_turns=st.integers(1, 10),
    output_retries=st.none() | st.integers(0, 3),
    allowed=limits,
)
def test_a_stop_is_final_and_the_same_inputs_give_the_same_decisions(
    script: list[Reply], max_turns: int, output_retries: int | None, allowed: dict[str, int | None]
) -> None:
    rule = TurnRule(max_turns, output_retries)
    decisions, stop = _drive(rule, script, output_retries is not None, allowed)
    again, _ = _drive(
        TurnRule(max_turns, output_retries), script, output_retries is not None, allowed
    )
    assert again == decisions  # a durable replay decides exactly as the first run did
    stops = [d for d in decisions if isinstance(d, Stop) and d is not PENDING]
    assert stops == [stop]  # one stop, the last decision
    assert decisions[-1] is stop
    tries = dict(rule.tries)
    assert rule.request() is stop
    assert rule.reply("answered", []) is stop
    assert rule.settle([], [], allowed.get, received=True) is stop
    assert rule.waiting() is stop
    assert dict(rule.tries) == tries and rule.turns <= max_turns  # nothing counted after it


@settings(max_examples=150, deadline=None)
@given(
    script=scripts,
    max_turns=st.integers(1, 10),
    output_retries=st.none() | st.integers(0, 3),
    allowed=limits,
    cut=st.integers(0, 12),
)
def test_a_rule_rebuilt_from_its_turns_and_tries_decides_as_the_one_it_replaces(
    script: list[Reply],
    max_turns: int,
    output_retries: int | None,
    allowed: dict[str, int | None],
    cut: int,
) -> None:
    """What a durable run carries across continue-as-new (the turns so far, the tries
    counted) is the rule's whole state between turns."""
    whole, stop = _drive(
        TurnRule(max_turns, output_retries), script, output_retries is not None, allowed
    )
    first = TurnRule(max_turns, output_retries)
    # the first run stops after ``cut`` turns, between turns
    decisions: list[Any] = []
    for index in range(cut):
        asked = first.request()
        decisions.append(asked)
        if isinstance(asked, Stop):
            break
        reply = script[min(index, len(script) - 1)]
        made = _calls(reply)
        decided = first.reply(reply.ending, made)
        decisions.append(decided)
        if decided is RUN_CALLS:
            if reply.pending:
                decisions.append(first.waiting())
            outcomes = _outcomes(reply)
            received = output_retries is not None and output_accepted(made, outcomes)
            decided = first.settle(made, outcomes, allowed.get, received=received)
            decisions.append(decided)
        if isinstance(decided, Stop):
            break
    if first.ended is not None:
        assert decisions == whole
        return
    rebuilt = TurnRule(max_turns, output_retries, turns=first.turns, tries=dict(first.tries))
    rest, rest_stop = _drive(
        rebuilt, script[first.turns :] or script[-1:], output_retries is not None, allowed
    )
    assert decisions + rest == whole
    assert rest_stop == stop


@settings(max_examples=150, deadline=None)
@given(
    script=scripts,
    max_turns=st.integers(1, 10),
    output_retries=st.none() | st.integers(0, 3),
    allowed=limits,
    cut=st.integers(0, 12),
)
def test_a_rule_rebuilt_inside_a_turns_calls_settles_them_as_the_one_it_replaces(
    script: list[Reply],
    max_turns: int,
    output_retries: int | None,
    allowed: dict[str, int | None],
    cut: int,
) -> None:
    """A durable run continued as new inside a turn's batch rebuilds its rule ``settling``:
    the next input is that turn's outcomes, and the run goes on as it would have."""
    output = output_retries is not None
    whole, _ = _drive(TurnRule(max_turns, output_retries), script, output, allowed)
    rule = TurnRule(max_turns, output_retries)
    decisions: list[Any] = []
    for index in range(1000):
        asked = rule.request()
        decisions.append(asked)
        if isinstance(asked, Stop):
            break
        reply = script[min(index, len(script) - 1)]
        made = _calls(reply)
        decided = rule.reply(reply.ending, made)
        decisions.append(decided)
        if decided is RUN_CALLS:
            if index >= cut:  # the boundary: the next run goes on from here
                rule = TurnRule(
                    max_turns, output_retries, turns=rule.turns, tries=rule.tries, settling=True
                )
                cut = 1000
            if reply.pending:
                decisions.append(rule.waiting())
            outcomes = _outcomes(reply)
            received = output and output_accepted(made, outcomes)
            decided = rule.settle(made, outcomes, allowed.get, received=received)
            decisions.append(decided)
        if isinstance(decided, Stop):
            break
    assert decisions == whole


def test_a_reply_in_each_case() -> None:
    rule = TurnRule(max_turns=3)
    assert rule.request() == Ask(1)
    look = ToolCall("c1", "look", {})
    assert rule.reply("answered", [look]) is RUN_CALLS
    assert rule.waiting() is PENDING  # nothing counted; the calls are settled later
    assert rule.settle([look], [Outcome(value=1)], lambda _: None) is CONTINUE
    assert rule.request() == Ask(2)
    assert rule.reply("paused", []) is PAUSED
    assert rule.request() == Ask(3)
    assert rule.reply("answered", []) is DONE

    refused = TurnRule(max_turns=3)
    refused.request()
    stop = refused.reply("refused", [look], stop_reason="refusal", stop_details={"category": "x"})
    assert stop == Stop("refused", "the provider refused to answer (refusal; category: x)")

    nameless = TurnRule(max_turns=3)
    nameless.request()
    stop = nameless.reply("answered", [look, ToolCall("", "write", {})], sender="the model at X")
    assert stop.status == "error" and stop.reason is not None
    assert stop.reason.startswith("the model at X sent the tool call 'write' without a call id")


def test_a_text_answer_where_an_output_was_asked_for_is_a_try_of_the_output_tool() -> None:
    rule = TurnRule(max_turns=10, output_retries=2)
    for turn in (1, 2):
        assert rule.request() == Ask(turn)
        asked = rule.reply("answered", [])
        assert asked is ASK_OUTPUT and asked.message == ASK_FOR_OUTPUT
    rule.request()
    assert rule.reply("answered", []) == Stop(
        "incomplete", "tool 'final_result' needed another try more often than its retries (2) allow"
    )
    assert rule.tries[OUTPUT_TOOL] == 3


def test_one_response_asking_a_tool_again_three_times_is_one_try() -> None:
    rule = TurnRule(max_turns=10)
    rule.request()
    made = [ToolCall(f"c{n}", "look", {}) for n in range(3)]
    rule.reply("answered", made)
    asked = [retry_outcome("look", "again")] * 3
    assert rule.settle(made, asked, lambda _: 1) is CONTINUE
    assert rule.tries == {"look": 1}
    rule.request()
    rule.reply("answered", made)
    stop = rule.settle(made, asked, lambda _: 1)
    assert stop == Stop(
        "incomplete", "tool 'look' needed another try more often than its retries (1) allow"
    )


def test_a_budget_is_asked_only_when_a_turn_is_left() -> None:
    asked: list[int] = []

    def budget() -> str | None:
        asked.append(1)
        return "the tree's token budget ran out" if len(asked) == 2 else None

    rule = TurnRule(max_turns=5)
    assert rule.request(budget) == Ask(1)
    rule.reply("paused", [])
    assert rule.request(budget) == Stop("incomplete", "the tree's token budget ran out")
    last = TurnRule(max_turns=1)
    last.request(budget)
    last.reply("paused", [])
    assert last.request(budget) == Stop("incomplete") and len(asked) == 3  # not asked at the end


def test_an_input_out_of_its_phase_is_a_loop_bug_said_plainly() -> None:
    rule = TurnRule(max_turns=2)
    with pytest.raises(RuntimeError, match="expects a request next, not a reply"):
        rule.reply("answered", [])
    rule.request()
    with pytest.raises(RuntimeError, match="expects a reply next, not a calls"):
        rule.settle([], [], lambda _: None)
