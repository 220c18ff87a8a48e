"""shard_map's unreduced/reduced specs on meshes spanning processes (tests/programs/shard_map_partial_sums.py):
values and gradients against NumPy in every process."""
import pytest
from multiprocess import lines_by_process, run_launcher


@pytest.mark.parametrize("n,k", [(2, 2), (4, 1)], ids=["2x2", "4x1"])
def test_partial_sums_in_shard_map_across_processes(n, k):
    result = run_launcher("tests/programs/shard_map_partial_sums.py", n, k, timeout=180)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    by_process = lines_by_process(result.stdout)
    assert sorted(by_process) == list(range(n)), result.stdout[-3000:]
    for lines in by_process.values():
        assert not [line for line in lines if line.startswith("FAIL")], lines
        names = {line.split()[1] for line in lines if line.startswith("CHECK")}
        assert names == {"summed", "grad-a", "grad-b", "reduced-weight-grad"}, lines
        assert "typed float32[4,3]{U:X}" in lines and "typed float32[3,2]{U:X}" in lines, lines
