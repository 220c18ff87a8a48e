"""The per-process pool that runs heavy per-device kernels side by side."""
from __future__ import annotations

import threading

import pytest
from threadpoolctl import threadpool_info

from meshax._src import device_pool
from meshax._src.runtime import cpu_budget


@pytest.fixture
def controllers_here():
    yield lambda count: cpu_budget.share_host(count, 0)
    cpu_budget.share_host(1, 0)


def blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_each_controller_gets_its_share_of_the_cores_and_blas_is_set_to_it(controllers_here, monkeypatch):
    monkeypatch.delenv("MESHAX_CPU_THREADS", raising=False)
    cores = cpu_budget.host_cores()
    assert device_pool.workers() == cores
    assert set(blas_threads()) == {cores}
    controllers_here(cores * 2)
    assert device_pool.workers() == 1
    assert set(blas_threads()) == {1}
    monkeypatch.setenv("MESHAX_CPU_THREADS", "3")
    assert device_pool.workers() == 3
    assert set(blas_threads()) == {3}


@pytest.mark.parametrize("controllers", [1, 64])
def test_results_keep_their_order_and_blas_runs_its_part_of_the_share_per_call(controllers_here, controllers):
    controllers_here(controllers)
    share = device_pool.workers()
    before = blas_threads()
    assert set(before) == {share}
    per_call = cpu_budget.split(share, 6)[1]
    seen = []

    def call(i):
        seen.append((threading.current_thread().name, blas_threads()))
        return i * i

    assert device_pool.run_each([lambda i=i: call(i) for i in range(6)]) == [i * i for i in range(6)]
    assert all(threads == [per_call] * len(before) for _, threads in seen)
    assert blas_threads() == before  # back to the whole share afterwards
    if controllers > 1:  # one core for this controller: the calls run here, one after the other
        assert {name for name, _ in seen} == {threading.current_thread().name}


def test_a_single_call_runs_here_with_the_whole_share():
    share = device_pool.workers()
    assert device_pool.run_each([blas_threads]) == [[share] * len(blas_threads())]


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
