"""The CPU budget policy: each controller's share of its host's usable cores, with faked hosts and cgroups."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from meshax._src.runtime import cpu_budget
from meshax._src.runtime.cpu_budget import cgroup_quota, parse_override, share, split, usable_cores


def threads_of_each(cores: int, controllers: int) -> list[int]:
    return [share(cores, controllers, index) for index in range(controllers)]


def test_sixteen_controllers_on_sixteen_cores_get_one_thread_each():
    assert threads_of_each(16, 16) == [1] * 16
    assert split(1, 1) == (1, 1)  # a single device's matmul: one BLAS thread


def test_two_controllers_of_four_devices_on_sixteen_cores_get_eight_each_two_per_shard():
    assert threads_of_each(16, 2) == [8, 8]
    assert split(8, 4) == (4, 2)  # four shards side by side, two threads each (test_device_pool: as BLAS pieces)
    assert split(8, 1) == (1, 8)  # one big call: every thread through BLAS


def test_shares_never_exceed_the_cores_and_leave_none_idle():
    for cores in range(1, 33):
        for controllers in range(1, 40):
            shares = threads_of_each(cores, controllers)
            assert min(shares) >= 1
            assert sum(shares) == max(cores, controllers)  # more controllers than cores: one thread each
            for calls in range(1, 20):
                side_by_side, per_call = split(shares[0], calls)
                assert side_by_side <= calls and side_by_side * per_call <= shares[0]


def test_a_cgroup_quota_of_four_cpus_caps_a_sixteen_core_host_at_four():
    assert usable_cores(16, 4.0) == 4
    assert share(usable_cores(16, 4.0), 1) == 4
    assert usable_cores(16, 1.5) == 2  # a fraction of a CPU still runs a thread
    assert usable_cores(16, 0.2) == 1
    assert usable_cores(2, 4.0) == 2  # the quota never adds cores
    assert usable_cores(16, None) == 16


def test_the_override_wins_and_bad_values_are_refused():
    assert share(16, 16, override=4) == 4
    assert parse_override(None) is None and parse_override(" ") is None
    assert parse_override("6") == 6
    for bad in ("0", "-2", "four"):
        with pytest.raises(ValueError, match=f"MESHAX_CPU_THREADS={bad!r} is not a positive thread count"):
            parse_override(bad)


def write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_quota_of_the_process_cgroup_or_an_ancestor(tmp_path):
    write(tmp_path / "proc", "0::/job.slice/worker\n")
    root = tmp_path / "cgroup"
    write(root / "job.slice" / "worker" / "cpu.max", "max 100000\n")
    assert cgroup_quota(tmp_path / "proc", root) is None
    write(root / "job.slice" / "cpu.max", "400000 100000\n")
    assert cgroup_quota(tmp_path / "proc", root) == 4.0
    write(root / "job.slice" / "worker" / "cpu.max", "250000 100000\n")
    assert cgroup_quota(tmp_path / "proc", root) == 2.5  # the smallest along the path
    assert usable_cores(16, cgroup_quota(tmp_path / "proc", root)) == 3


def test_cgroup_v2_inside_a_container_reads_the_mount_itself(tmp_path):
    write(tmp_path / "proc", "0::/\n")
    write(tmp_path / "cgroup" / "cpu.max", "400000 100000\n")
    assert cgroup_quota(tmp_path / "proc", tmp_path / "cgroup") == 4.0


def test_cgroup_v1_quota(tmp_path):
    write(tmp_path / "proc", "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n")
    group = tmp_path / "cgroup" / "cpu,cpuacct" / "docker" / "abc"
    write(group / "cpu.cfs_quota_us", "-1\n")
    write(group / "cpu.cfs_period_us", "100000\n")
    assert cgroup_quota(tmp_path / "proc", tmp_path / "cgroup") is None
    write(group / "cpu.cfs_quota_us", "400000\n")
    assert cgroup_quota(tmp_path / "proc", tmp_path / "cgroup") == 4.0


def test_cgroup_v1_inside_a_container_where_the_path_is_not_under_the_mount(tmp_path):
    write(tmp_path / "proc", "4:cpu,cpuacct:/kubepods/pod1/abc\n")
    mount = tmp_path / "cgroup" / "cpu,cpuacct"
    write(mount / "cpu.cfs_quota_us", "200000\n")
    write(mount / "cpu.cfs_period_us", "100000\n")
    assert cgroup_quota(tmp_path / "proc", tmp_path / "cgroup") == 2.0


def test_unreadable_or_garbled_cgroup_files_mean_no_quota(tmp_path):
    assert cgroup_quota(tmp_path / "missing", tmp_path) is None
    write(tmp_path / "proc", "garbage\n0::/a\n")
    write(tmp_path / "cgroup" / "a" / "cpu.max", "lots 100000\n")
    assert cgroup_quota(tmp_path / "proc", tmp_path / "cgroup") is None


def test_this_process_share_follows_the_host_table_and_the_override(monkeypatch):
    monkeypatch.delenv("MESHAX_CPU_THREADS", raising=False)
    cores = cpu_budget.host_cores()
    try:
        cpu_budget.share_host(cores, cores - 1)
        assert cpu_budget.compute_threads() == 1
        monkeypatch.setenv("MESHAX_CPU_THREADS", "5")
        assert cpu_budget.compute_threads() == 5
        assert "MESHAX_CPU_THREADS=5" in cpu_budget.describe()
    finally:
        cpu_budget.share_host(1, 0)


def test_importing_meshax_starts_no_threads():
    code = ("import threading, meshax, meshax.numpy\n"
            "print(threading.active_count())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "1"


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    """`python -c code` (or `python -m ...`) with no MESHAX_ variables but `env`."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MESHAX_")}
    argv = code.split() if code.startswith("-m ") else ["-c", code]
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120,
                          env=dict(environment, **env))


