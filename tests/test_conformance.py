"""Programs written in JAX 0.10's documented style print what JAX prints: each program in
tests/programs/conformance/ runs under meshax on 4 processes x 2 devices (process 0's lines) and, with its
imports swapped, under JAX in one process with 8 CPU devices."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from multiprocess import REPO, child_env, collect, start

PROGRAMS = sorted((REPO / "tests" / "programs" / "conformance").glob("*.py"))


def as_jax(source: str) -> str:
    source = re.sub(r"^(\s*)(import|from) meshax\b", r"\1\2 jax", source, flags=re.MULTILINE)
    return source.replace("jax.distributed.initialize()", "")


def run_jax(path: Path, tmp_path: Path) -> str:
    program = tmp_path / path.name
    program.write_text(as_jax(path.read_text()))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MESHAX_", "JAX_", "XLA_"))}
    env.update(XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_prints_what_jax_prints(path, tmp_path):
    expected = run_jax(path, tmp_path)
    launcher = start([sys.executable, "-m", "meshax", "launch", "-n", "4", "--cpu-devices", "2", str(path)],
                     child_env())
    [result] = collect([launcher], timeout=120)
    assert result.returncode == 0, result.stderr
    ours = [line.split("] ", 1)[1] if line.startswith("[0] ") else line
            for line in result.stdout.splitlines() if line.startswith("[0] ") or not line.startswith("[")]
    assert ours == expected.splitlines()
