"""Real multi-process jobs: device tables in every layout and through every way of starting."""
from __future__ import annotations

import json

import pytest

from multiprocess import lines_by_process, run_independent, run_launcher, run_mpiexec

LIST_DEVICES = "tests/programs/list_devices.py"
LAYOUTS = [(1, 8), (2, 4), (4, 2)]


def device_reports(lines: list[str]) -> dict:
    reports = [json.loads(line[len("DEVICES "):]) for line in lines if line.startswith("DEVICES ")]
    assert len(reports) == 1, lines
    return reports[0]


def expected_devices(num_processes: int, per_process: int) -> list[str]:
    return [f"CpuDevice(id={p * 131072 + i})" for p in range(num_processes) for i in range(per_process)]


def check_reports(reports: dict[int, dict], num_processes: int, per_process: int) -> None:
    assert sorted(reports) == list(range(num_processes))
    everything = expected_devices(num_processes, per_process)
    for index, report in reports.items():
        assert report["process_index"] == index
        assert report["process_count"] == num_processes
        assert report["devices"] == everything
        assert report["device_names"] == [f"TFRT_CPU_{d[len('CpuDevice(id='):-1]}" for d in everything]
        assert report["local_devices"] == everything[index * per_process:(index + 1) * per_process]
        assert report["device_processes"] == [p for p in range(num_processes) for _ in range(per_process)]
        assert report["local_hardware_ids"] == list(range(per_process))
        assert report["device_count"] == num_processes * per_process
        assert report["local_device_count"] == per_process
        assert report["process_1_devices"] == everything[-per_process:]


@pytest.mark.parametrize("num_processes,per_process", LAYOUTS)
def test_independent_processes_with_explicit_coordinator(num_processes, per_process):
    results = run_independent(LIST_DEVICES, num_processes, per_process)
    for result in results:
        assert result.returncode == 0, result.stderr
    reports = {i: device_reports(r.stdout.splitlines()) for i, r in enumerate(results)}
    check_reports(reports, num_processes, per_process)


@pytest.mark.parametrize("num_processes,per_process", LAYOUTS)
def test_launcher(num_processes, per_process):
    result = run_launcher(LIST_DEVICES, num_processes, per_process)
    assert result.returncode == 0, result.stderr
    reports = {i: device_reports(lines) for i, lines in lines_by_process(result.stdout).items()}
    check_reports(reports, num_processes, per_process)
    assert "configured by environment variables" not in result.stderr  # logged at INFO: quiet by default


@pytest.mark.parametrize("num_processes,per_process", [(2, 4), (2, 1)])
def test_mpiexec_with_no_arguments(num_processes, per_process):
    result = run_mpiexec(LIST_DEVICES, num_processes, per_process)
    assert result.returncode == 0, result.stderr
    reports = [device_reports([line]) for line in result.stdout.splitlines() if line.startswith("DEVICES ")]
    check_reports({r["process_index"]: r for r in reports}, num_processes, per_process)
    assert "detected an mpiexec launch" not in result.stderr  # logged at INFO: quiet by default
