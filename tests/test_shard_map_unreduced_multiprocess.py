"""shard_map's unreduced/reduced specs on meshes spanning processes (tests/programs/shard_map_partial_sums.py):
values and gradients against NumPy in every process."""
import pytest
from multiprocess import check_names, checked_lines


@pytest.mark.parametrize("n,k", [(2, 2), (4, 1)], ids=["2x2", "4x1"])
def test_partial_sums_in_shard_map_across_processes(n, k):
    for lines in checked_lines("tests/programs/shard_map_partial_sums.py", n, k).values():
        assert check_names(lines) == {"summed", "grad-a", "grad-b", "reduced-weight-grad"}, lines
        assert "typed float32[4,3]{U:X}" in lines and "typed float32[3,2]{U:X}" in lines, lines
