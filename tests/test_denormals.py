"""Subnormal floats flush to zero while meshax computes (runtime/denormals.py), as JAX computes on CPU: jitted and
eager computations, products on several OpenBLAS threads included (restarted on the first computation, also
where NumPy ran a threaded product first); NumPy around them keeps gradual underflow; MESHAX_FLUSH_DENORMALS=0
keeps it everywhere. Each case runs in a fresh process (OpenBLAS's threads are set up once per process)."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.machine().lower() not in (
    "x86_64", "amd64", "aarch64", "arm64"), reason="flushing is done on Linux x86-64 and arm64")

# A subnormal float32 (2e-38 / 2 = 1e-38 < 1.18e-38, the smallest normal) and meshax's product of a (256, 256) matrix
# of subnormals, on 2 BLAS threads (the second thread computes half of the result): all zero when flushed.
PROGRAM = """
import json, sys
import numpy as np
from threadpoolctl import threadpool_limits
subnormals = np.full((256, 256), 1e-39, np.float32)
ones = np.ones((256, 256), np.float32)
if sys.argv[1] == "numpy-first":
    with threadpool_limits(2, "blas"):
        subnormals @ ones  # OpenBLAS's threads start before meshax is imported
import meshax, meshax.numpy as jnp
from meshax._src.runtime import denormals
half = np.float32(2e-38)
jitted = float(meshax.jit(lambda v: v / 2)(half))
eager = float(jnp.asarray(half) / 2)
matmul = float(jnp.abs(jnp.asarray(subnormals) @ jnp.asarray(ones)).max())
print(json.dumps({"state": denormals.describe(), "numpy": float(half / np.float32(2)), "jit": jitted,
                  "eager": eager, "matmul": matmul}))
"""


def run(order: str = "meshax-first", **env: str) -> dict:
    environment = {k: v for k, v in os.environ.items() if k != "MESHAX_FLUSH_DENORMALS"}
    out = subprocess.run([sys.executable, "-c", PROGRAM, order], capture_output=True, text=True, timeout=120,
                         env={**environment, "MESHAX_CPU_THREADS": "2", **env})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def jax_values() -> dict:
    jax = pytest.importorskip("jax")
    half = np.float32(2e-38)
    return {"jit": float(jax.jit(lambda v: v / 2)(half)), "eager": float(jax.numpy.asarray(half) / 2)}


@pytest.mark.parametrize("order", ["meshax-first", "numpy-first"])
def test_subnormals_flush_to_zero_as_on_jax(order):
    found = run(order)
    assert found["state"].startswith("flushed"), found
    assert found["jit"] == found["eager"] == found["matmul"] == 0.0, found
    assert {k: found[k] for k in ("jit", "eager")} == jax_values()
    assert found["numpy"] == pytest.approx(1e-38, rel=1e-6), found  # NumPy around meshax: gradual underflow


def test_gradual_underflow_kept_when_asked():
    found = run(MESHAX_FLUSH_DENORMALS="0")
    assert "MESHAX_FLUSH_DENORMALS=0" in found["state"], found
    assert found["numpy"] == found["jit"] == found["eager"] == pytest.approx(1e-38, rel=1e-6), found
    assert found["matmul"] == pytest.approx(256e-39, rel=1e-3), found


@pytest.mark.parametrize("setting, said", [(None, "flushed to zero while meshax computes"),
                                           ("0", "kept (gradual underflow: MESHAX_FLUSH_DENORMALS=0)")])
def test_meshax_info_says_what_is_done(setting, said):
    environment = {k: v for k, v in os.environ.items() if k != "MESHAX_FLUSH_DENORMALS"}
    if setting is not None:
        environment["MESHAX_FLUSH_DENORMALS"] = setting
    out = subprocess.run([sys.executable, "-m", "meshax", "info"], capture_output=True, text=True, timeout=120,
                         env=environment)
    assert out.returncode == 0, out.stderr
    line = next(line for line in out.stdout.splitlines() if line.startswith("subnormals:"))
    assert said in line, line
