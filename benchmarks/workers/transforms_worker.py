"""Transformation worker for bench_transforms.py: lax.scan of an RNN cell and vmap of per-example gradients.

    MESHAX_NUM_CPU_DEVICES=8 python transforms_worker.py --backend meshax --cases scan_fwd,scan_grad,vmap_grad \
        --warmup W --calls C --budget SECONDS [--save DIR] [--profile DIR]
    JAX_PLATFORMS=cpu JAX_NUM_CPU_DEVICES=8 python transforms_worker.py --backend jax ...

One process, ordinary (unsharded, single-device) arrays. The cases, all under jit:

- `scan_fwd`: `lax.scan` of --steps steps of the cell h = tanh(h @ Wh + x @ Wx + b) (hidden --hidden,
  input --inputs) over xs of shape (steps, inputs); returns (final h, all h).
- `scan_grad`: `grad` of mean(all h ** 2) + sum(final h) with respect to (Wh, Wx, b).
- `vmap_grad`: `vmap(grad(loss), in_axes=(None, 0, 0))` over a batch of --batch examples, loss the
  softmax cross-entropy of an MLP 784-256-10 (tanh hidden layer); returns per-example gradients.

Inputs come from NumPy's default_rng(0) (identical for both libraries). Per case: W warm-up calls (the
first traces/compiles), then C timed calls, each timed until its results are ready. The record goes
to $BENCH_RECORD_DIR/0.json, rewritten after every call. --save DIR writes the outputs of the last
call as DIR/<backend>_<case>.npz (for the agreement check); --floor also times hand-written NumPy
loops of the scan cases (numpy_floors; a lower bound for per-step dispatch); --profile DIR runs the timed calls
under cProfile and writes DIR/<backend>_<case>.prof. Exits with status 3 after --budget seconds.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable

import numpy as np

from records import RecordWriter
from worker_support import Backend, start_watchdog

CASES = ("scan_fwd", "scan_grad", "vmap_grad")


def rnn_inputs(args: argparse.Namespace) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    h, i = args.hidden, args.inputs
    # Recurrent weights with spectral radius about 0.5: the 1000-step recurrence stays contracting,
    # so float32 results of the two libraries are comparable at rtol 1e-4.
    return {"Wh": (0.5 * rng.standard_normal((h, h)) / np.sqrt(h)).astype(np.float32),
            "Wx": (rng.standard_normal((i, h)) / np.sqrt(i)).astype(np.float32),
            "b": (0.1 * rng.standard_normal(h)).astype(np.float32),
            "h0": np.zeros(h, np.float32),
            "xs": rng.standard_normal((args.steps, i)).astype(np.float32)}


def mlp_inputs(args: argparse.Namespace) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    sizes = (784, 256, 10)
    out = {}
    for layer, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        out[f"w{layer}"] = (rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32)
        out[f"b{layer}"] = np.zeros(n, np.float32)
    out["x"] = rng.standard_normal((args.batch, sizes[0])).astype(np.float32)
    out["y"] = rng.integers(0, sizes[-1], args.batch).astype(np.int32)
    return out


def build(b: Backend, case: str, args: argparse.Namespace) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """(jitted function, its arguments as library arrays) for `case`."""
    jax, jnp = b.jax, b.jnp
    lax = jax.lax
    if case.startswith("scan"):
        host = rnn_inputs(args)
        params = {k: jnp.asarray(host[k]) for k in ("Wh", "Wx", "b")}
        h0, xs = jnp.asarray(host["h0"]), jnp.asarray(host["xs"])

        def rnn(p: Any, h0: Any, xs: Any) -> Any:
            def cell(h: Any, x: Any) -> Any:
                h = jnp.tanh(h @ p["Wh"] + x @ p["Wx"] + p["b"])
                return h, h

            return lax.scan(cell, h0, xs)

        if case == "scan_fwd":
            return jax.jit(rnn), (params, h0, xs)

        def loss(p: Any, h0: Any, xs: Any) -> Any:
            h, hs = rnn(p, h0, xs)
            return jnp.mean(hs ** 2) + jnp.sum(h)

        return jax.jit(jax.grad(loss)), (params, h0, xs)

    host = mlp_inputs(args)
    params = [{"w": jnp.asarray(host[f"w{i}"]), "b": jnp.asarray(host[f"b{i}"])} for i in range(2)]
    x, y = jnp.asarray(host["x"]), jnp.asarray(host["y"])

    def loss(p: Any, x: Any, y: Any) -> Any:  # one example: x (784,), y ()
        h = jnp.tanh(x @ p[0]["w"] + p[0]["b"])
        logits = h @ p[1]["w"] + p[1]["b"]
        logp = logits - jax.nn.logsumexp(logits)
        return -jnp.sum(logp * jax.nn.one_hot(y, logits.shape[-1]))

    return jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))), (params, x, y)


def numpy_floors(case: str, args: argparse.Namespace) -> dict[str, Callable[[], Any]]:
    """Hand-written NumPy loops computing what a scan case computes, one NumPy call per operation and step:
    the least that any implementation dispatching NumPy per step can spend. `loop` keeps the program's
    per-step x @ Wx; `hoisted` computes xs @ Wx for all steps before the loop (and, for the gradient,
    the weight gradients as two matmuls after it)."""
    host = rnn_inputs(args)
    wh, wx, b, h0, xs = (host[k] for k in ("Wh", "Wx", "b", "h0", "xs"))
    steps, hidden = xs.shape[0], wh.shape[0]

    def forward(hoisted: bool) -> tuple[np.ndarray, np.ndarray]:
        hs = np.empty((steps, hidden), np.float32)
        h = h0
        if hoisted:
            pre = xs @ wx + b
            for t in range(steps):
                h = hs[t] = np.tanh(h @ wh + pre[t])
        else:
            for t in range(steps):
                h = hs[t] = np.tanh(h @ wh + xs[t] @ wx + b)
        return h, hs

    def gradient(hoisted: bool) -> tuple[np.ndarray, ...]:
        h, hs = forward(hoisted)
        seed = (2.0 / hs.size) * hs
        seed[-1] += 1.0  # d sum(h_final)
        das = np.empty_like(hs)
        da = np.zeros(hidden, np.float32)
        wh_t = wh.T
        for t in range(steps - 1, -1, -1):
            dh = seed[t] + da @ wh_t
            da = das[t] = dh * (1.0 - hs[t] * hs[t])
        h_prev = np.concatenate([h0[None], hs[:-1]])
        if hoisted:
            return h_prev.T @ das, xs.T @ das, das.sum(0)
        dwh, dwx = np.zeros_like(wh), np.zeros_like(wx)
        for t in range(steps):
            dwh += np.multiply.outer(h_prev[t], das[t])
            dwx += np.multiply.outer(xs[t], das[t])
        return dwh, dwx, das.sum(0)

    run = forward if case == "scan_fwd" else gradient
    return {"loop": lambda: run(False), "hoisted": lambda: run(True)}


def save(b: Backend, directory: str, case: str, out: Any) -> None:
    leaves = b.jax.tree_util.tree_leaves(out)
    np.savez(os.path.join(directory, f"{b.name}_{case}.npz"),
             **{f"leaf{i:02d}": np.asarray(leaf) for i, leaf in enumerate(leaves)})


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("meshax", "jax"), required=True)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--inputs", type=int, default=32)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--budget", type=float, required=True)
    parser.add_argument("--save", default=None)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--floor", action="store_true", help="also time NumPy loops for the scan cases")
    parser.add_argument("--address", default=None)  # Backend's arguments; this worker is one process.
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--processes", type=int, default=1)
    args = parser.parse_args()
    start_watchdog(args.budget, "transforms worker")
    began = time.perf_counter()
    b = Backend(args)
    writer = RecordWriter({"rank": 0, "backend": b.name, "devices": b.jax.device_count(),
                           "setup_s": time.perf_counter() - began, "cases": {}})
    for case in args.cases.split(","):
        fn, fn_args = build(b, case, args)
        entry = {"warmup_times": [], "times": [], "complete": False}
        writer.record["cases"][case] = entry
        profiler = None
        out = None
        for call in range(args.warmup + args.calls):
            timed = call >= args.warmup
            if timed and args.profile and profiler is None:
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
            start = time.perf_counter()
            out = fn(*fn_args)
            b.jax.block_until_ready(out)
            elapsed = time.perf_counter() - start
            entry["times" if timed else "warmup_times"].append(elapsed)
            writer.write(every=0)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(os.path.join(args.profile, f"{b.name}_{case}.prof"))
        if args.save:
            save(b, args.save, case, out)
        if args.floor and case.startswith("scan"):
            for name, loop in numpy_floors(case, args).items():
                loop()
                times = []
                for _ in range(args.calls):
                    start = time.perf_counter()
                    loop()
                    times.append(time.perf_counter() - start)
                entry[f"floor_{name}_times"] = times
        entry["complete"] = True
        writer.write(every=0)
    writer.write(complete=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
