"""Elementwise chains of the MLP training step: NumPy passes, meshax's compiled clusters, numexpr.

    python benchmarks/bench_fusion.py [--repeats 30] [--threads 1,2]

The chains are those of bench_train.py's step (batch 2048, width 1024, float32): the forward bias + ReLU,
ReLU's backward select, and the SGD update of a 1024x1024 weight; and Adam's update of that weight (optax's
arithmetic at its first step). Columns: the NumPy calls of the chain, one
pass per operation (np.where for the select: what meshax ran before fusion); meshax under jit on one device
with its clusters run as NumPy calls (numba off: the path a cluster takes until its kernel is compiled, and
for what numba cannot express); meshax with the cluster compiled by numba, on each of --threads threads; the
chain as one numexpr expression (`where`/`maximum` included, which meshax does not hand to numexpr) on each
of --threads threads; the kernel's compilation (numba already started, empty kernel cache); and the first
call in a fresh process, its kernel in the cache, at meshax's default (the kernel loaded in the background, the
call run as NumPy calls meanwhile) and with MESHAX_COMPILE_KERNELS=now (the call waits for numba's import and
start-up and the kernel's load). Each cell checks its result
against NumPy's. Times: the minimum over --repeats runs (the machine may be shared), milliseconds.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np

BATCH, WIDTH = 2048, 1024
F32 = np.float32


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"h": rng.standard_normal((BATCH, WIDTH)).astype(F32), "b": rng.standard_normal(WIDTH).astype(F32),
            "g": rng.standard_normal((BATCH, WIDTH)).astype(F32),
            "w": rng.standard_normal((WIDTH, WIDTH)).astype(F32),
            "gw": rng.standard_normal((WIDTH, WIDTH)).astype(F32),
            "m": rng.standard_normal((WIDTH, WIDTH)).astype(F32),
            "v": np.abs(rng.standard_normal((WIDTH, WIDTH))).astype(F32)}


def adam_numpy(w: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Adam's step of a weight (moments updated, bias-corrected at step 1), a NumPy pass per operation."""
    m = np.add(np.multiply(F32(0.9), m), np.multiply(F32(0.1), g))
    v = np.add(np.multiply(F32(0.999), v), np.multiply(F32(0.001), np.multiply(g, g)))
    return np.subtract(w, np.divide(np.multiply(F32(0.001), np.divide(m, F32(0.1))),
                                    np.add(np.sqrt(np.divide(v, F32(0.001))), F32(1e-8))))


def adam_meshax(mnp: Any) -> Callable[..., Any]:
    def step(w: Any, g: Any, m: Any, v: Any) -> Any:
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g ** 2
        return w - 0.001 * (m / 0.1) / (mnp.sqrt(v / 0.001) + 1e-8)

    return step


# name: (arguments, meshax function (made with meshax.numpy), NumPy one pass per operation, numexpr expression)
CHAINS: dict[str, tuple[tuple[str, ...], Callable[..., Callable[..., Any]], Callable[..., Any], str]] = {
    "bias + ReLU: max(h + b, 0)": (("h", "b"), lambda mnp: lambda h, b: mnp.maximum(h + b, 0.0),
                                   lambda h, b: np.maximum(np.add(h, b), F32(0)), "maximum(h + b, zero)"),
    "ReLU backward: where(h + b > 0, g, 0)": (("h", "b", "g"), lambda mnp: lambda h, b, g: mnp.where(h + b > 0, g, 0.0),
                                              lambda h, b, g: np.where(np.greater(np.add(h, b), F32(0)), g, F32(0)),
                                              "where(h + b > zero, g, zero)"),
    "SGD update: w - 0.3 * g (1024x1024)": (("w", "gw"), lambda mnp: lambda w, g: w - 0.3 * g,
                                            lambda w, g: np.subtract(w, np.multiply(F32(0.3), g)), "w - rate * gw"),
    "Adam update (1024x1024)": (("w", "gw", "m", "v"), adam_meshax, adam_numpy,
                                "w - lr * ((b1 * m + c1 * gw) / c1) / (sqrt((b2 * v + c2 * (gw * gw)) / c2) + eps)"),
}

