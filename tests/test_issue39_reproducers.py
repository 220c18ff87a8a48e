"""Issue 39's reproducers (tests/programs/issue39_reproducers.py: one line per plain-JAX program, its value or
the class of its exception) print under `python -m meshax.as_jax` what they print under real JAX."""
from __future__ import annotations

import math
import re

import pytest

from multiprocess import PYTHON, REPO, child_env, collect, start

PROGRAM = str(REPO / "tests" / "programs" / "issue39_reproducers.py")
NUMBER = re.compile(r"-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def same_line(ours: str, theirs: str) -> bool:
    """Equal words, and numbers equal to float32 rounding."""
    if NUMBER.sub("#", ours) != NUMBER.sub("#", theirs):
        return False
    return all(math.isclose(float(a), float(b), rel_tol=1e-5, abs_tol=1e-6)
               for a, b in zip(NUMBER.findall(ours), NUMBER.findall(theirs)))


def test_every_reproducer_prints_what_jax_prints():
    pytest.importorskip("jax")
    procs = [start([PYTHON, "-m", "meshax.as_jax", PROGRAM], child_env(8)),
             start([PYTHON, PROGRAM], child_env(8, JAX_PLATFORMS="cpu"))]
    ours, theirs = collect(procs, timeout=240)
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    assert ours.returncode == 0, ours.stderr[-3000:]
    our_lines, their_lines = ours.stdout.splitlines(), theirs.stdout.splitlines()
    assert [line.split(":")[0] for line in our_lines] == [line.split(":")[0] for line in their_lines]
    differing = [f"meshax {a}\n   JAX {b}" for a, b in zip(our_lines, their_lines) if not same_line(a, b)]
    assert not differing, "\n".join(differing)
