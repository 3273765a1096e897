"""The gate of the gold class streams (jobs/class_gate.py) with real threads: one batch at
a time, the highest class waiting goes next, a lower class passed over too often goes next
anyway, a class that just ran keeps the turn for a short linger against lower ones."""

from __future__ import annotations

import threading
import time

import pytest

from lakecep.jobs.class_gate import ClassGate


def _batch(gate: ClassGate, priority: str, log: list[str], running: list[int],
           hold: float = 0.05) -> None:
    with gate.turn(priority):
        running.append(1)
        assert len(running) == 1, "two class batches ran at once"
        log.append(priority)
        time.sleep(hold)
        running.pop()


def _queue(gate: ClassGate, classes: list[str], log: list[str]) -> None:
    """Hold the gate, queue one batch per class (in the given order), then let go."""
    running: list[int] = []
    threads = [threading.Thread(target=_batch, args=(gate, c, log, running))
               for c in classes]
    with gate.turn("normal"):  # a batch running when they arrive
        for t in threads:
            t.start()
            time.sleep(0.05)  # (each is waiting before the next arrives)
    for t in threads:
        t.join(timeout=10)
        assert not t.is_alive()


def test_the_highest_class_waiting_goes_next_one_at_a_time() -> None:
    gate, log = ClassGate(starve_after=10, linger=0.2), []
    _queue(gate, ["low", "normal", "high"], log)
    assert log == ["high", "normal", "low"]


def test_a_class_passed_over_too_often_goes_next() -> None:
    # low waits while a steady stream of high batches keeps arriving: after being passed
    # over twice it goes before the next high one
    gate, log, running = ClassGate(starve_after=2, linger=0.2), [], []
    low = threading.Thread(target=_batch, args=(gate, "low", log, running))
    highs = [threading.Thread(target=_batch, args=(gate, "high", log, running, 0.2))
             for _ in range(4)]
    with gate.turn("high"):
        low.start()
        time.sleep(0.05)
        for t in highs:
            t.start()
            time.sleep(0.02)
    for t in [low, *highs]:
        t.join(timeout=10)
    assert log.index("low") == 2, log  # two highs passed it, then its turn
    assert log.count("high") == 4


def test_turn_reports_the_wait_and_rejects_unknown_classes() -> None:
    gate = ClassGate()
    with gate.turn("low") as waited:
        assert 0 <= waited < 0.5
    with pytest.raises(ValueError, match="use one of high, normal, low"), gate.turn("urgent"):
        pass
    with pytest.raises(RuntimeError, match="batch failed"), gate.turn("high"):
        raise RuntimeError("batch failed")
    with gate.turn("low") as waited:  # a failed batch does not keep the gate
        assert waited < 0.5


def _next_batch_after(gate: ClassGate, first: str, then: str, pause: float) -> list[str]:
    """A ``first`` batch runs while a ``low`` one waits; ``pause`` s after it ends the
    ``then`` class asks for the turn: the order the three batches ran in."""
    log: list[str] = []
    running: list[int] = []
    low = threading.Thread(target=_batch, args=(gate, "low", log, running))
    with gate.turn(first):
        log.append(first)
        low.start()
        time.sleep(0.05)
    time.sleep(pause)
    _batch(gate, then, log, running)
    low.join(timeout=10)
    assert not low.is_alive()
    return log


def test_a_class_that_just_ran_keeps_the_turn_for_the_linger() -> None:
    # high's next batch is planned 0.1 s after its last ended: within the linger it goes
    # before the low batch that was already waiting
    assert _next_batch_after(ClassGate(linger=1.5), "high", "high", 0.1) == \
        ["high", "high", "low"]
    # without a linger the waiting low batch takes the turn at once (the alternation the
    # linger removes)
    assert _next_batch_after(ClassGate(linger=0.0), "high", "high", 0.5) == \
        ["high", "low", "high"]
    # the linger only holds off lower classes: after a low batch, a waiting low one does
    # not wait for the lingering class
    gate = ClassGate(linger=5.0)
    started = time.monotonic()
    assert _next_batch_after(gate, "low", "high", 0.3) == ["low", "low", "high"]
    assert time.monotonic() - started < 3


def test_a_starved_class_does_not_wait_for_the_linger() -> None:
    gate = ClassGate(starve_after=1, linger=5.0)
    started = time.monotonic()
    log = _next_batch_after(gate, "high", "high", 0.1)
    # low was passed over once (by nothing yet: it arrived while high ran) -> the linger
    # holds it off for the next high; after that high it is starved and goes at once
    assert log == ["high", "high", "low"]
    assert time.monotonic() - started < 3
