"""Tests for ``meshax launch`` using real subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from meshax._src.launch.launcher import main

SRC = Path(__file__).resolve().parents[1] / "src"
RUN_TIMEOUT = 20  # Hard bound for every launcher run in this file.


def write_script(directory: Path, body: str, name: str = "prog.py") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(body))
    return path


def launcher_cmd(*args: object) -> list[str]:
    return [sys.executable, "-m", "meshax", "launch", *map(str, args)]


def launcher_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    return env


def run_launcher(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        launcher_cmd(*args), env=launcher_env(), cwd=cwd,
        capture_output=True, text=True, timeout=RUN_TIMEOUT,
    )


def start_launcher(*args: object) -> subprocess.Popen:
    return subprocess.Popen(
        launcher_cmd(*args), env=launcher_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def lines_of(output: str, process_id: int) -> list[str]:
    prefix = f"[{process_id}] "
    return [line[len(prefix):] for line in output.splitlines() if line.startswith(prefix)]


def wait_for_files(paths: list[Path], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, f"missing: {[p for p in paths if not p.exists()]}"
        time.sleep(0.02)


def assert_dead(pid: int, timeout: float = 2.0) -> None:
    """Orphans may linger as zombies when init does not reap them: those count as dead."""
    deadline = time.monotonic() + timeout
    while is_alive(pid):
        assert time.monotonic() < deadline, f"process {pid} is still alive"
        time.sleep(0.02)


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # No procfs; the process exists.
    return stat.rpartition(")")[2].split()[0] != "Z"


def read_pids(directory: Path) -> list[int]:
    return [int(p.read_text()) for p in sorted(directory.glob("*.pid"))]


# A child that records its pid, then sleeps; process {fail} first waits for the
# others' pid files and then fails in the way given by {how}.
FAILING_JOB = """
    import os, signal, sys, time
    from pathlib import Path
    me, n, out = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    {setup}
    if me == {fail}:
        while len(list(out.glob("*.pid"))) < n - 1:
            time.sleep(0.01)
        {how}
    (out / f"{{me}}.pid").write_text(str(os.getpid()))
    time.sleep(60)
