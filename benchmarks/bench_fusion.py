"""Elementwise chains of the MLP training step: one NumPy pass per operation vs one fused numexpr pass.

    python benchmarks/bench_fusion.py [--repeats 30] [--threads 1,2] [--numba]

The chains are those of bench_train.py's step (batch 2048, width 1024, float32): the forward bias + ReLU,
ReLU's backward select, and the SGD update of the 1024x1024 weight. Each is traced with meshax, made into its
executable program (interpreters/fusion.py) and its cluster run both ways through meshax's own code: unfused
(the separate NumPy calls, as every chain ran before fusion) and fused (numexpr, 1 and 2 threads). With
--numba (numba importable), the same chains as numba loops, and the time of their first call (compilation).
Times are the minimum over --repeats runs (the machine may be shared), in milliseconds.
"""
from __future__ import annotations

import argparse
import time
from typing import Any, Callable

import numpy as np

import meshax
import meshax.numpy as mnp
from meshax._src.interpreters import fusion, numexpr_executor
from meshax._src.interpreters.fusion import executable, fused_p, run_unfused

BATCH, WIDTH = 2048, 1024


def chains() -> dict[str, tuple[Callable[..., Any], list[np.ndarray]]]:
    rng = np.random.default_rng(0)
    h = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    b = rng.standard_normal(WIDTH).astype(np.float32)
    g = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    w = rng.standard_normal((WIDTH, WIDTH)).astype(np.float32)
    gw = rng.standard_normal((WIDTH, WIDTH)).astype(np.float32)
    return {
        "bias + relu, (2048, 1024)": (lambda h, b: meshax.nn.relu(h + b), [h, b]),
        "relu backward: where(h + b > 0, g, 0), (2048, 1024)": (lambda h, b, g: mnp.where(h + b > 0, g, 0.0), [h, b, g]),
        "SGD update w - 0.3 * g, (1024, 1024)": (lambda w, g: w - 0.3 * g, [w, gw]),
    }


def best(call: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def numba_versions() -> dict[str, Callable[..., Any]]:
    import numba

    @numba.njit(fastmath=False)
    def bias_relu(h, b):
        out = np.empty_like(h)
        for i in range(h.shape[0]):
            for j in range(h.shape[1]):
                z = h[i, j] + b[j]
                out[i, j] = z if not z <= 0 else np.float32(0.0)
        return out

    @numba.njit(fastmath=False)
    def relu_backward(h, b, g):
        out = np.empty_like(g)
        for i in range(h.shape[0]):
            for j in range(h.shape[1]):
                out[i, j] = g[i, j] if h[i, j] + b[j] > 0 else np.float32(0.0)
        return out

    @numba.njit(fastmath=False)
    def sgd(w, g):
        return w - np.float32(0.3) * g

    return dict(zip(chains(), (bias_relu, relu_backward, sgd)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--numba", action="store_true")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    executor = fusion.EXECUTORS["cpu"]
    jitted = numba_versions() if args.numba else {}
    header = ["chain", "NumPy, a pass per op"] + [f"numexpr fused, {t} thread(s)" for t in threads]
    if jitted:
        header += ["numba (1 thread)", "numba first call"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, (function, inputs) in chains().items():
        program = executable(meshax.make_jaxpr(function)(*inputs).jaxpr)
        (eq,) = [e for e in program.equations if e.primitive is fused_p]
        cluster = eq.params["cluster"]
        shape, dtype = cluster.out_aval.shape, cluster.out_aval.dtype
        kernel = cluster.kernel()
        assert kernel is not None, name
        row = [name, f"{best(lambda: run_unfused(cluster.jaxpr, inputs, shape), args.repeats):.2f}"]
        for t in threads:
            numexpr_executor.compute_threads = lambda: t  # the executor sizes numexpr's pool from this
            fused = executor.run(kernel, inputs, shape, dtype)
            assert fused.tobytes() == run_unfused(cluster.jaxpr, inputs, shape).tobytes()
            row.append(f"{best(lambda: executor.run(kernel, inputs, shape, dtype), args.repeats):.2f}")
        if jitted:
            start = time.perf_counter()
            jitted[name](*inputs)
            first = (time.perf_counter() - start) * 1e3
            row += [f"{best(lambda: jitted[name](*inputs), args.repeats):.2f}", f"{first:.0f}"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
