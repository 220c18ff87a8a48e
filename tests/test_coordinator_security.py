"""The coordinator against outsiders: job token, authentication, bound interface, bounds, fuzzing.

Real 4-process jobs (started by `meshax launch` and by hand as in the seeds) run collectives
while an outsider who knows the port but not the token attacks it; their results and exit
codes must not change. Every job is bounded in time and killed if it overstays.
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import stat
import time

import pytest

from attacks import (WORKLOAD, IdleFlood, Job, children, expected_checksum, forged_handshake, fuzz, listeners,
                     run_attacks)
from multiprocess import (INIT_ONLY, PYTHON, child_env, collect, free_port, kill_group, start, start_up_with_a_latecomer,
                          wait_for_stderr_line)
from meshax._src.runtime import auth, job_token, listener
from meshax._src.runtime.coordinator import CoordinatorServer
from meshax._src.runtime.wire import LineSocket

JOB_TIMEOUT = 90


def home_env(home, cpu_devices: int | None = 2, **extra: str) -> dict[str, str]:
    """A child environment whose home directory (and so per-user token file) is `home`."""
    return child_env(cpu_devices, HOME=str(home), **extra)


def independent_job(home, port: int, stop_file, n: int = 4) -> Job:
    """The seeds' way: n processes started by hand with a coordinator address, no token variable."""
    env = home_env(home)
    return Job([start([PYTHON, WORKLOAD, str(stop_file), f"localhost:{port}", str(i), str(n)], env) for i in range(n)])


def launched_job(home, port: int, stop_file) -> Job:
    args = [PYTHON, "-m", "meshax", "launch", "-n", "4", "--cpu-devices", "2", "--coordinator", f"127.0.0.1:{port}",
            WORKLOAD, str(stop_file)]
    return Job([start(args, home_env(home, None))])


def assert_job_unharmed(job: Job, stop_file, codes_expected: int) -> None:
    stop_file.touch()
    codes = job.finish(JOB_TIMEOUT)
    assert codes == [0] * codes_expected, job.describe()
    results = [line.split()[-2] for line in job.stdout().splitlines() if line.rstrip().endswith("rounds-ok")]
    assert len(results) == 4, job.describe()
    for result in results:
        assert float(result) == pytest.approx(expected_checksum(), rel=1e-5)
    assert "Traceback" not in job.stderr(), job.describe()


def assert_coordinator_on_loopback_only(pids: list[int], port: int) -> None:
    found = listeners(pids)
    assert [address for address in found if address[1] == port] == [("127.0.0.1", port)], found
    wildcards = [address for address in found if address[0] in ("0.0.0.0", "::")]
    assert not wildcards, f"wildcard listeners of the job: {wildcards}"


# ---- the job token --------------------------------------------------------------------------------


def test_racing_processes_create_one_private_token_file(tmp_path):
    code = "from meshax._src.runtime import job_token; print(job_token.job_token().decode())"
    procs = [start([PYTHON, "-c", code], home_env(tmp_path)) for _ in range(8)]
    outputs = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
        assert proc.returncode == 0, err
        outputs.append(out.strip())
    assert len(set(outputs)) == 1 and len(outputs[0]) == 64, outputs
    path = tmp_path / ".meshax" / "job_token"
    assert path.read_text().strip() == outputs[0]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert os.listdir(path.parent) == ["job_token"]  # no temporary files left


def test_a_token_file_others_can_read_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv(job_token.ENV_VAR, raising=False)
    token = job_token.job_token()
    assert job_token.job_token() == token
    (tmp_path / ".meshax" / "job_token").chmod(0o644)
    with pytest.raises(RuntimeError, match="chmod 600"):
        job_token.job_token()
    monkeypatch.setenv(job_token.ENV_VAR, "  ")
    with pytest.raises(ValueError, match="MESHAX_JOB_TOKEN is set but empty"):
        job_token.job_token()
    monkeypatch.setenv(job_token.ENV_VAR, "s3cret")
    assert job_token.job_token() == b"s3cret"


# ---- binding and per-connection rules, in one process ------------------------------------------------


