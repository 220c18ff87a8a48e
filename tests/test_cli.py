"""The `meshax` command line: --version, info, launch's spellings and --port, and two demos at once."""
from __future__ import annotations

import shlex
import sys
import textwrap

import pytest

import meshax
from meshax._src.launch.launcher import main
from multiprocess import PYTHON, REPO, child_env, collect, lines_by_process, start

TIMEOUT = 120
TOY_RESULT = "got result: -0.12398731708526611"


def run(*args: str, env: dict[str, str] | None = None, timeout: float = TIMEOUT):
    """`python -m meshax ARGS` as a real process (bounded in time)."""
    return collect([start([PYTHON, "-m", "meshax", *args], env or child_env())], timeout)[0]


@pytest.fixture
def show_argv(tmp_path):
    path = tmp_path / "show.py"
    path.write_text("import os, sys\nprint('argv', sys.argv[1:], os.environ['MESHAX_NUM_PROCESSES'])\n")
    return str(path)


def test_version_in_process_and_as_a_command(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"meshax {meshax.__version__}\n"
    result = run("--version")
    assert (result.returncode, result.stdout) == (0, f"meshax {meshax.__version__}\n")


def test_help_has_examples_and_the_new_flags():
    top, launch = run("--help"), run("launch", "--help")
    assert top.returncode == launch.returncode == 0
    assert "examples:" in top.stdout and "meshax info" in top.stdout
    for flag in ("-np", "--nproc-per-node", "--port", "--cpu-devices", "examples:"):
        assert flag in launch.stdout, flag


@pytest.mark.parametrize("spelling", [["-n", "3"], ["-np", "3"], ["--nproc-per-node", "3"], ["-n3"]])
def test_process_count_synonyms(spelling, show_argv):
    result = run("launch", *spelling, show_argv, "{process_id}")
    assert result.returncode == 0, result.stderr
    assert lines_by_process(result.stdout) == {i: [f"argv ['{i}'] 3"] for i in range(3)}


@pytest.mark.parametrize("program", [
    ["python", "SCRIPT", "x"],             # mpiexec style: `-np 4 python x.py`
    ["--", "SCRIPT", "x"],                 # `--` separates the program
    ["--", "python", "SCRIPT", "x"],
    [sys.executable, "SCRIPT", "x"],       # this very interpreter by path
])
def test_program_spellings(program, show_argv):
    argv = [show_argv if word == "SCRIPT" else word for word in program]
    result = run("launch", "-np", "2", *argv)
    assert result.returncode == 0, result.stderr
    assert lines_by_process(result.stdout) == {0: ["argv ['x'] 2"], 1: ["argv ['x'] 2"]}


def test_python_dash_m_module(tmp_path):
    (tmp_path / "cli_probe_mod.py").write_text("import sys; print('module', sys.argv[1:])\n")
    env = child_env(PYTHONPATH=f"{tmp_path}:{REPO / 'src'}")
    result = run("launch", "-n", "2", "python", "-m", "cli_probe_mod", "a", env=env)
    assert result.returncode == 0, result.stderr
    assert lines_by_process(result.stdout) == {0: ["module ['a']"], 1: ["module ['a']"]}


def test_another_interpreter_is_refused_with_the_fix(show_argv, capsys):
    assert main(["launch", "-n", "2", "/opt/other/bin/python3", show_argv]) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert "names the interpreter /opt/other/bin/python3" in last
    assert "/opt/other/bin/python3 -m meshax launch" in last


def test_port_zero_picks_a_free_port_and_prints_it_once(show_argv, tmp_path):
    probe = tmp_path / "addr.py"
    probe.write_text("import os; print(os.environ['MESHAX_COORDINATOR_ADDRESS'])\n")
    result = run("launch", "-n", "2", "--port", "0", str(probe))
    assert result.returncode == 0, result.stderr
    announced = [line for line in result.stderr.splitlines() if line.startswith("meshax: coordinator on ")]
    assert len(announced) == 1, result.stderr
    address = announced[0].removeprefix("meshax: coordinator on ")
    host, port = address.split(":")
    assert host == "127.0.0.1" and 0 < int(port) < 65536
    assert lines_by_process(result.stdout) == {0: [address], 1: [address]}


def test_fixed_port_is_used_silently(tmp_path):
    probe = tmp_path / "addr.py"
    probe.write_text("import os; print(os.environ['MESHAX_COORDINATOR_ADDRESS'])\n")
    result = run("launch", "-n", "1", "--port", "23456", str(probe))
    assert result.returncode == 0, result.stderr
    assert lines_by_process(result.stdout) == {0: ["127.0.0.1:23456"]}
    assert "coordinator on" not in result.stderr


@pytest.mark.parametrize(("argv", "message"), [
    (["launch", "-n", "2", "--port", "70000", "x.py"], "must be a port from 0 (any free port) to 65535, got 70000"),
    (["launch", "-n", "2", "--port", "0", "--coordinator", "h:1", "x.py"], "not allowed with argument --port"),
    (["launch", "-n", "2", "python"], "missing the script to run"),
    (["launch", "-n", "2", "python", "-m"], "expected a module name"),
])
def test_cli_usage_errors(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err.splitlines()[-1]


def info_fields(text: str) -> dict[str, str]:
    return {key.strip(): value.strip() for key, _, value in
            (line.partition(":") for line in text.splitlines()[1:])}


def test_info_alone():
    result = run("info")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"meshax {meshax.__version__}"
    fields = info_fields(result.stdout)
    import mpi4py
    import numpy

    assert fields["cluster"] == "none (a single process)"
    assert fields["process"] == "0 of 1"
    assert fields["devices"] == "1 CPU device(s) per process, 1 in all"
    assert fields["python"].startswith(f"{sys.version_info.major}.{sys.version_info.minor}.")
    assert fields["numpy"] == numpy.__version__
    assert fields["mpi4py"] == mpi4py.__version__
    assert fields["MPI library"].startswith("MPICH Version: ") and fields["MPI library"].endswith("libmpi.so.12)")
    assert fields["kernels"].startswith("numba ") and "compiled in the background, cache " in fields["kernels"]


def test_info_under_the_launcher():
    result = run("launch", "-n", "2", "--cpu-devices", "3", "-m", "meshax", "info")
    assert result.returncode == 0, result.stderr
    for i, lines in lines_by_process(result.stdout).items():
        fields = info_fields("\n".join(lines))
        assert fields["cluster"] == "meshax launcher (meshax launch)"
        assert fields["process"] == f"{i} of 2"
        assert fields["devices"] == "3 CPU device(s) per process, 6 in all"


@pytest.mark.parametrize(("env", "cluster", "process"), [
    ({"SLURM_JOB_ID": "5", "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "n[1-2]",
      "SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "1", "SLURM_LOCALID": "1"}, "Slurm job step", "1 of 4"),
    ({"PMI_RANK": "2", "PMI_SIZE": "3", "PMI_FD": "9"}, "mpiexec/srun (PMI)", "2 of 3"),
    ({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "JOB_COMPLETION_INDEX": "1", "MESHAX_NUM_PROCESSES": "2",
      "MESHAX_COORDINATOR_ADDRESS": "job-0.svc:55527"}, "Kubernetes indexed Job/JobSet", "1 of 2"),
])
def test_info_detects_clusters(env, cluster, process):
    result = run("info", env=child_env(cpu_devices=2, **env))
    assert result.returncode == 0, result.stderr
    fields = info_fields(result.stdout)
    assert (fields["cluster"], fields["process"]) == (cluster, process)


def test_two_demos_at_once():
    """The demo's launch command (from scripts/demo.sh), twice at once on this host: no port collision."""
    last = (REPO / "scripts" / "demo.sh").read_text().strip().splitlines()[-1]
    words = shlex.split(last)
    assert words[:2] == ["exec", ".venv/bin/meshax"], last
    procs = [start([PYTHON, "-m", "meshax", *words[2:]], child_env()) for _ in range(2)]
    for result in collect(procs, timeout=240):
        assert result.returncode == 0, result.stderr
        by_process = lines_by_process(result.stdout)
        assert sorted(by_process) == [0, 1, 2, 3], result.stdout
        for i, lines in by_process.items():
            assert lines[-1] == f"process={i} {TOY_RESULT}", textwrap.shorten(result.stdout, 400)
