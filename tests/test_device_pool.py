"""The per-process pool that runs heavy per-device kernels side by side."""
from __future__ import annotations

import threading

import pytest
from threadpoolctl import threadpool_info

from meshax._src.runtime import compute_pool as device_pool
from meshax._src.runtime import cpu_budget


@pytest.fixture
def controllers_here():
    yield lambda count: cpu_budget.share_host(count, 0)
    cpu_budget.share_host(1, 0)


def blas_threads() -> list[int]:
    """The threads of NumPy's BLAS (the one meshax computes with; other libraries, SciPy's, may load their own
    at any time and are not meshax's to limit)."""
    blas = [lib for lib in threadpool_info() if lib["user_api"] == "blas"]
    numpys = [lib for lib in blas if "numpy" in lib["filepath"]]
    return [lib["num_threads"] for lib in numpys or blas]


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
def test_results_keep_their_order_and_each_call_gets_its_part_of_the_share(controllers_here, controllers):
    controllers_here(controllers)
    share = device_pool.workers()
    before = blas_threads()
    assert set(before) == {share}
    per_call = cpu_budget.split(share, 6)[1]
    seen = []

    def call(i):
        seen.append((threading.current_thread().name, blas_threads(), device_pool.call_parts()))
        return i * i

    assert device_pool.run_each([lambda i=i: call(i) for i in range(6)]) == [i * i for i in range(6)]
    if share > 1:  # side by side: one BLAS thread per call, the rest of its part through pieces
        assert all(threads == [1] * len(before) and parts == per_call for _, threads, parts in seen)
    assert blas_threads() == before  # back to the whole share afterwards
    if controllers > 1:  # one core for this controller: the calls run here, one after the other
        assert {name for name, *_ in seen} == {threading.current_thread().name}


def test_a_single_call_runs_here_with_the_whole_share():
    share = device_pool.workers()
    assert device_pool.run_each([blas_threads]) == [[share] * len(blas_threads())]


def test_calls_without_blas_leave_its_threads_alone_and_this_thread_takes_its_turn(controllers_here):
    controllers_here(1)
    device_pool.workers()  # the new share applied (it is, at the next computation)
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


def test_calls_with_a_larger_share_split_into_single_threaded_pieces(monkeypatch):
    import numpy as np

    from meshax._src.primitives.array_primitives import dot_general
    from meshax._src.core.core import impl_rules

    monkeypatch.setenv("MESHAX_CPU_THREADS", "6")
    rng = np.random.default_rng(0)
    pairs = [(rng.standard_normal((m, 40)).astype(np.float32), rng.standard_normal((40, n)).astype(np.float32))
             for m, n in ((500, 300), (300, 500))]  # split by rows, by columns
    seen = []

    def product(lhs, rhs, transpose):
        seen.append((device_pool.call_parts(), blas_threads()))
        numbers = (((0,), (0,)), ((), ())) if transpose else (((1,), (0,)), ((), ()))
        return impl_rules[dot_general](lhs.T.copy() if transpose else lhs, rhs, dimension_numbers=numbers)

    calls = [lambda pair=pair, t=t: product(*pair, t) for pair in pairs for t in (False, True)]
    assert device_pool.workers() == 6
    results = device_pool.run_each(calls[:3])  # 3 calls side by side, each in 2 pieces of one BLAS thread
    assert len(seen) == 3 and all(parts == 2 and set(threads) == {1} for parts, threads in seen)
    for got, (lhs, rhs) in zip(results, [pairs[0], pairs[0], pairs[1]]):
        np.testing.assert_allclose(got, lhs @ rhs, rtol=1e-5, atol=1e-5)
    assert set(blas_threads()) == {6}  # the whole share again afterwards


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "numpy-blocks"])
def test_a_clusters_blocks_run_on_the_executors_threads(compiled, monkeypatch):
    """With a share of 16 threads a large cluster is cut into row ranges run side by side: compiled by numba
    (no GIL held), on all 16; as NumPy calls on blocks, on at most CpuExecutor.max_threads (more threads wait on
    the GIL longer than they save). NumPy's values either way."""
    import numpy as np

    import meshax
    import meshax.numpy as jnp
    from meshax._src.interpreters import fusion
    from meshax._src.interpreters.cpu_executor import CpuExecutor

    if not compiled:
        monkeypatch.setattr(fusion.EXECUTORS["cpu"].numba, "min_elements", float("inf"))
    monkeypatch.setattr(fusion.EXECUTORS["cpu"].numba.compiler, "background", False)

    monkeypatch.setenv("MESHAX_CPU_THREADS", "16")
    batches: list[int] = []
    run_each = device_pool.run_each

    def recording(calls, *, blas=True):
        batches.append(len(calls))
        return run_each(calls, blas=blas)

    monkeypatch.setattr(device_pool, "run_each", recording)
    h = np.random.default_rng(0).standard_normal((2048, 256)).astype(np.float32)
    out = meshax.jit(lambda x: jnp.where(x > 0, x, 0.0) * 2.0)(h)
    np.testing.assert_array_equal(np.asarray(out), np.where(h > 0, h, np.float32(0)) * np.float32(2))
    assert max(batches) == (16 if compiled else CpuExecutor.max_threads), batches  # the cluster's blocks


def test_per_device_clusters_run_here_when_small_and_never_change_blas_threads(monkeypatch):
    """shard_map's per-device calls of a fused cluster: one after the other on this thread while all of their results
    are small (a pool's hand-over costs more), side by side without touching BLAS's limit (a cluster never calls
    BLAS) once they are large; other heavy kernels keep BLAS to one thread per call."""
    from meshax._src.interpreters import shard_map
    from meshax._src.interpreters.fusion import fused_p
    from meshax._src.primitives.array_primitives import dot_general as dot_general_p

    batches = []
    monkeypatch.setattr(device_pool, "run_each", lambda calls, blas=True: batches.append(blas) or [c() for c in calls])
    calls = [lambda i=i: i for i in range(4)]
    small = shard_map.SIDE_BY_SIDE_ELEMENTS // 4 - 1
    assert shard_map.run_device_calls(fused_p, calls, small) == [0, 1, 2, 3] and batches == []
    assert shard_map.run_device_calls(fused_p, calls, small + 1) == [0, 1, 2, 3] and batches == [False]
    assert shard_map.run_device_calls(dot_general_p, calls, 1) == [0, 1, 2, 3] and batches == [False, True]
