"""Elementwise chains of the MLP training step: NumPy passes vs one fused numexpr (or numba) pass.

    python benchmarks/bench_fusion.py [--repeats 30] [--threads 1,2] [--numba]

The chains are those of bench_train.py's step (batch 2048, width 1024, float32): the forward bias + ReLU,
ReLU's backward select, and the SGD update of a 1024x1024 weight. Columns: the NumPy calls meshax made
before fusion (one pass per operation, np.where for a select); meshax now (its executable program on one
device: simplified, select branchless, clusters through numexpr when the executor finds it worthwhile);
the chain as one numexpr expression on 1 and 2 threads (`where`/`maximum` included, which meshax does not
hand to numexpr); with --numba (numba importable), a numba loop on one thread and its first call
(compilation). Each cell checks its result against NumPy's. Times: the minimum over --repeats runs (the
machine may be shared), milliseconds.
"""
from __future__ import annotations

import argparse
import re
import time
from typing import Any, Callable

import numpy as np

import meshax
import meshax.numpy as mnp
from meshax._src.interpreters import numpy_eval

BATCH, WIDTH = 2048, 1024
F32 = np.float32


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"h": rng.standard_normal((BATCH, WIDTH)).astype(F32), "b": rng.standard_normal(WIDTH).astype(F32),
            "g": rng.standard_normal((BATCH, WIDTH)).astype(F32),
            "w": rng.standard_normal((WIDTH, WIDTH)).astype(F32),
            "gw": rng.standard_normal((WIDTH, WIDTH)).astype(F32)}


# name: (arguments, meshax function, NumPy as before, numexpr expression)
CHAINS: dict[str, tuple[tuple[str, ...], Callable[..., Any], Callable[..., Any], str]] = {
    "bias + ReLU: max(h + b, 0)": (("h", "b"), lambda h, b: mnp.maximum(h + b, 0.0),
                                   lambda h, b: np.maximum(np.add(h, b), F32(0)), "maximum(h + b, zero)"),
    "ReLU backward: where(h + b > 0, g, 0)": (("h", "b", "g"), lambda h, b, g: mnp.where(h + b > 0, g, 0.0),
                                              lambda h, b, g: np.where(np.greater(np.add(h, b), F32(0)), g, F32(0)),
                                              "where(h + b > zero, g, zero)"),
    "SGD update: w - 0.3 * g (1024x1024)": (("w", "gw"), lambda w, g: w - 0.3 * g,
                                            lambda w, g: np.subtract(w, np.multiply(F32(0.3), g)), "w - rate * gw"),
}


def best(call: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def numba_chains() -> dict[str, Callable[..., Any]]:
    import numba

    @numba.njit
    def bias_relu(h, b):
        out = np.empty_like(h)
        for i in range(h.shape[0]):
            for j in range(h.shape[1]):
                z = h[i, j] + b[j]
                out[i, j] = max(z, F32(0.0))
        return out

    @numba.njit
    def relu_backward(h, b, g):
        out = np.empty_like(g)
        for i in range(h.shape[0]):
            for j in range(h.shape[1]):
                out[i, j] = g[i, j] if h[i, j] + b[j] > 0 else F32(0.0)
        return out

    @numba.njit
    def sgd(w, g):
        return w - F32(0.3) * g

    return dict(zip(CHAINS, (bias_relu, relu_backward, sgd)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--numba", action="store_true")
    args = parser.parse_args()
    import numexpr
    from numexpr.necompiler import getType

    threads = [int(t) for t in args.threads.split(",")]
    data = inputs()
    constants = {"zero": np.zeros((), F32), "rate": np.asarray(0.3, F32)}
    jitted = numba_chains() if args.numba else {}
    header = ["chain", "NumPy, a pass per op (before)", "meshax now"] + \
        [f"numexpr, {t} thread{'s' * (t > 1)}" for t in threads]
    if jitted:
        header += ["numba, 1 thread", "numba first call"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, (names, function, before, expression) in CHAINS.items():
        values = [data[n] for n in names]
        expected = before(*values)
        jaxpr = meshax.make_jaxpr(function)(*values).jaxpr
        now = numpy_eval.run(jaxpr, [], values)[0]
        assert now.tobytes() == expected.tobytes(), name
        row = [name, f"{best(lambda: before(*values), args.repeats):.2f}",
               f"{best(lambda: numpy_eval.run(jaxpr, [], values), args.repeats):.2f}"]
        operands = {**data, **constants}
        used = [n for n in dict.fromkeys(re.findall(r"[a-z]+", expression)) if n in operands]
        kernel = numexpr.NumExpr(expression, signature=[(n, getType(operands[n])) for n in used])
        out = np.empty_like(expected)
        for t in threads:
            numexpr.set_num_threads(t)
            kernel(*[operands[n] for n in used], out=out, casting="unsafe", ex_uses_vml=False)
            assert np.array_equal(out, expected, equal_nan=True), name
            fused = lambda: kernel(*[operands[n] for n in used], out=out, casting="unsafe", ex_uses_vml=False)
            row.append(f"{best(fused, args.repeats):.2f}")
        if jitted:
            start = time.perf_counter()
            first = jitted[name](*values)
            compiled = (time.perf_counter() - start) * 1e3
            assert np.array_equal(first, expected, equal_nan=True), name
            row += [f"{best(lambda: jitted[name](*values), args.repeats):.2f}", f"{compiled:.0f}"]
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
