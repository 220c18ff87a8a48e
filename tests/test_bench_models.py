"""benchmarks/bench_models.py: a smoke run (meshax, tiny, one and two processes) writes a row with its step times
and equal losses; its table of model sizes matches workers/models.py; its busy loops do not outlive their block.
benchmarks/interleave_models.py: a smoke run times both libraries' steps by turns in one process, with equal
losses."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from multiprocess import REPO

BENCH = REPO / "benchmarks"
sys.path.append(str(BENCH))

import bench_models  # noqa: E402


def _models_module() -> object:
    """workers/models.py under a name of its own (it imports the real JAX, this process's oracle)."""
    spec = importlib.util.spec_from_file_location("bench_workers_models", BENCH / "workers" / "models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_smoke_run_writes_rows_with_times_and_equal_losses(tmp_path: Path) -> None:
    output = tmp_path / "models_smoke"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MESHAX_", "JAX_", "XLA_FLAGS"))}
    result = subprocess.run([sys.executable, str(BENCH / "bench_models.py"), "--models", "tiny", "--layouts",
                             "1x1,2x1", "--only", "meshax", "--rounds", "2", "--warmup", "1", "--steps", "2",
                             "--budget", "100", "--output", str(output)],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=150)
    assert result.returncode == 0, result.stderr[-3000:]
    text = output.with_suffix(".md").read_text()
    for layout in ("1x1", "2x1"):
        row = next(line for line in text.splitlines() if line.startswith(f"| tiny | dp | {layout} | 0 |"))
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[4].startswith("**") and "n=4" in cells[4], row  # meshax: 2 jobs x 2 timed steps
        assert cells[5] == "not run" and cells[6] == "n/a", row  # JAX not run (--only meshax)
        assert float(cells[8]) > 0, row  # the first step, in seconds
        assert cells[12].startswith("yes"), row  # both jobs' losses agree
    assert "### Failures" not in text


def test_interleaved_run_times_both_libraries_with_equal_losses(tmp_path: Path) -> None:
    output = tmp_path / "interleave_smoke"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MESHAX_", "JAX_", "XLA_FLAGS"))}
    result = subprocess.run([sys.executable, str(BENCH / "interleave_models.py"), "--models", "tiny", "--rounds", "2",
                             "--warmup", "1", "--output", str(output)],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=150)
    assert result.returncode == 0, result.stderr[-3000:]
    text = output.with_suffix(".md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| tiny | 0 |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[2].startswith("**") and "n=2" in cells[2] and "n=2" in cells[3], row  # both libraries, 2 rounds
    assert float(cells[4]) > 0 and float(cells[5]) > 0, row  # the ratios
    assert float(cells[7]) > 0 and float(cells[8]) > 0, row  # the first steps, in seconds
    assert cells[9].startswith("yes"), row  # meshax's losses are JAX's
    assert "### Failures" not in text


def test_model_sizes_match_models_py() -> None:
    models = _models_module()
    gpt = models.GPT
    assert bench_models.CELLS[("gpt", "dp")] == bench_models.CELLS[("gpt_scan", "dp")] == (gpt["batch"],)
    assert bench_models.CELLS[("gpt", "tp")] == (3 * gpt["d"], gpt["mlp"], gpt["d"])
    assert bench_models.CELLS[("gru", "dp")] == (models.GRU["batch"],)
    assert bench_models.CELLS[("cnn", "dp")] == (models.CNN["batch"],)
    assert bench_models.CELLS[("tiny", "dp")] == (64,) and bench_models.CELLS[("mlp", "dp")] == (2048,)
    styles = {(name, style) for name in models.MODELS for style in models.STYLES.get(name, ("dp",))}
    assert set(bench_models.CELLS) == styles
    assert bench_models.fits(2, 4, ("gru", "dp"))  # 32 rows over 8 devices
    assert not bench_models.fits(3, 1, ("gpt", "dp"))


def test_a_loss_mismatch_is_flagged_and_names_the_job() -> None:
    jax_cell = {"losses": [[2.0, 1.5, 1.25]], "names": ["JAX job 1"]}
    same = {"losses": [[2.0, 1.5, 1.25], [2.0 * (1 + 5e-4), 1.5, 1.25]], "names": ["meshax job 1", "meshax job 2"]}
    off = {"losses": [[2.0, 1.5, 1.25], [2.0, 1.5, 1.3]], "names": ["meshax job 1", "meshax job 2"]}
    assert bench_models.losses_text(bench_models.worst_loss_difference([jax_cell, same, None])) == "yes (5e-04)"
    assert bench_models.losses_text(bench_models.worst_loss_difference([jax_cell, off, None])) == \
        "**NO** (4e-02, meshax job 2)"
    assert bench_models.worst_loss_difference([None, {"losses": [[1.0]], "names": ["meshax job 1"]}]) is None


def test_losses_near_float32_rounding_compare_against_the_floor() -> None:
    reference = [1.0, 1e-6, 4e-9]
    noisy_tail = [1.0, 1e-6, 4.03e-9]  # 3e-11 apart: 7.5e-3 relatively, 3e-4 of the floor (1e-7 of 1.0)
    off_above_floor = [1.0, 1.01e-6, 4e-9]  # 1e-2 relatively, where the loss still has its digits
    assert bench_models.loss_difference(noisy_tail, reference) == pytest.approx(3e-11 / 1e-7)
    assert bench_models.loss_difference(off_above_floor, reference) == pytest.approx(1e-2)


def test_busy_loops_spin_during_the_block_and_are_gone_after() -> None:
    from _common import busy_loops

    before = _children()
    with busy_loops(2):
        time.sleep(0.3)
        spinning = _children() - before
        assert len(spinning) == 2
    time.sleep(0.2)
    assert not (spinning & _children())


def _children() -> set[int]:
    """This process's child processes (from /proc)."""
    me = os.getpid()
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            found.add(int(stat.parent.name))
    return found