def test_the_coordinator_listens_on_its_address_interface(caplog):
    sockets = listener._listen("localhost", 0)
    try:
        assert {sock.getsockname()[0] for sock in sockets} <= {"127.0.0.1", "::1"}
    finally:
        for sock in sockets:
            sock.close()
    own_ip = _own_ip()
    if own_ip is not None:  # this machine's address: that interface only
        sockets = listener._listen(own_ip, 0)
        try:
            assert [sock.getsockname()[0] for sock in sockets] == [own_ip]
        finally:
            for sock in sockets:
                sock.close()
    own_name = socket.gethostname()
    sockets = listener._listen(own_name, 0)
    try:
        on_loopback = all(info[4][0].startswith("127.") or info[4][0] == "::1"
                          for info in socket.getaddrinfo(own_name, 0, type=socket.SOCK_STREAM))
        wildcard = [sock.getsockname()[0] for sock in sockets] in (["::"], ["0.0.0.0"])
        assert wildcard == on_loopback  # all interfaces exactly when the own name resolves to loopback here
    finally:
        for sock in sockets:
            sock.close()
    for host, why in (("203.0.113.7", "is not an address of this machine"),
                      ("no-such-host.invalid", "cannot be resolved")):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="meshax"):
            sockets = listener._listen(host, 0)
        try:
            assert [sock.getsockname()[0] for sock in sockets] in (["::"], ["0.0.0.0"])
            assert why in caplog.text and "listening on all interfaces" in caplog.text
        finally:
            for sock in sockets:
                sock.close()