def test_meshax_info_shows_the_compute_threads():
    out = run_python("-m meshax info", MESHAX_CPU_THREADS="3")
    assert "compute:     3 thread(s) per controller (MESHAX_CPU_THREADS=3)" in out.stdout
    cores = cpu_budget.host_cores()
    out = run_python("-m meshax info")
    assert f"compute:     {cores} thread(s) per controller (usable cores {cores}" in out.stdout


def test_the_first_computation_sets_blas_to_the_share_and_logs_it_at_info():
    code = ("import meshax.numpy as jnp, threadpoolctl\n"
            "print(float((jnp.ones((64, 64)) @ jnp.ones((64, 64))).sum()))\n"
            "print(sorted({i['num_threads'] for i in threadpoolctl.threadpool_info() if i['user_api'] == 'blas'}))")
    out = run_python(code, MESHAX_CPU_THREADS="1", MESHAX_LOG="info")
    assert out.stdout.split() == ["262144.0", "[1]"], out.stderr
    assert "meshax compute threads: 1 thread(s) per controller (MESHAX_CPU_THREADS=1)" in out.stderr


@pytest.mark.parametrize("processes", [2, 3])
def test_the_controllers_of_one_host_share_its_cores(processes):
    from multiprocess import REPO, lines_by_process, run_launcher

    result = run_launcher(str(REPO / "tests" / "programs" / "cpu_budget_job.py"), processes, 2, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    x = np.arange(16 * 8, dtype=np.float32).reshape(16, 8) / 100
    cores = cpu_budget.host_cores()
    reports = {i: next(line for line in lines if line.startswith("budget ")).split()[1:]
               for i, lines in lines_by_process(result.stdout).items()}
    assert sorted(reports) == list(range(processes))
    for i, (rank, threads, controllers, index, blas, total) in reports.items():
        expected = share(cores, processes, i)
        assert (int(rank), int(threads), int(controllers), int(index)) == (i, expected, processes, i)
        assert blas == str(expected)
        assert float(total) == pytest.approx(float(np.sum(x @ x.T)), rel=1e-5)
