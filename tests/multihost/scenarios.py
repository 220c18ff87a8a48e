"""Failure scenarios shared by the tests and `kill_trials.py`: each returns what went wrong (empty: right)."""
from __future__ import annotations

import re
import time

from .hosts import Cluster
from .jobs import PEER_FAILURE_EXIT_CODE, Job, Outcome

HEARTBEAT_SECONDS = 5  # the programs' heartbeat_timeout_seconds: a silent partition ends the job within it
CRASH_SIGNS = ("Segmentation fault", "SIGSEGV", "Fatal Python error", "core dumped", "Aborted")


def named(outcome: Outcome, process_id: int) -> bool:
    """Whether `outcome`'s report names `process_id` (as `process N`, not `process N0`)."""
    return re.search(rf"\bprocess(?:es)? (?:[0-9, ]+ and )?{process_id}\b", outcome.stderr) is not None


def survivor_problems(outcomes: list[Outcome], lost: list[int]) -> list[str]:
    """Each survivor must exit 70 naming every process in `lost`, with no sign of a crash."""
    problems = []
    for outcome in outcomes:
        where = f"process {outcome.process_id} (exit {outcome.returncode})"
        if outcome.returncode != PEER_FAILURE_EXIT_CODE:
            problems.append(f"{where}: exit code is not {PEER_FAILURE_EXIT_CODE}")
        missing = [p for p in lost if not named(outcome, p)]
        if missing:
            problems.append(f"{where}: its report does not name process(es) {missing}")
        crash = [sign for sign in CRASH_SIGNS if sign in outcome.stderr]
        if crash or (outcome.returncode is not None and outcome.returncode < 0):
            problems.append(f"{where}: crashed ({crash or 'killed by a signal'})")
    return problems


def kill_a_host_mid_allreduce(cluster: Cluster, timeout: float = 45,
                              **env: str) -> tuple[list[Outcome], list[str]]:
    """2 hosts x 2 processes allreduce 4 MiB in a loop (`env` added to their environment); every process of
    host 1 is SIGKILLed at once. Returns the survivors' outcomes and the problems (processes 0 and 1 must exit
    70 naming 2 and 3)."""
    job = Job(cluster, "steady.py", "120", str(HEARTBEAT_SECONDS), **env)
    job.wait_for_line("READY", timeout=60)
    cluster.hosts[1].kill_programs()
    outcomes = job.collect(timeout=timeout, which=[0, 1])
    return outcomes, survivor_problems(outcomes, [2, 3])


def describe(outcomes: list[Outcome], tail: int | None = 3000) -> str:
    """Every outcome's exit code and its stderr (the last `tail` characters; None: all of it)."""
    return "\n".join(f"--- process {o.process_id}: exit {o.returncode}\n{o.stderr[-tail if tail else 0:]}"
                     for o in outcomes)


# libfabric's UDP provider with its reliability layer: 30 of 30 loaded trials ended with every survivor alike; with
# TCP, MPICH's OFI layer aborted one or more survivors in about half of them (README, "Jobs that survive ...").
SURVIVABLE_PROVIDER = "udp;ofi_rxd"


def recover_across_hosts(cluster: Cluster, program: str, steps: int, kill_step: int, restart: bool,
                         timeout: float = 90) -> list[Outcome]:
    """tests/programs/`program` on 2 hosts x 2 processes of one device, with jax_enable_recoverability: process 3
    (on host 1) SIGKILLs itself in step `kill_step`; with `restart` it is started again on its host as soon as it
    died. The outcomes of processes 0-3, then of the restarted one. MPI moves data between the hosts over UDP, as
    the README advises for such jobs (MPICH's TCP transfers to a dead process are fatal errors)."""
    job = Job(cluster, "recovery.py", program, str(steps), "3", str(kill_step), devices=1,
              FI_PROVIDER=SURVIVABLE_PROVIDER)
    deadline = time.monotonic() + timeout
    which = [0, 1, 2, 3]
    if restart:
        while job.procs[3].poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        which.append(job.start_again(3, "restarted"))
    return job.collect(timeout=max(1.0, deadline - time.monotonic()), which=which)
