"""The per-process pool that runs heavy per-device kernels side by side."""
from __future__ import annotations

import os
import threading

import pytest
from threadpoolctl import threadpool_info

from meshax._src import device_pool


@pytest.fixture
def controllers_here():
    yield device_pool.share_machine
    device_pool.share_machine(1)


def blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_each_controller_gets_its_share_of_the_cores(controllers_here):
    cores = len(os.sched_getaffinity(0))
    assert device_pool.workers() == cores
    controllers_here(cores * 2)
    assert device_pool.workers() == 1


@pytest.mark.parametrize("controllers", [1, 64])
def test_results_keep_their_order_and_blas_runs_one_thread_per_call(controllers_here, controllers):
    controllers_here(controllers)
    before = blas_threads()
    seen = []

    def call(i):
        seen.append((threading.current_thread().name, blas_threads()))
        return i * i

    assert device_pool.run_each([lambda i=i: call(i) for i in range(6)]) == [i * i for i in range(6)]
    assert all(threads == [1] * len(before) for _, threads in seen)
    assert blas_threads() == before  # the limit is lifted afterwards
    if controllers > 1:  # one core for this controller: the calls run here, one after the other
        assert {name for name, _ in seen} == {threading.current_thread().name}


def test_a_single_call_runs_here_with_blas_untouched():
    before = blas_threads()
    assert device_pool.run_each([blas_threads]) == [before]


def test_calls_without_blas_leave_its_threads_alone_and_this_thread_takes_its_turn(controllers_here):
    controllers_here(1)
    before = blas_threads()
    gate = threading.Barrier(min(device_pool.workers(), 2), timeout=10)
    seen = []

    def call(i):
        seen.append((threading.current_thread().name, blas_threads()))
        if i < gate.parties:
            gate.wait()  # the first calls run at the same time, on different threads
        return -i

    assert device_pool.run_each([lambda i=i: call(i) for i in range(5)], blas=False) == [-i for i in range(5)]
    assert all(threads == before for _, threads in seen)
    if device_pool.workers() > 1:
        assert threading.current_thread().name in {name for name, _ in seen}
        assert len({name for name, _ in seen}) == 2


def test_an_exception_in_one_call_reaches_the_caller_after_the_others_finish(controllers_here):
    finished = []

    def call(i):
        if i == 1:
            raise ValueError("call 1 failed")
        finished.append(i)

    with pytest.raises(ValueError, match="call 1 failed"):
        device_pool.run_each([lambda i=i: call(i) for i in range(4)])
    if device_pool.workers() > 1:  # the other thread goes on taking calls
        assert sorted(finished) == [0, 2, 3]
