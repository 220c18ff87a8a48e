"""The training examples (examples/train_*.py) as real multi-process meshax jobs, against real JAX.

Each example runs under `meshax launch` in the layouts 1x1, 1x8, 4x2 and 2x4 (processes x CPU devices; on one
device the shard_map examples run as plain NumPy programs, numpy_eval.run_alone);
its loss curve must match, to 1e-5 relative, the one that JAX prints for a copy of the same program
with the imports swapped to jax (one process, 8 CPU devices; computed once per example and session).
"""
from __future__ import annotations

import functools
import re
import tempfile
from pathlib import Path

import pytest


from multiprocess import REPO, PYTHON, child_env, collect, lines_by_process, run_launcher, start

EXAMPLES = ["train_dp_jit.py", "train_dp_shard_map.py", "train_fsdp.py"]
LAYOUTS = [(1, 1), (1, 8), (4, 2), (2, 4)]
ARGS = ["--steps", "6"]  # the examples' small default model (64-128-128-10, global batch 64)
STEPS = 6
RTOL = 1e-5
LOSS_LINE = re.compile(r"^step (\d+) loss (\S+)$")
SHARED_MODULES = ["mlp_common.py"]


def as_jax_program(source: str) -> str:
    """A meshax program with JAX's imports instead, as one JAX process (no distributed.initialize())."""
    source = re.sub(r"^(\s*)(import|from) meshax\b", r"\1\2 jax", source, flags=re.MULTILINE)
    return re.sub(r"^\s*jax\.distributed\.initialize\(\)\s*(#.*)?\n", "", source, flags=re.MULTILINE)


def losses(lines: list[str]) -> list[float]:
    """The losses of the 'step i loss v' lines, checking that the steps come in order."""
    found = [LOSS_LINE.match(line) for line in lines]
    found = [m for m in found if m]
    assert [int(m.group(1)) for m in found] == list(range(len(found))), lines
    return [float(m.group(2)) for m in found]


_workdir = tempfile.TemporaryDirectory(prefix="meshax-train-jax-")  # removed at interpreter exit


@functools.lru_cache(maxsize=None)
def jax_reference(example: str) -> tuple[float, ...]:
    """The loss curve of `example` under real JAX, one process with 8 CPU devices."""
    pytest.importorskip("jax")
    directory = Path(_workdir.name)
    for name in [example, *SHARED_MODULES]:
        (directory / name).write_text(as_jax_program((REPO / "examples" / name).read_text()))
    env = child_env(8, JAX_PLATFORMS="cpu")
    proc = start([PYTHON, str(directory / example), *ARGS], env)
    result = collect([proc], timeout=120)[0]
    assert result.returncode == 0, result.stderr[-3000:]
    curve = losses(result.stdout.splitlines())
    assert len(curve) == STEPS, result.stdout
    return tuple(curve)


def test_jax_reference_curves_agree_and_decrease():
    """The three programs compute the same math: under JAX they print the same, decreasing, losses."""
    curves = {example: jax_reference(example) for example in EXAMPLES}
    first = curves[EXAMPLES[0]]
    assert first[-1] < first[0], first
    for example, curve in curves.items():
        assert curve == pytest.approx(first, rel=RTOL), (example, curve, first)


@pytest.mark.parametrize("n,k", LAYOUTS, ids=[f"{n}x{k}" for n, k in LAYOUTS])
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.removesuffix(".py") for e in EXAMPLES])
def test_example_matches_jax(example, n, k):
    expected = jax_reference(example)
    result = run_launcher(f"examples/{example}", n, k, *ARGS, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = lines_by_process(result.stdout)
    for index, lines in printed.items():
        assert index == 0 or not any(LOSS_LINE.match(line) for line in lines), f"process {index} printed losses"
    curve = losses(printed.get(0, []))
    assert len(curve) == STEPS, printed
    assert curve == pytest.approx(list(expected), rel=RTOL), (curve, expected)