def _own_ip() -> str | None:
    """This machine's address on its default route, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("203.0.113.7", 9))
        except OSError:
            return None
        ip = probe.getsockname()[0]
    return None if ip.startswith("127.") else ip


def test_an_authenticated_connection_acts_only_as_its_process():
    server = CoordinatorServer(0, 2, heartbeat_timeout=30, token=b"right", bind_host="127.0.0.1")
    address = f"127.0.0.1:{server.port}"
    try:
        with pytest.raises(auth.AuthenticationError, match="MESHAX_JOB_TOKEN"):
            auth.connect(address, b"wrong", "control", 1, timeout=10)
        conn = LineSocket(auth.connect(address, b"right", "control", 1, timeout=10))
        conn.sock.settimeout(10)
        conn.write_message({"op": "register", "rid": 1, "process_id": 0, "num_processes": 2, "timeout": 30})
        assert "cannot register as process 0" in conn.read_message()["error"]
        conn.write_message({"op": "kv_get", "rid": 2, "key": "x", "timeout": 0})
        assert conn.read_message()["error"] == "register before any other request"
        conn.write_line("not json")
        conn.write_message({"op": "register", "rid": 3, "process_id": 1, "num_processes": 2, "timeout": 30})
        conn.write_message({"op": "register", "rid": 4, "process_id": 0, "num_processes": 2, "timeout": 30})
        assert conn.read_message() == {"rid": 4, "error": "this connection is registered as process 1."}
        conn.write_message({"op": "kv_set", "rid": 5, "key": "k"})  # malformed: no value
        assert "malformed 'kv_set' request" in conn.read_message()["error"]
        pmi = [LineSocket(auth.connect(address, b"right", "pmi", 0, timeout=10)) for _ in range(2)]
        pmi[1].sock.settimeout(10)
        assert pmi[1].read_line() is None  # a second PMI connection of process 0 is closed
        pmi[0].write_line("cmd=initack pmiid=1")  # claims another rank: dropped
        pmi[0].write_line("cmd=get_universe_size")
        pmi[0].sock.settimeout(10)
        assert pmi[0].read_line() == "cmd=universe_size size=2 rc=0"
        for c in (conn, *pmi):
            c.close()
    finally:
        server.stop(timeout=0.1)


def test_a_process_with_another_token_fails_naming_the_fix(tmp_path):
    port = free_port()
    procs = [start([PYTHON, "tests/programs/init_only.py", f"localhost:{port}", str(i), "2", "60"],
                   home_env(tmp_path, 1, **({job_token.ENV_VAR: "another"} if i else {}))) for i in range(2)]
    job = Job(procs)
    codes = job.finish(JOB_TIMEOUT)
    assert codes[0] != 0 and codes[1] != 0, job.describe()
    assert "process 1 could not authenticate to the coordinator" in "".join(job.err[1]), job.describe()
    assert "set the same MESHAX_JOB_TOKEN on every process" in "".join(job.err[1]), job.describe()
    assert "process 1 could not join the job: its connection from 127.0.0.1 at " in "".join(job.err[0]), \
        job.describe()
    assert "was refused because its job token differs from process 0's" in "".join(job.err[0]), job.describe()


# ---- real jobs under attack ----------------------------------------------------------------------------


def test_outsiders_cannot_harm_a_launched_job(tmp_path):
    port, stop_file = free_port(), tmp_path / "stop"
    job = launched_job(tmp_path, port, stop_file)
    try:
        job.wait_for("READY", 4, timeout=JOB_TIMEOUT)
        assert_coordinator_on_loopback_only(children(job.procs[0].pid), port)
        failures = run_attacks(port)
        assert not failures, failures
        assert_job_unharmed(job, stop_file, 1)
    finally:
        job.kill()
    assert "[0] meshax coordinator: dropped a connection from 127.0.0.1" in job.stderr()
    assert not (tmp_path / ".meshax").exists()  # the launcher's token was used, not the per-user file


def test_outsiders_cannot_harm_independently_started_processes(tmp_path):
    port, stop_file = free_port(), tmp_path / "stop"
    job = independent_job(tmp_path, port, stop_file)
    try:
        job.wait_for("READY", 4, timeout=JOB_TIMEOUT)
        assert_coordinator_on_loopback_only([proc.pid for proc in job.procs], port)
        failures = run_attacks(port)
        assert not failures, failures
        assert_job_unharmed(job, stop_file, 4)
    finally:
        job.kill()
    assert "meshax coordinator: dropped a connection from 127.0.0.1" in "".join(job.err[0])
    assert stat.S_IMODE((tmp_path / ".meshax" / "job_token").stat().st_mode) == 0o600


def test_fuzzing_the_coordinator_port_during_a_job_changes_nothing(tmp_path):
    seed = int(os.environ.get("MESHAX_FUZZ_SEED", time.time_ns() % 100_000))
    port, stop_file = free_port(), tmp_path / "stop"
    job = launched_job(tmp_path, port, stop_file)
    try:
        job.wait_for("READY", 4, timeout=JOB_TIMEOUT)
        sent, problems = fuzz(port, seed, rounds=4, workers=6)
        assert not problems, f"seed {seed} (rerun with MESHAX_FUZZ_SEED={seed}): {problems[:5]}"
        assert sent == 24, f"seed {seed}: only {sent} of 24 payloads were sent"
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass  # still accepting
        assert_job_unharmed(job, stop_file, 1)
    finally:
        job.kill()


# ---- start-up under attack and with a process of another job ---------------------------------------------

TIMED_INIT = "tests/programs/timed_init.py"


def wait_until_listening(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def start_up_delay(results) -> float:
    """Seconds between the last process calling initialize() and the last one returning from it."""
    def stamps(word: str) -> list[float]:
        return [float(line.split()[1]) for r in results for line in r.stdout.splitlines() if line.startswith(word)]
    called, joined = stamps("CALLED"), stamps("JOINED")
    assert len(called) == len(joined) == len(results), [r.stdout + r.stderr[-2000:] for r in results]
    return max(joined) - max(called)


def test_outsiders_cannot_delay_or_stop_a_start_up(tmp_path):
    """While the job starts, an outsider holds 500 connections open (reopening each one the coordinator drops)
    and runs every attack (forged handshakes claiming the processes still missing, forged reports, ...): the
    processes still join at once (each handshake takes one round trip; idle ones are pushed out) and run."""
    port = free_port()
    env = home_env(tmp_path, 1)
    procs = [start([PYTHON, TIMED_INIT, f"localhost:{port}", "0", "3"], env)]
    try:
        wait_until_listening(port, timeout=60)
        with IdleFlood(port, 500) as flood:
            failures = run_attacks(port)
            procs += [start([PYTHON, TIMED_INIT, f"localhost:{port}", str(i), "3"], env) for i in (1, 2)]
            results = collect(procs, timeout=120)
    finally:
        for proc in procs:
            proc.kill()
    assert [r.returncode for r in results] == [0, 0, 0], [r.stderr[-2000:] for r in results]
    assert all(f"OK {i} 3" in r.stdout for i, r in enumerate(results))
    assert flood.opened >= 500 and not failures, failures
    assert start_up_delay(results) < 10  # 35 s when idle connections blocked the handshakes of the job's


def test_a_process_with_another_token_ends_the_start_up_of_every_process(tmp_path):
    """4 processes started by hand, process 2 with another token: it fails at once, and once it has not come
    back with the right token for the grace (5 s), every other process exits non-zero within 15 s of its
    refusal, naming it, where from, why and the fix (they would wait 120 s)."""
    env = home_env(tmp_path, 1, MESHAX_STILL_WAITING_SECONDS="1")
    refused, results, elapsed = start_up_with_a_latecomer(f"localhost:{free_port()}", env, "2",
                                                          home_env(tmp_path, 1, **{job_token.ENV_VAR: "another"}))
    assert refused.returncode != 0
    assert "process 2 could not authenticate to the coordinator" in refused.stderr, refused.stderr
    assert elapsed < 15, [r.stderr[-2000:] for r in results]
    for result in results:
        assert result.returncode != 0 and "OK" not in result.stdout, result.stderr
        assert "process 2 could not join the job: its connection from 127.0.0.1 at " in result.stderr, result.stderr
        assert ("was refused because its job token differs from process 0's, and no process 2 with the right token "
                "joined within 5 s; set the same MESHAX_JOB_TOKEN on every process") in result.stderr, result.stderr


def test_a_forged_claim_for_a_process_that_then_joins_changes_nothing(tmp_path):
    """An outsider claims to be process 2 (with a made-up MAC) while it is still starting (stopped, to be sure
    it has not connected): process 2 then joins within the grace, and the job runs and prints JAX's values."""
    port, stop_file = free_port(), tmp_path / "stop"
    stop_file.touch()  # two rounds, then the job ends
    late = start([PYTHON, WORKLOAD, str(stop_file), f"localhost:{port}", "2", "4"],
                 home_env(tmp_path, MESHAX_LOG="debug"))
    job = None
    try:
        wait_for_stderr_line(late, "configured by initialize() arguments", timeout=60)  # it is about to connect
        os.kill(late.pid, signal.SIGSTOP)
        others = [start([PYTHON, WORKLOAD, str(stop_file), f"localhost:{port}", str(i), "4"],
                        home_env(tmp_path, MESHAX_STILL_WAITING_SECONDS="1")) for i in (0, 1, 3)]
        job = Job([late, *others])
        deadline = time.monotonic() + 60
        while not any("still waiting for processes [2]" in line for line in list(job.err[1])):  # 0, 1, 3 joined
            assert time.monotonic() < deadline and all(p.poll() is None for p in others), job.describe()
            time.sleep(0.05)
        assert forged_handshake(port, "control", 2).endswith(b"denied\n")
        os.kill(late.pid, signal.SIGCONT)
        assert_job_unharmed(job, stop_file, 4)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(late.pid, signal.SIGCONT)
        if job is not None:
            job.kill()
        kill_group(late)
    assert "claimed to be the control connection of process 2 without knowing the job token" in "".join(job.err[1])
    assert "could not join" not in job.stderr(), job.describe()


