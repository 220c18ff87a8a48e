"""How issue 41's models' meshax steps (1 process, 1 device) change with the threads meshax may use, and where
one model's step spends its time, on a many-core host in one short call of the device tool:

    python3 benchmarks/device/probe_threads.py [--models cnn,gpt,gpt_scan] [--threads 0,8,4,2,1] [--steps 8]
        [--profile cnn] [--budget 140]

Each (model, threads) runs in its own process (`python -m meshax.as_jax`, MESHAX_CPU_THREADS=threads; 0 leaves it
unset: meshax's default), the step's median over --steps steps after 3 warm-up steps printed in ms. --profile then
times each call of that model's generated program (its globals wrapped) at the default and at 4 threads: the
operations that grow with the threads show where a many-core host loses time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORKERS = Path(__file__).resolve().parent.parent / "workers"

CHILD = r"""
import collections, os, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np, jax
from jax.sharding import Mesh
from meshax._src.interpreters import codegen
made = []
original = codegen.Source.function
def function(self, name, arguments):
    made.append(original(self, name, arguments))
    return made[-1]
codegen.Source.function = function
import models
name, steps, profile = sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
model = models.build(name, Mesh(np.array(jax.devices()), ("data",)))
params, state = model.params, model.opt_state
def step():
    global params, state
    start = time.perf_counter()
    params, state, loss = model.step(params, state, model.batch)
    jax.block_until_ready((params, loss))
    return time.perf_counter() - start
for _ in range(3):
    step()
times = [step() for _ in range(steps)]
print(f"median {sorted(times)[len(times) // 2] * 1e3:.1f} ms", flush=True)
if profile:
    spent, calls = collections.Counter(), collections.Counter()
    for made_function in made:
        for key, value in list(made_function.__globals__.items()):
            if key.startswith("g") and callable(value) and not isinstance(value, type):
                def timed(*args, _value=value, _key=key, **kwargs):
                    label = getattr(_value, "__qualname__", type(_value).__name__) + " " + " ".join(
                        "x".join(map(str, a.shape)) for a in args if hasattr(a, "shape"))
                    start = time.perf_counter()
                    try:
                        return _value(*args, **kwargs)
                    finally:
                        spent[label] += time.perf_counter() - start
                        calls[label] += 1
                made_function.__globals__[key] = timed
    for _ in range(steps):
        step()
    for label, seconds in spent.most_common(12):
        print(f"  {seconds / steps * 1e3:8.2f} ms {calls[label] // steps:3d}x {label[:110]}", flush=True)
"""


def run(model: str, threads: int, steps: int, profile: bool, timeout: float) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MESHAX_", "JAX_", "XLA_"))}
    if threads:
        env["MESHAX_CPU_THREADS"] = str(threads)
    command = [sys.executable, "-m", "meshax.as_jax", "-c", CHILD, str(WORKERS), model, str(steps),
               "1" if profile else "0"]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timed out"
    return done.stdout.strip() if done.returncode == 0 else f"failed: {done.stderr.strip()[-600:]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="cnn,gpt,gpt_scan")
    parser.add_argument("--threads", default="0,8,4,2,1", help="MESHAX_CPU_THREADS values (0: unset)")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--profile", default="cnn", help="the model whose program's calls are timed ('' none)")
    parser.add_argument("--budget", type=float, default=140.0, help="seconds for every run together")
    args = parser.parse_args()
    deadline = time.monotonic() + args.budget
    print(f"host: {os.cpu_count()} cores", flush=True)
    jobs = [(m, int(t), False) for m in args.models.split(",") for t in args.threads.split(",")]
    jobs += [(args.profile, t, True) for t in (0, 4)] if args.profile else []
    for model, threads, profile in jobs:
        left = deadline - time.monotonic()
        if left < 5:
            print(f"{model} threads={threads or 'default'}: skipped (budget)", flush=True)
            continue
        out = run(model, threads, args.steps, profile, left)
        print(f"{model} threads={threads or 'default'}{' profile' if profile else ''}: {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
