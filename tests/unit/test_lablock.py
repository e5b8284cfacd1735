"""The lab lock serves waiters in arrival order and survives dead waiters."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from mcclab.lablock import LabLock, first_in_line, ticket_name


def test_ticket_names_sort_by_arrival() -> None:
    names = [ticket_name(10**18, 7), ticket_name(9, 123456), ticket_name(10**12, 1)]
    assert sorted(names) == [names[1], names[2], names[0]]


def test_first_in_line_skips_dead_owners_and_foreign_files() -> None:
    tickets = [ticket_name(1, 100), ticket_name(2, 200), ticket_name(3, 300), "notes.txt"]
    assert first_in_line(tickets, lambda pid: True) == ticket_name(1, 100)
    assert first_in_line(tickets, lambda pid: pid != 100) == ticket_name(2, 200)
    assert first_in_line(tickets, lambda pid: False) is None


def test_waiters_get_the_lock_in_arrival_order(tmp_path: Path) -> None:
    holder = LabLock(tmp_path / "lock", tmp_path / "queue", poll=0.01)
    assert holder.acquire(timeout=1)
    order: list[int] = []
    done = threading.Event()

    def wait(n: int, arrived: threading.Event) -> None:
        lock = LabLock(tmp_path / "lock", tmp_path / "queue", poll=0.01)
        # Threads share a pid, so order them by ticket time alone.
        assert lock.acquire(timeout=10, ready=lambda: arrived.set() or True)
        order.append(n)
        lock.release()
        if len(order) == 5:
            done.set()

    threads = []
    for n in range(5):
        arrived = threading.Event()
        thread = threading.Thread(target=wait, args=(n, arrived))
        thread.start()
        threads.append(thread)
        # Each waiter must have queued before the next one arrives.
        deadline = time.monotonic() + 5
        while len(os.listdir(tmp_path / "queue")) < n + 1 and time.monotonic() < deadline:
            time.sleep(0.005)
    holder.release()
    assert done.wait(10)
    for thread in threads:
        thread.join()
    assert order == [0, 1, 2, 3, 4]
    assert os.listdir(tmp_path / "queue") == []


def test_a_dead_waiters_ticket_is_skipped_and_removed(tmp_path: Path) -> None:
    queue = tmp_path / "queue"
    queue.mkdir()
    dead = 2**22 + 1  # above pid_max's default, so no such process
    (queue / ticket_name(1, dead)).touch()
    lock = LabLock(tmp_path / "lock", queue, poll=0.01)
    assert lock.acquire(timeout=2)
    assert os.listdir(queue) == []
    lock.release()


def test_timeout_leaves_nothing_behind(tmp_path: Path) -> None:
    holder = LabLock(tmp_path / "lock", tmp_path / "queue", poll=0.01)
    assert holder.acquire(timeout=1)
    waiter = LabLock(tmp_path / "lock", tmp_path / "queue", poll=0.01)
    assert not waiter.acquire(timeout=0.1)
    assert os.listdir(tmp_path / "queue") == []
    holder.release()
    assert waiter.acquire(timeout=1)
    waiter.release()


def test_a_lab_not_ready_keeps_the_waiter_waiting(tmp_path: Path) -> None:
    asked = []
    lock = LabLock(tmp_path / "lock", tmp_path / "queue", poll=0.01)
    assert not lock.acquire(timeout=0.1, ready=lambda: asked.append(1) or False)
    assert len(asked) >= 2