def test_a_refused_process_is_named_while_another_one_is_missing(tmp_path):
    """Process 2 is refused for a wrong token while process 3 never starts: the job cannot know that 2 was its
    own, so it waits; every "still waiting" line and the initialization timeout name both, with when and from
    where process 2 was refused."""
    port = free_port()
    intruder = start([PYTHON, INIT_ONLY, f"localhost:{port}", "2", "4", "30"],
                     home_env(tmp_path, 1, MESHAX_LOG="debug", **{job_token.ENV_VAR: "another"}))
    try:  # it is about to connect (it retries until the coordinator is up): start the job
        wait_for_stderr_line(intruder, "configured by initialize() arguments", timeout=60)
        procs = [start([PYTHON, INIT_ONLY, f"localhost:{port}", str(i), "4", "10"],
                       home_env(tmp_path, 1, MESHAX_STILL_WAITING_SECONDS="3")) for i in (0, 1)]
        results = collect([intruder, *procs], timeout=60)
    finally:
        kill_group(intruder)
    assert all(r.returncode != 0 for r in results), [r.stderr[-2000:] for r in results]
    assert "process 2 could not authenticate to the coordinator" in results[0].stderr
    refused = ("process 2: a connection claiming to be it was refused at ", " from 127.0.0.1 for a wrong job token")
    for result in results[1:]:
        waiting = [line for line in result.stderr.splitlines() if "still waiting for processes [2, 3]" in line]
        assert waiting and all(all(part in line for part in refused) for line in waiting), result.stderr
        timeout = result.stderr.split("processes [2, 3] of 4 never connected")
        assert len(timeout) == 2 and all(part in timeout[1] for part in refused), result.stderr
        assert "could not join the job" not in result.stderr, result.stderr