"""


def failing_job(tmp_path: Path, how: str, fail: int = 1, setup: str = "") -> Path:
    return write_script(tmp_path, FAILING_JOB.format(how=how, fail=fail, setup=setup))


# --------------------------------------------------------------------------
# Output relay
# --------------------------------------------------------------------------


def test_output_prefixed_and_ordered_per_process(tmp_path):
    prog = write_script(tmp_path, """
        import sys
        me = sys.argv[1]
        for k in range(200):
            print(f"out {me} {k}")
            print(f"err {me} {k}", file=sys.stderr)
        sys.stdout.buffer.write(b"junk \\xff\\xfe")  # No trailing newline.
    """)
    result = run_launcher("-n", 3, prog, "{process_id}")
    assert result.returncode == 0, result.stderr
    for line in result.stdout.splitlines():
        assert line[:4] in ("[0] ", "[1] ", "[2] "), line
    for i in range(3):
        out = lines_of(result.stdout, i)
        assert out == [f"out {i} {k}" for k in range(200)] + ["junk \ufffd\ufffd"]
        assert lines_of(result.stderr, i) == [f"err {i} {k}" for k in range(200)]


# --------------------------------------------------------------------------
# Environment and arguments
# --------------------------------------------------------------------------

ENV_REPORTER = """
    import json, os, sys
    keys = ["MESHAX_COORDINATOR_ADDRESS", "MESHAX_NUM_PROCESSES", "MESHAX_PROCESS_ID",
            "MESHAX_LAUNCHER", "MESHAX_NUM_CPU_DEVICES", "JAX_NUM_CPU_DEVICES",
            "PYTHONUNBUFFERED"]
    print(json.dumps({"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in keys}}))
"""


def reports(stdout: str, n: int) -> list[dict]:
    return [json.loads(lines_of(stdout, i)[0]) for i in range(n)]


def test_env_and_placeholders(tmp_path):
    prog = write_script(tmp_path, ENV_REPORTER)
    result = run_launcher(
        "-n", 4, "--cpu-devices", 2, prog,
        "{process_id}", "{num_processes}", "id={process_id}/{num_processes}", "-n", "{x}",
    )
    assert result.returncode == 0, result.stderr
    got = reports(result.stdout, 4)
    address = got[0]["env"]["MESHAX_COORDINATOR_ADDRESS"]
    host, port = address.split(":")
    assert host == "127.0.0.1" and 0 < int(port) < 65536
    for i, report in enumerate(got):
        assert report["argv"] == [str(i), "4", f"id={i}/4", "-n", "{x}"]
        assert report["env"] == {
            "MESHAX_COORDINATOR_ADDRESS": address,
            "MESHAX_NUM_PROCESSES": "4",
            "MESHAX_PROCESS_ID": str(i),
            "MESHAX_LAUNCHER": "1",
            "MESHAX_NUM_CPU_DEVICES": "2",
            "JAX_NUM_CPU_DEVICES": "2",
            "PYTHONUNBUFFERED": "1",
        }


def test_children_get_the_openblas_default_even_when_they_import_numpy_first(tmp_path):
    prog = write_script(tmp_path, "import os, numpy; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))")
    env = {k: v for k, v in launcher_env().items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    result = subprocess.run(launcher_cmd("-n", 2, prog), env=env, capture_output=True, text=True,
                            timeout=RUN_TIMEOUT)
    assert result.returncode == 0, result.stderr
    assert [lines_of(result.stdout, i) for i in range(2)] == [["4"], ["4"]]


def test_explicit_coordinator_and_no_cpu_devices(tmp_path):
    prog = write_script(tmp_path, ENV_REPORTER)
    result = run_launcher("-n", 2, "--coordinator", "localhost:4242", prog)
    assert result.returncode == 0, result.stderr
    for report in reports(result.stdout, 2):
        assert report["env"]["MESHAX_COORDINATOR_ADDRESS"] == "localhost:4242"
        assert report["env"]["MESHAX_NUM_CPU_DEVICES"] == os.environ.get("MESHAX_NUM_CPU_DEVICES")  # not set by us


def test_module_mode_passes_options_through(tmp_path):
    write_script(tmp_path, "import sys; print(sys.argv[1:])", name="mymod.py")
    result = run_launcher("-n", 2, "-m", "mymod", "-n", "{process_id}", "--flag", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for i in range(2):
        assert lines_of(result.stdout, i) == [str(["-n", str(i), "--flag"])]


def test_main_in_process(tmp_path, capsys):
    prog = write_script(tmp_path, "import sys; print('hi', sys.argv[1])")
    assert main(["launch", "-n", "2", str(prog), "{num_processes}"]) == 0
    out = capsys.readouterr().out
    assert sorted(out.splitlines()) == ["[0] hi 2", "[1] hi 2"]


# --------------------------------------------------------------------------
# Failures and shutdown
# --------------------------------------------------------------------------


def test_killed_child_stops_the_others(tmp_path):
    prog = failing_job(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)")
    result = run_launcher("-n", 3, "--grace", 0.2, prog, "{process_id}", "{num_processes}", tmp_path)
    assert result.returncode == 137
    assert (
        "meshax launch: process 1 exited with code 137 (killed by SIGKILL); "
        "stopping the others"
    ) in result.stderr
    pids = read_pids(tmp_path)
    assert len(pids) == 2
    for pid in pids:
        assert_dead(pid)


def test_sigterm_ignoring_sibling_gets_sigkill(tmp_path):
    prog = failing_job(
        tmp_path, "sys.exit(3)", fail=0,
        setup="signal.signal(signal.SIGTERM, signal.SIG_IGN)",
    )
    start = time.monotonic()
    result = run_launcher("-n", 2, "--grace", 0.1, prog, "{process_id}", "{num_processes}", tmp_path)
    assert result.returncode == 3
    assert time.monotonic() - start < 10
    assert "process 0 exited with code 3; stopping the others" in result.stderr
    for pid in read_pids(tmp_path):
        assert_dead(pid)


def test_first_failure_wins(tmp_path):
    prog = write_script(tmp_path, """
        import sys, time
        me = int(sys.argv[1])
        time.sleep(0.5 * me)
        sys.exit([0, 7, 9][me])
    """)
    result = run_launcher("-n", 3, prog, "{process_id}")
    assert result.returncode == 7
    assert "process 1 exited with code 7" in result.stderr
    assert "process 2" not in result.stderr  # Exited during the grace period.


def test_no_grandchild_left_behind(tmp_path):
    prog = write_script(tmp_path, """
        import subprocess, sys
        from pathlib import Path
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        (Path(sys.argv[2]) / f"{sys.argv[1]}.pid").write_text(str(sleeper.pid))
    """)
    result = run_launcher("-n", 2, prog, "{process_id}", tmp_path)
    assert result.returncode == 0, result.stderr
    pids = read_pids(tmp_path)
    assert len(pids) == 2
    for pid in pids:
        assert_dead(pid)


def test_timeout(tmp_path):
    prog = write_script(tmp_path, """
        import sys, time
        if sys.argv[1] != "0":
            time.sleep(60)
    """)
    start = time.monotonic()
    result = run_launcher("-n", 3, "--timeout", 1, prog, "{process_id}")
    assert result.returncode == 124
    assert time.monotonic() - start < 10
    assert "timed out after 1s; processes still running: 1, 2" in result.stderr


# --------------------------------------------------------------------------
# Signals sent to the launcher
# --------------------------------------------------------------------------

SIGNAL_AWARE = """
    import signal, sys, time
    from pathlib import Path
    me, out = sys.argv[1], Path(sys.argv[2])
    def on_signal(signum, frame):
        (out / f"{{me}}.{{signal.Signals(signum).name}}").write_text("")
        {on_signal}
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    (out / f"{{me}}.ready").write_text("")
    time.sleep(60)
"""


def start_signal_job(tmp_path: Path, on_signal: str, n: int = 2) -> subprocess.Popen:
    prog = write_script(tmp_path, SIGNAL_AWARE.format(on_signal=on_signal))
    launcher = start_launcher("-n", n, prog, "{process_id}", tmp_path)
    wait_for_files([tmp_path / f"{i}.ready" for i in range(n)])
    return launcher


def test_sigterm_forwarded_to_children(tmp_path):
    launcher = start_signal_job(tmp_path, on_signal="sys.exit(0)")
    try:
        launcher.send_signal(signal.SIGTERM)
        launcher.communicate(timeout=10)
    finally:
        launcher.kill()
    assert launcher.returncode == 128 + signal.SIGTERM
    assert (tmp_path / "0.SIGTERM").exists() and (tmp_path / "1.SIGTERM").exists()


def test_second_sigint_escalates_to_sigkill(tmp_path):
    launcher = start_signal_job(tmp_path, on_signal="pass")  # Children ignore it.
    try:
        launcher.send_signal(signal.SIGINT)
        wait_for_files([tmp_path / "0.SIGINT", tmp_path / "1.SIGINT"])
        launcher.send_signal(signal.SIGINT)
        launcher.communicate(timeout=3)  # Well before the 5 s grace period.
    finally:
        launcher.kill()
    assert launcher.returncode == 128 + signal.SIGINT  # the launcher was interrupted; its children were killed


# --------------------------------------------------------------------------
# Usage errors
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "required: COMMAND"),
        (["frob"], "invalid choice: 'frob'"),
        (["launch", "-n", "2"], "missing the script to run"),
        (["launch", "-n", "0", "x.py"], "must be >= 1, got 0"),
        (["launch", "-n", "two", "x.py"], "expected a number, got 'two'"),
        (["launch", "x.py"], "required: -n/--num-processes"),
        (["launch", "-n", "2", "does_not_exist.py"], "script not found: does_not_exist.py"),
        (["launch", "-n", "2", "-m"], "expected a module name"),
        (["launch", "-n", "2", "--coordinator", "nohost", "x.py"], "expected HOST:PORT"),
        (["launch", "-n", "2", "--timeout", "0", "x.py"], "must be > 0"),
    ],
)
def test_usage_errors(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "usage: meshax" in err
    assert message in err.splitlines()[-1]


def test_usage_error_via_python_m(tmp_path):
    result = run_launcher("-n", 2, tmp_path / "missing.py")
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].endswith(f"script not found: {tmp_path / 'missing.py'}")
    assert result.stdout == ""


def test_a_child_killed_before_it_joins_ends_the_start_up(tmp_path):
    """Process 2 dies before it connects to the coordinator; the others, waiting for it in initialize() (with a
    120 s timeout), are stopped within 15 s, and the launcher names process 2 and how it died."""
    script = write_script(tmp_path, """\
        import os, signal, sys, time
        if os.environ["MESHAX_PROCESS_ID"] == "2":
            print(f"DYING {time.time():.3f}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        import meshax
        meshax.distributed.initialize(initialization_timeout=120)
        print("JOINED", flush=True)
    """)
    result = subprocess.run(launcher_cmd("-n", 4, "--cpu-devices", 1, script), env=launcher_env(),
                            capture_output=True, text=True, timeout=100)
    ended = time.time()
    died = [float(line.split()[1]) for line in lines_of(result.stdout, 2) if line.startswith("DYING")]
    assert len(died) == 1, result.stdout + result.stderr
    assert ended - died[0] < 15, result.stderr
    assert result.returncode == 137, result.stderr
    assert "meshax launch: process 2 exited with code 137 (killed by SIGKILL); stopping the others" in result.stderr
    assert "JOINED" not in result.stdout


def test_a_child_that_exits_before_it_joins_is_named_by_the_others(tmp_path):
    """Process 2 exits once the coordinator is up but before it connects: the launcher tells the coordinator
    (it knows the job token), which ends every process's start-up at once, naming process 2 and its exit."""
    script = write_script(tmp_path, """\
        import os, socket, sys, time
        if os.environ["MESHAX_PROCESS_ID"] == "2":
            host, port = os.environ["MESHAX_COORDINATOR_ADDRESS"].rsplit(":", 1)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    socket.create_connection((host, int(port)), timeout=5).close()
                    break
                except OSError:
                    time.sleep(0.05)
            sys.exit("process 2: bad configuration")
        import meshax
        meshax.distributed.initialize(initialization_timeout=120)
        print("JOINED", flush=True)
    """)
    result = subprocess.run(launcher_cmd("-n", 4, "--cpu-devices", 1, script), env=launcher_env(),
                            capture_output=True, text=True, timeout=100)
    assert result.returncode == 1, result.stderr
    assert "meshax launch: process 2 exited with code 1; stopping the others" in result.stderr
    assert "JOINED" not in result.stdout
    told = ("process 2 (pid ", ", started by meshax launch) could not join the job: it exited with code 1 before "
            "every process had joined")
    children = "\n".join(line for i in (0, 1, 3) for line in lines_of(result.stderr, i))  # each report shown once
    assert all(part in children for part in told), result.stderr
