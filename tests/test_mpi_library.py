"""Which MPI library a job started through meshax's own PMI server runs: the mpich wheel's, unless the user named
one; and a process that another MPI started alone is named with its library and the fix."""
from __future__ import annotations

import pytest

from meshax._src.runtime import distributed, mpi
from multiprocess import child_env, run_independent

LIBRARY_PROBE = "tests/programs/mpi_library.py"


def test_jobs_through_our_pmi_server_run_the_mpich_wheels_library():
    wheel = mpi.wheel_library()
    assert wheel is not None and wheel.endswith("libmpi.so.12")
    results = run_independent(LIBRARY_PROBE, 2, 1, timeout=90)
    assert [r.returncode for r in results] == [0, 0], [r.stderr[-2000:] for r in results]
    for index, result in enumerate(results):
        named, loaded, rank, size = result.stdout.strip().splitlines()[-1].split("|")
        assert (named, rank, size) == (wheel, str(index), "2")
        assert loaded.startswith("MPICH") and wheel in loaded, loaded


def test_a_library_the_user_names_is_kept():
    wheel = mpi.wheel_library()
    results = run_independent(LIBRARY_PROBE, 2, 1, timeout=90, env=child_env(1, MPI4PY_LIBMPI=wheel + ":"))
    assert [r.returncode for r in results] == [0, 0], [r.stderr[-2000:] for r in results]
    assert all(r.stdout.strip().splitlines()[-1].split("|")[0] == wheel + ":" for r in results)


class _WorldOfOne:
    def Get_size(self) -> int:
        return 1

    def Get_rank(self) -> int:
        return 0


def test_a_process_started_alone_by_another_mpi_names_the_library_and_the_fix():
    with pytest.raises(RuntimeError) as error:
        distributed._check_world(_WorldOfOne(), 1, 2)
    message = str(error.value)
    assert "rank 0 of 1" in message and "process 1 of 2" in message
    assert mpi.loaded_library() in message and "MPI4PY_LIBMPI" in message and "mpich wheel" in message
