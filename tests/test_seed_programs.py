"""The seeds' example programs, run as real jobs in the three layouts, print the seeds' results."""
from __future__ import annotations

import pytest

from multiprocess import child_env, collect, free_port, lines_by_process, run_launcher, start, PYTHON

LAYOUTS = [(1, 8), (2, 4), (4, 2)]
SEED_003_LINES = [
    "Local x shape (48, 64)", "Local w shape (64, 64)", "Local b shape (64,)", "Output shape (192, 128)",
    "Std 1.0", "Original w shape (16, 128)", "Gathered w shape (64, 128)", "Output [22 20 12 17]",
    "Output [3 0 1 2]", "Device 5: i-axis=2, j-axis=1",
    "Device 0: RNG=[1797259609 2579123966]", "Device 1: RNG=[1797259609 2579123966]",
    "Device 2: RNG=[ 928981903 3453687069]", "Device 4: RNG=[4146024105 2718843009]",
    "Device 7: RNG=[2467461003 3840466878]",
    "Mesh(device_ids=array([0, 1, 2, 3, 4, 5, 6, 7]), axis_names=('i',))" ,
]


@pytest.mark.parametrize("n,k", LAYOUTS, ids=[f"{n}x{k}" for n, k in LAYOUTS])
def test_seed_003_every_block(n, k):
    result = run_launcher("examples/distributed_basics.py", n, k, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = lines_by_process(result.stdout)[0]
    for line in SEED_003_LINES:
        if n > 1 and line.startswith("Mesh("):
            continue  # device ids differ across processes (131072 * process + local index)
        assert line in printed, (line, printed)


@pytest.mark.parametrize("n,k", LAYOUTS, ids=[f"{n}x{k}" for n, k in LAYOUTS])
def test_distributed_matmul_result_is_sharded_over_a(n, k):
    result = run_launcher("examples/distributed_matmul.py", n, k, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = lines_by_process(result.stdout)[0]
    assert printed[-1] == f"NamedSharding(mesh=Mesh('a': {n * k // 2}, 'b': 2), spec=PartitionSpec('a',), " \
                          "memory_kind=device)"


def test_toy_through_the_seeds_shell_loop(tmp_path):
    """As the seed launches it: four independent processes with an explicit coordinator address."""
    source = open("examples/toy.py").read().replace("localhost:10000", f"localhost:{free_port()}")
    toy = tmp_path / "toy.py"
    toy.write_text(source)
    env = child_env(2)
    procs = [start([PYTHON, str(toy), str(i), "4"], env) for i in range(4)]
    for i, result in enumerate(collect(procs, timeout=120)):
        assert result.returncode == 0, result.stderr
        assert f"process={i} got result: -0.12398731708526611" in result.stdout
