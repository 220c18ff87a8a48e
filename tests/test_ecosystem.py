"""Unchanged JAX programs using optax, flax, equinox and chex run on meshax through the `jax` alias and print
JAX's numbers; optax's own test modules pass under the alias; flax and equinox data-parallel training and a flax
NNX model sharded over a ('data', 'model') mesh run as two-process jobs (`meshax launch --as-jax`).

Every program runs twice in subprocesses, once with real JAX (the oracle) and once with `python -m meshax.as_jax`,
and their printed values are compared. The full run of optax's test modules takes long (their optimizers loop
10000 jitted steps), so by default the slow families are deselected; MESHAX_OPTAX_FULL=1 runs everything and
checks the headline count (README: "optax's own tests").
"""
from __future__ import annotations

import math
import os
import re
import sys
from pathlib import Path

import pytest

from multiprocess import REPO, child_env, collect, lines_by_process, start

pytest.importorskip("optax")
pytest.importorskip("flax")
pytest.importorskip("equinox")
pytest.importorskip("chex")

PYTHON = sys.executable
PROGRAMS = Path(__file__).parent / "ecosystem_programs"
NUMBER = re.compile(r"^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def run_both(ours: list[str], theirs: list[str], our_env: dict[str, str], their_env: dict[str, str],
             timeout: float = 240) -> tuple[str, str]:
    """Run meshax's and JAX's program side by side; both must succeed. Returns their outputs."""
    procs = [start(ours, our_env), start(theirs, their_env)]
    results = collect(procs, timeout)
    for argv, result in zip((ours, theirs), results):
        assert result.returncode == 0, f"{' '.join(argv)} failed:\n{result.stderr[-4000:]}"
    return results[0].stdout, results[1].stdout


def assert_same_report(ours: str, theirs: str, rtol: float = 2e-5, atol: float = 1e-6) -> None:
    """The same lines; numbers equal to the tolerances, every other word identical."""
    ours_lines, theirs_lines = ours.strip().splitlines(), theirs.strip().splitlines()
    assert len(ours_lines) == len(theirs_lines), f"meshax printed\n{ours}\nJAX printed\n{theirs}"
    for mine, jax_line in zip(ours_lines, theirs_lines):
        a, b = mine.split(), jax_line.split()
        assert len(a) == len(b), (mine, jax_line)
        for x, y in zip(a, b):
            if NUMBER.match(x) and NUMBER.match(y):
                assert math.isclose(float(x), float(y), rel_tol=rtol, abs_tol=atol), (mine, jax_line)
            else:
                assert x == y, (mine, jax_line)


@pytest.mark.parametrize("program", ["optax_losses", "flax_linen", "flax_nnx", "equinox_mlp", "chex_asserts"])
def test_program_prints_jax_numbers(program: str):
    path = str(PROGRAMS / f"{program}.py")
    ours, theirs = run_both([PYTHON, "-m", "meshax.as_jax", path], [PYTHON, path], child_env(1), child_env(1))
    assert_same_report(ours, theirs)


@pytest.mark.parametrize("example", ["flax_data_parallel", "equinox_data_parallel", "nnx_sharded"])
def test_data_parallel_example_two_processes(example: str):
    """The example, unchanged, as 2 processes x 4 devices prints the losses real JAX prints on 8 devices."""
    path = str(REPO / "examples" / f"{example}.py")
    launched, theirs = run_both([PYTHON, "-m", "meshax", "launch", "--as-jax", "-n", "2", "--cpu-devices", "4", path],
                                [PYTHON, path, "--single-process"], child_env(), child_env(8))
    ours = "\n".join(lines_by_process(launched)[0])
    assert "step 7 loss" in ours
    assert_same_report(ours, theirs)


# ---- optax's own tests ----------------------------------------------------------------------------------------------

OPTAX_TEST_MODULES = [
    "_src/alias_test.py", "_src/numerics_test.py", "_src/utils_test.py", "_src/update_test.py",
    "_src/combine_test.py", "_src/transform_test.py", "_src/base_test.py", "transforms/_clipping_test.py",
    "transforms/_combining_test.py", "schedules/_schedule_test.py", "tree_utils/_tree_math_test.py",
    "losses/_classification_test.py",
]
# The family that loops 10000 jitted steps per case (minutes under meshax); MESHAX_OPTAX_FULL=1 runs it too.
SLOW = "not test_optimization"
FAST_FLOOR = 895  # passing tests without it (README: "optax's own tests": 899, the rest compare XLA's HLO text)
FULL_FLOOR = 1000  # passing tests of the full run (JAX passes 1039)


def _optax_counts(selection: str | None, timeout: float) -> dict[str, int]:
    import optax

    root = Path(optax.__file__).parent
    argv = [PYTHON, "-m", "meshax.as_jax", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--timeout=900",
            *(str(root / m) for m in OPTAX_TEST_MODULES)]
    if selection:
        argv += ["-k", selection]
    result = collect([start(argv, child_env(1))], timeout)[0]
    assert result.returncode in (0, 1), f"pytest could not run optax's tests:\n{result.stdout[-3000:]}"
    summary = result.stdout.strip().splitlines()[-1]
    return {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|skipped|error|errors|deselected)",
                                                   summary)}


@pytest.mark.timeout(7200)
def test_optax_own_tests_under_the_alias():
    full = os.environ.get("MESHAX_OPTAX_FULL") == "1"
    counts = _optax_counts(None if full else SLOW, timeout=7000 if full else 1500)
    floor = FULL_FLOOR if full else FAST_FLOOR
    assert counts.get("passed", 0) >= floor, counts