# run in a fresh process: the first call of a chain whose kernel is in the cache (numba's import and start-up
# included), in milliseconds
FIRST_CALL = """
import sys, time, numpy as np
import meshax, meshax.numpy as mnp
sys.path.insert(0, {folder!r})
from bench_fusion import CHAINS, inputs
names, make, _, _ = CHAINS[{chain!r}]
data = inputs()
values = [meshax.device_put(data[n]) for n in names]
function = meshax.jit(make(mnp))
start = time.perf_counter()
function(*values).block_until_ready()
print((time.perf_counter() - start) * 1e3)
"""


def best(call: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="meshax-bench-kernels-")
    os.environ["MESHAX_CACHE_DIR"] = cache  # an empty kernel cache: compilation measured, not a load
    os.environ["MESHAX_COMPILE_KERNELS"] = "now"
    import numexpr
    from numexpr.necompiler import getType

    import meshax
    import meshax.numpy as mnp
    from meshax._src.interpreters import fusion
    from meshax._src.runtime import compute_pool

    numba_executor = fusion.EXECUTORS["cpu"].numba
    threads = [int(t) for t in args.threads.split(",")]
    data = inputs()
    constants = {"zero": np.zeros((), F32), "rate": np.asarray(0.3, F32), "lr": np.asarray(0.001, F32),
                 "b1": np.asarray(0.9, F32), "c1": np.asarray(0.1, F32), "b2": np.asarray(0.999, F32),
                 "c2": np.asarray(0.001, F32), "eps": np.asarray(1e-8, F32)}
    header = (["chain", "NumPy, a pass per op", "meshax, NumPy calls"] +
              [f"meshax compiled, {t} thread{'s' * (t > 1)}" for t in threads] +
              [f"numexpr, {t} thread{'s' * (t > 1)}" for t in threads] +
              ["compile (numba started)", "first call in a fresh process: default / waiting for the kernel"])
    print(f"host: {os.cpu_count()} cores; times in ms")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    warm = meshax.jit(lambda a: mnp.maximum(a * 2.0, 1.0))
    warm(meshax.device_put(np.ones((256, 256), F32))).block_until_ready()  # numba imported and started
    for name, (names, make, before, expression) in CHAINS.items():
        values = [meshax.device_put(data[n]) for n in names]
        plain = [data[n] for n in names]
        expected = before(*plain)

        def check(result: Any) -> None:
            assert np.array_equal(np.asarray(result), expected, equal_nan=True), name

        row = [name, f"{best(lambda: before(*plain), args.repeats):.2f}"]
        threshold = numba_executor.min_elements
        numba_executor.min_elements = float("inf")
        unfused = meshax.jit(make(mnp))
        check(unfused(*values))
        row.append(f"{best(lambda: unfused(*values).block_until_ready(), args.repeats):.2f}")
        numba_executor.min_elements = threshold
        compiled = meshax.jit(make(mnp))
        start = time.perf_counter()
        check(compiled(*values))
        compile_ms = (time.perf_counter() - start) * 1e3
        for t in threads:
            compute_pool.call_threads, original = (lambda t=t: t), compute_pool.call_threads
            try:
                check(compiled(*values))
                row.append(f"{best(lambda: compiled(*values).block_until_ready(), args.repeats):.2f}")
            finally:
                compute_pool.call_threads = original
        operands = {**data, **constants}
        used = [n for n in dict.fromkeys(re.findall(r"[a-z][a-z0-9]*", expression)) if n in operands]
        kernel = numexpr.NumExpr(expression, signature=[(n, getType(operands[n])) for n in used])
        out = np.empty_like(expected)
        for t in threads:
            numexpr.set_num_threads(t)
            run = lambda: kernel(*[operands[n] for n in used], out=out, casting="unsafe", ex_uses_vml=False)
            run()
            check(out)
            row.append(f"{best(run, args.repeats):.2f}")
        program = FIRST_CALL.format(folder=os.path.dirname(os.path.abspath(__file__)), chain=name)
        firsts = []
        for mode in ("background", "now"):
            first = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True,
                                   env=dict(os.environ, MESHAX_NUM_CPU_DEVICES="1", MESHAX_COMPILE_KERNELS=mode),
                                   timeout=300)
            firsts.append(f"{float(first.stdout.split()[-1]):.0f}")
        row += [f"{compile_ms:.0f}", " / ".join(firsts)]
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
