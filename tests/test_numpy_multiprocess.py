"""meshax.numpy across real processes.

* The seeds' toy example (examples/toy.py: `proc_id num_procs`, coordinator localhost:10000) in
  1x8, 2x4 and 4x2 (processes x devices per process), through `meshax launch` and through the
  seeds' shell loop of independent processes; each run uses a copy of the program on a free port.
  Every process must print `process=i got result: -0.12398731708526611`.
* tests/programs/np_multiprocess.py: some thirty operations on arrays spanning processes (sums over
  sharded axes, P('a','b') @ P('b',None) -> P('a',), elementwise on different shardings, reshape,
  transpose, concatenate and stack, indexing and updates, cumsum, sort and argmax along sharded
  axes, softmax, jit, uneven shards), each checked on every process against NumPy through
  process_allgather, some with the result's sharding.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from multiprocess import PYTHON, child_env, collect, free_port, lines_by_process, run_launcher, start

REPO = Path(__file__).resolve().parent.parent
TOY_RESULT = "got result: -0.12398731708526611"
LAYOUTS = [(1, 8), (2, 4), (4, 2)]
IDS = [f"{n}x{k}" for n, k in LAYOUTS]
TIMEOUT = 120


@pytest.fixture()
def toy(tmp_path) -> Path:
    """examples/toy.py with its fixed coordinator port replaced by a free one."""
    source = (REPO / "examples" / "toy.py").read_text()
    assert "localhost:10000" in source
    path = tmp_path / "toy.py"
    path.write_text(source.replace("localhost:10000", f"localhost:{free_port()}"))
    return path


def check_toy_output(lines: list[str], index: int, per_process: int) -> None:
    assert f"process={index} {TOY_RESULT}" in lines, lines[-10:]
    shards = [line for line in lines if line.startswith("device ") and "has local data" in line]
    assert len(shards) == per_process, lines  # the shards of this process's devices only


@pytest.mark.parametrize("n,k", LAYOUTS, ids=IDS)
def test_toy_through_the_launcher(toy, n, k):
    result = run_launcher(str(toy), n, k, "{process_id}", "{num_processes}", timeout=TIMEOUT)
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    by_process = lines_by_process(result.stdout)
    assert sorted(by_process) == list(range(n)), result.stdout[-2000:]
    for index, lines in by_process.items():
        check_toy_output(lines, index, k)


@pytest.mark.parametrize("n,k", LAYOUTS, ids=IDS)
def test_toy_through_the_seeds_shell_loop(toy, n, k):
    """`for i in ...; do python toy.py $i N & done` with JAX_NUM_CPU_DEVICES=k: independent processes."""
    env = child_env(k)
    procs = [start([PYTHON, str(toy), str(i), str(n)], env) for i in range(n)]
    for index, result in enumerate(collect(procs, timeout=TIMEOUT)):
        assert result.returncode == 0, f"process {index}: {result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        check_toy_output(result.stdout.splitlines(), index, k)


NP_CHECKS = [
    "sum_axis0", "sum_axis1", "sum_all", "mean_var", "max_min_int", "matmul", "matmul_transposed", "einsum",
    "add_different_shardings", "elementwise_mixed", "where", "reshape_flat", "reshape_split", "transpose",
    "concatenate", "concatenate_kept", "stack_kept", "slice", "slice_kept", "integer_array", "take_columns",
    "boolean_mask", "at_add", "at_set_uneven", "cumsum_sharded_axis", "sort_sharded_axis", "cumsum_int",
    "argmax_axis0", "argmax_all", "argmin_axis1", "softmax_sharded_axis", "jit", "uneven_sum", "uneven_elementwise",
    "segment_sum_sharded", "histogram_sharded", "top_k_sharded_rows", "ufunc_reduce_sharded_axis",
    "ufunc_outer_sharded", "special_erfcx_sharded", "stats_gamma_sharded",
]


@pytest.mark.parametrize("n,k", [(2, 4), (4, 2)], ids=["2x4", "4x2"])
def test_numpy_on_process_spanning_arrays(n, k):
    result = run_launcher("tests/programs/np_multiprocess.py", n, k, timeout=TIMEOUT)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    by_process = lines_by_process(result.stdout)
    assert sorted(by_process) == list(range(n)), result.stdout[-3000:]
    digests = {}
    for index, lines in by_process.items():
        checks = [line[len("CHECK "):] for line in lines if line.startswith("CHECK ")]
        assert checks == NP_CHECKS, (index, checks)
        assert "NP-MULTIPROCESS-DONE" in lines
        digests[index] = [line for line in lines if line.startswith("DIGEST ")]
    assert all(d == digests[0] for d in digests.values()), digests  # every process gathered the same values
