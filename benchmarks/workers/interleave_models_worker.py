"""One process running a model's training step in meshax and in JAX by turns (interleave_models.py's child).

    python interleave_models_worker.py --model gru [--rounds 15] [--warmup 3]

workers/models.py is loaded twice: once as written (JAX) and once with `jax` bound to meshax while its imports
run, so both libraries build the same model from the same code and data, on one device each. After the warm-up
(meshax's background kernel compilation awaited, as models_worker.py does), each round times one step of each
library, the order alternating (a step of `tiny`: models.REPEAT steps in a row, their mean), each until the new
parameters and the loss are ready: both see the same load at the same moments, which on a machine shared with
other work is what makes their times comparable. The record ($BENCH_RECORD_DIR): the per-round step times, the
first steps' times and every step's loss, per library.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import numpy as np

from records import write_record

WORKERS = Path(__file__).resolve().parent
SETTLE_TIMEOUT = 120.0  # seconds to wait for meshax's background kernel compilation
ALIASED = ("jax", "jax.numpy", "jax.sharding", "jax.nn", "jax.lax", "jax.tree_util")  # what models.py imports


def load_models(library: str) -> ModuleType:
    """workers/models.py as a module of its own, its `import jax ...` lines bound to `library`'s modules."""
    spec = importlib.util.spec_from_file_location(f"models_{library}", WORKERS / "models.py")
    module = importlib.util.module_from_spec(spec)
    if library == "jax":
        spec.loader.exec_module(module)
        return module
    import meshax

    saved = {name: sys.modules.get(name) for name in ALIASED}
    try:
        for name in ALIASED:
            sys.modules[name] = importlib.import_module("meshax" + name[3:])
        spec.loader.exec_module(module)
    finally:
        for name, found in saved.items():
            if found is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = found
    bound = (module.jax.__name__, module.jnp.__name__, module.NamedSharding.__module__)
    assert all(name.startswith("meshax") for name in bound), f"models.py was not bound to meshax: {bound}"
    return module


class Runner:
    """One library's model (built by its own copy of models.py, `models`): its state, and timed runs of steps."""

    def __init__(self, library: str, model: str) -> None:
        self.library = library
        self.lib: Any = jax if library == "jax" else sys.modules["meshax"]
        self.models = load_models(library)
        mesh = self.lib.sharding.Mesh(np.array(self.lib.devices()[:1]), ("data",))
        self.model = self.models.build(model, mesh)
        self.params, self.opt_state = self.model.params, self.model.opt_state
        self.losses: list[float] = []

    def run(self, steps: int) -> float:
        """Seconds per step of `steps` steps in a row, until the parameters and the loss are ready."""
        start = time.perf_counter()
        for _ in range(steps):
            self.params, self.opt_state, loss = self.model.step(self.params, self.opt_state, self.model.batch)
        self.lib.block_until_ready((self.params, loss))
        elapsed = (time.perf_counter() - start) / steps
        self.losses.append(float(loss))
        return elapsed

    def settle(self) -> None:
        """Under meshax, wait for the kernels it compiles in the background for what ran so far."""
        if self.library == "meshax":
            from meshax._src.interpreters import fusion

            fusion.EXECUTORS["cpu"].numba.compiler.wait(SETTLE_TIMEOUT)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    import meshax  # noqa: F401 - after JAX, as a program using both would; load_models finds it imported

    runners = [Runner(library, args.model) for library in ("meshax", "jax")]
    repeat = runners[1].models.REPEAT.get(args.model, 1)
    firsts = {r.library: r.run(1) for r in runners}
    for _ in range(args.warmup - 1):
        for r in runners:
            r.run(repeat)
    steady_after = runners[1].models.steady_after(args.model, 1) - 1 - (args.warmup - 1) * repeat
    for r in runners:
        if steady_after > 0:
            r.run(steady_after)
        r.settle()
    times: dict[str, list[float]] = {r.library: [] for r in runners}
    for round_number in range(args.rounds):
        for r in runners if round_number % 2 == 0 else runners[::-1]:
            times[r.library].append(r.run(repeat))
    write_record(0, {"model": args.model, "repeat": repeat, "times": times, "firsts": firsts,
                     "losses": {r.library: r.losses for r in runners}, "pid": os.getpid(), "complete": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
