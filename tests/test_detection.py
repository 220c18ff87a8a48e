"""Unit tests for meshax._src.runtime.detection, with injected environments."""
from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import given, strategies as st

from meshax._src.runtime.detection import ClusterSpec, parse_hostlist, resolve

HYDRA = {"PMI_RANK": "1", "PMI_SIZE": "2", "PMI_FD": "6", "PMI_HOSTNAME": "h", "MPI_LOCALNRANKS": "2"}
OPEN_MPI = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}
SLURM_STEP = {
    "SLURM_JOB_ID": "1234",
    "SLURM_STEP_ID": "0",
    "SLURM_STEP_NODELIST": "node[001-015],h2",
    "SLURM_STEP_NUM_TASKS": "8",
    "SLURM_PROCID": "3",
    "SLURM_LOCALID": "1",
}
SLURM_PORT = 1234 % 4096 + 61440
SALLOC_SHELL = {"SLURM_JOB_ID": "1234", "SLURM_NODELIST": "node[001-002]", "SLURM_NTASKS": "2"}
K8S_JOB = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "JOB_COMPLETION_INDEX": "2", "MESHAX_NUM_PROCESSES": "4"}


def run(env: dict[str, str] | None = None, hostname: str = "laptop", fqdn: str = "laptop",
        **kwargs) -> ClusterSpec:
    return resolve(**kwargs, environ=env or {}, hostname=hostname, fqdn=fqdn)


def check_description(spec: ClusterSpec) -> None:
    assert spec.description.startswith("meshax: ")
    assert "\n" not in spec.description


# -- single process and explicit arguments ----------------------------------------------

def test_nothing_found_is_a_single_process_job():
    spec = run()
    assert spec == ClusterSpec(None, 1, 0, None, False, "single", spec.description)
    assert "single process" in spec.description
    check_description(spec)


def test_local_device_ids_alone_stay_single_process():
    spec = run(local_device_ids=[0, 1])
    assert (spec.num_processes, spec.process_id, spec.local_device_ids) == (1, 0, [0, 1])
    assert spec.method == "single"


def test_explicit_arguments():
    spec = run(coordinator_address="10.0.0.1:1234", num_processes=2, process_id=1,
               local_device_ids=3)
    assert spec == ClusterSpec("10.0.0.1:1234", 2, 1, [3], False, "explicit", spec.description)
    assert spec.description == (
        "meshax: configured by initialize() arguments: process 1 of 2, "
        "coordinator 10.0.0.1:1234, local devices [3]"
    )


def test_explicit_numpy_integers_are_accepted():
    spec = run(coordinator_address="h:1", num_processes=np.int64(2), process_id=np.int32(0),
               local_device_ids=np.array([0, 1]))
    assert (spec.num_processes, spec.process_id, spec.local_device_ids) == (2, 0, [0, 1])
    assert type(spec.num_processes) is int


def test_one_process_needs_no_process_id_or_coordinator():
    spec = run(num_processes=1)
    assert (spec.num_processes, spec.process_id, spec.method) == (1, 0, "explicit")


def test_ipv6_coordinator():
    assert run(coordinator_address="[::1]:80", num_processes=2, process_id=0).coordinator_address == "[::1]:80"


# -- environment variables ----------------------------------------------------------------

def test_meshax_environment_variables():
    env = {"MESHAX_COORDINATOR_ADDRESS": "head:5000", "MESHAX_NUM_PROCESSES": "3",
           "MESHAX_PROCESS_ID": "2", "MESHAX_LOCAL_DEVICE_IDS": "0, 1,2"}
    spec = run(env)
    assert spec == ClusterSpec("head:5000", 3, 2, [0, 1, 2], False, "env", spec.description)
    assert spec.description.startswith("meshax: configured by environment variables: process 2 of 3")


def test_jax_environment_variables():
    env = {"JAX_COORDINATOR_ADDRESS": "head:5000", "JAX_NUM_PROCESSES": "2",
           "JAX_PROCESS_ID": "1", "JAX_LOCAL_DEVICE_IDS": "4"}
    spec = run(env)
    assert (spec.coordinator_address, spec.num_processes, spec.process_id) == ("head:5000", 2, 1)
    assert spec.local_device_ids == [4]


def test_meshax_spelling_wins_over_jax():
    env = {"MESHAX_COORDINATOR_ADDRESS": "a:1", "JAX_COORDINATOR_ADDRESS": "b:2",
           "MESHAX_NUM_PROCESSES": "4", "JAX_NUM_PROCESSES": "8",
           "MESHAX_PROCESS_ID": "1", "JAX_PROCESS_ID": "5"}
    spec = run(env)
    assert (spec.coordinator_address, spec.num_processes, spec.process_id) == ("a:1", 4, 1)


def test_empty_variables_count_as_unset():
    spec = run({"MESHAX_NUM_PROCESSES": "", "JAX_NUM_PROCESSES": "1"})
    assert spec.num_processes == 1


def test_arguments_win_over_environment():
    env = {"MESHAX_COORDINATOR_ADDRESS": "env:1", "MESHAX_NUM_PROCESSES": "8", "MESHAX_PROCESS_ID": "7"}
    spec = run(env, coordinator_address="arg:2", num_processes=2, process_id=1)
    assert (spec.coordinator_address, spec.num_processes, spec.process_id) == ("arg:2", 2, 1)
    assert spec.method == "explicit"


def test_arguments_and_environment_mix():
    spec = run({"MESHAX_COORDINATOR_ADDRESS": "head:5000", "MESHAX_NUM_PROCESSES": "2"}, process_id=1)
    assert (spec.coordinator_address, spec.num_processes, spec.process_id) == ("head:5000", 2, 1)
    assert spec.method == "explicit"
    assert "coordinator_address from MESHAX_COORDINATOR_ADDRESS" in spec.description
    assert "num_processes from MESHAX_NUM_PROCESSES" in spec.description


def test_bad_environment_value_overridden_by_argument_is_ignored():
    assert run({"MESHAX_NUM_PROCESSES": "many"}, num_processes=1).num_processes == 1


@pytest.mark.parametrize("name", ["MESHAX_NUM_PROCESSES", "JAX_PROCESS_ID", "MESHAX_LOCAL_DEVICE_IDS"])
def test_non_integer_environment_value_names_the_variable(name):
    env = {"MESHAX_COORDINATOR_ADDRESS": "h:1", "MESHAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0",
           name: "0,x" if name == "MESHAX_LOCAL_DEVICE_IDS" else "two"}
    with pytest.raises(ValueError, match=name):
        run(env)


@pytest.mark.parametrize("port_var", ["MESHAX_COORDINATOR_PORT", "JAX_COORDINATOR_PORT"])
def test_port_variable_overrides_the_port(port_var):
    spec = run({port_var: "7000"}, coordinator_address="head:5000", num_processes=2, process_id=0)
    assert spec.coordinator_address == "head:7000"
    assert f"port from {port_var}" in spec.description


def test_meshax_port_wins_over_jax_port():
    env = {"MESHAX_COORDINATOR_PORT": "7000", "JAX_COORDINATOR_PORT": "8000",
           "MESHAX_COORDINATOR_ADDRESS": "head", "MESHAX_NUM_PROCESSES": "1"}
    assert run(env).coordinator_address == "head:7000"


def test_port_variable_supplies_a_missing_port_and_keeps_ipv6_brackets():
    spec = run({"MESHAX_COORDINATOR_PORT": "7000"}, coordinator_address="[fe80::1]",
               num_processes=2, process_id=1)
    assert spec.coordinator_address == "[fe80::1]:7000"


@pytest.mark.parametrize("port", ["abc", "0", "70000"])
def test_bad_port_variable(port):
    with pytest.raises(ValueError, match="MESHAX_COORDINATOR_PORT"):
        run({"MESHAX_COORDINATOR_PORT": port}, coordinator_address="h:1", num_processes=2, process_id=0)


# -- MPI launchers --------------------------------------------------------------------------

def test_mpich_hydra_launch():
    spec = run(HYDRA)
    assert spec == ClusterSpec(None, 2, 1, None, True, "mpi", spec.description)
    assert spec.description == (
        "meshax: detected an mpiexec launch (MPICH hydra): process 1 of 2; "
        "coordinator to be chosen by process 0"
    )


@pytest.mark.parametrize("channel", [{"PMI_FD": "5"}, {"PMI_PORT": "node001:4000"}])
def test_srun_pmi2_launch(channel):
    env = {**SLURM_STEP, "PMI_RANK": "3", "PMI_SIZE": "8", **channel}
    spec = run(env)
    assert (spec.launcher_pmi, spec.method, spec.process_id, spec.num_processes) == (True, "mpi", 3, 8)
    assert "srun launch (PMI-2)" in spec.description
    # The Slurm detector still supplies the coordinator.
    assert spec.coordinator_address == f"node001:{SLURM_PORT}"
    assert "coordinator_address from SLURM_STEP_NODELIST" in spec.description


def test_pmi_port_launch_without_slurm():
    spec = run({"PMI_RANK": "0", "PMI_SIZE": "2", "PMI_PORT": "host:4000"})
    assert (spec.launcher_pmi, spec.process_id, spec.num_processes) == (True, 0, 2)


def test_our_own_pmi_variables_are_not_a_launcher():
    # meshax's own PMI server hands out PMI_PORT + PMI_ID, never PMI_RANK/PMI_SIZE.
    spec = run({"PMI_PORT": "head:4000", "PMI_ID": "1"})
    assert (spec.launcher_pmi, spec.method) == (False, "single")


def test_pmi_rank_without_channel_is_not_a_launcher():
    assert run({"PMI_RANK": "0", "PMI_SIZE": "2"}).launcher_pmi is False


def test_open_mpi_launch():
    spec = run(OPEN_MPI)
    assert (spec.launcher_pmi, spec.method, spec.process_id, spec.num_processes) == (True, "mpi", 2, 4)
    assert "Open MPI" in spec.description


def test_pmix_launch_without_size():
    spec = run({"PMIX_RANK": "5", "PMIX_NAMESPACE": "prterun-x"})
    assert (spec.launcher_pmi, spec.process_id, spec.num_processes) == (True, 5, None)
    assert "PMIx" in spec.description
    check_description(spec)


def test_launcher_with_coordinator_from_environment():
    spec = run({**HYDRA, "MESHAX_COORDINATOR_ADDRESS": "head:5000"})
    assert (spec.coordinator_address, spec.launcher_pmi) == ("head:5000", True)


def test_explicit_values_agreeing_with_launcher():
    spec = run(HYDRA, process_id=1, num_processes=2)
    assert (spec.launcher_pmi, spec.method) == (True, "mpi")


def test_explicit_process_id_contradicting_launcher():
    with pytest.raises(ValueError, match=r"process_id=0 contradicts the MPI launcher.*PMI_RANK=1"):
        run(HYDRA, process_id=0)


def test_environment_count_contradicting_launcher():
    with pytest.raises(ValueError, match=r"num_processes=3 \(from MESHAX_NUM_PROCESSES\).*OMPI_COMM_WORLD_SIZE=4"):
        run({**OPEN_MPI, "MESHAX_NUM_PROCESSES": "3"})


def test_non_integer_launcher_rank():
    with pytest.raises(ValueError, match="PMI_RANK"):
        run({**HYDRA, "PMI_RANK": "one"})


# -- Slurm ----------------------------------------------------------------------------------

def test_slurm_job_step():
    spec = run(SLURM_STEP)
    assert spec == ClusterSpec(f"node001:{SLURM_PORT}", 8, 3, None, False, "slurm", spec.description)
    assert spec.description == f"meshax: detected a Slurm job step: process 3 of 8, coordinator node001:{SLURM_PORT}"


def test_slurm_port_wraps_at_4096():
    spec = run({**SLURM_STEP, "SLURM_JOB_ID": str(4096 * 3 + 7)})
    assert spec.coordinator_address == "node001:61447"


def test_partial_slurm_environment_is_not_detected(caplog):
    with caplog.at_level(logging.DEBUG, logger="meshax"):
        spec = run(SALLOC_SHELL)
    assert spec.method == "single"
    message = next(r.getMessage() for r in caplog.records if "slurm" in r.getMessage())
    for name in ("SLURM_STEP_ID", "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID"):
        assert name in message
    assert "SLURM_JOB_ID," not in message


def test_slurm_step_missing_one_variable_is_not_detected():
    env = dict(SLURM_STEP)
    del env["SLURM_LOCALID"]
    assert run(env).method == "single"


def test_partial_slurm_with_named_method_raises():
    with pytest.raises(ValueError, match="not a Slurm job step.*SLURM_STEP_ID"):
        run(SALLOC_SHELL, cluster_detection_method="slurm")


def test_arguments_win_over_slurm():
    spec = run(SLURM_STEP, coordinator_address="head:1", process_id=0)
    assert (spec.coordinator_address, spec.num_processes, spec.process_id) == ("head:1", 8, 0)
    assert spec.method == "explicit"


def test_slurm_port_override():
    assert run({**SLURM_STEP, "MESHAX_COORDINATOR_PORT": "6000"}).coordinator_address == "node001:6000"


def test_non_integer_slurm_job_id():
    with pytest.raises(ValueError, match="SLURM_JOB_ID"):
        run({**SLURM_STEP, "SLURM_JOB_ID": "12_3"})


@pytest.mark.parametrize("nodelist, hosts", [
    ("node[001-003],h2", ["node001", "node002", "node003", "h2"]),
    ("a-[3,5-7]", ["a-3", "a-5", "a-6", "a-7"]),
    ("h1,h2", ["h1", "h2"]),
    ("gpu[07]", ["gpu07"]),
    ("single", ["single"]),
    ("r[1-2]-n[08-09]", ["r1-n08", "r1-n09", "r2-n08", "r2-n09"]),
    ("x[9-10],y[1,3]", ["x9", "x10", "y1", "y3"]),
])
def test_parse_hostlist(nodelist, hosts):
    assert parse_hostlist(nodelist) == hosts


@pytest.mark.parametrize("nodelist, first", [
    ("node[001-015],h2", "node001"), ("a-[3,5-7]", "a-3"), ("h1,h2", "h1"), ("gpu[07]", "gpu07"),
])
def test_slurm_coordinator_is_first_host(nodelist, first):
    spec = run({**SLURM_STEP, "SLURM_STEP_NODELIST": nodelist})
    assert spec.coordinator_address == f"{first}:{SLURM_PORT}"


@pytest.mark.parametrize("nodelist", ["node[1-2", "node]1", "node[2-1]", "node[a]", "", "a,,b"])
def test_parse_hostlist_rejects_malformed(nodelist):
    with pytest.raises(ValueError, match="SLURM_STEP_NODELIST"):
        parse_hostlist(nodelist)


@given(prefix=st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True),
       start=st.integers(0, 500), count=st.integers(1, 20), width=st.integers(1, 4))
def test_parse_hostlist_ranges(prefix, start, count, width):
    lo, hi = str(start).zfill(width), str(start + count - 1).zfill(width)
    hosts = parse_hostlist(f"{prefix}[{lo}-{hi}]")
    assert hosts == [prefix + str(n).zfill(width) for n in range(start, start + count)]


# -- Kubernetes ----------------------------------------------------------------------------

def test_kubernetes_indexed_job():
    spec = run(K8S_JOB, hostname="train-2", fqdn="train-2.workers.team.svc.cluster.local")
    assert spec == ClusterSpec("train-0.workers:55527", 4, 2, None, False, "kubernetes", spec.description)
    assert spec.description.startswith(
        "meshax: detected a Kubernetes indexed Job: process 2 of 4, coordinator train-0.workers:55527"
    )


@pytest.mark.parametrize("fqdn", ["train-2", "train-2.cluster.local", "other.workers.team.svc.cluster.local"])
def test_kubernetes_without_subdomain_falls_back_to_pod_name(fqdn):
    spec = run(K8S_JOB, hostname="train-2", fqdn=fqdn)
    assert spec.coordinator_address == "train-0:55527"


def test_kubernetes_process_count_required():
    env = {k: v for k, v in K8S_JOB.items() if k != "MESHAX_NUM_PROCESSES"}
    with pytest.raises(ValueError, match="MESHAX_NUM_PROCESSES in the pod spec"):
        run(env, hostname="train-2")


def test_kubernetes_process_count_from_jax_variable_or_argument():
    env = {k: v for k, v in K8S_JOB.items() if k != "MESHAX_NUM_PROCESSES"}
    assert run({**env, "JAX_NUM_PROCESSES": "3"}, hostname="train-2").num_processes == 3
    assert run(env, hostname="train-2", num_processes=5).num_processes == 5


def test_kubernetes_port_override():
    spec = run({**K8S_JOB, "MESHAX_COORDINATOR_PORT": "9000"}, hostname="train-2")
    assert spec.coordinator_address == "train-0:9000"


def test_kubernetes_hostname_not_matching_index():
    with pytest.raises(ValueError, match="MESHAX_COORDINATOR_ADDRESS"):
        run(K8S_JOB, hostname="train-7")


def test_kubernetes_coordinator_from_environment_needs_no_hostname():
    spec = run({**K8S_JOB, "MESHAX_COORDINATOR_ADDRESS": "head:1"}, hostname="whatever")
    assert (spec.coordinator_address, spec.process_id, spec.method) == ("head:1", 2, "kubernetes")


def test_kubernetes_service_host_alone_is_not_detected():
    assert run({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}).method == "single"


def jobset_env(job_index: str | None, **extra: str) -> dict[str, str]:
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "JOB_COMPLETION_INDEX": "1",
           "JOBSET_NAME": "js", "MESHAX_NUM_PROCESSES": "8", **extra}
    if job_index is not None:
        env["JOB_INDEX"] = job_index
    return env


def test_jobset_first_job():
    spec = run(jobset_env("0"), hostname="js-workers-0-1", fqdn="js-workers-0-1.js.team.svc.cluster.local")
    assert (spec.coordinator_address, spec.process_id, spec.method) == ("js-workers-0-0.js:55527", 1, "kubernetes")
    assert "JobSet" in spec.description


def test_jobset_later_job_uses_processes_per_job():
    spec = run(jobset_env("1", MESHAX_PROCESSES_PER_JOB="4"), hostname="js-workers-1-1", fqdn="js-workers-1-1")
    # Subdomain defaults to the JobSet name.
    assert (spec.coordinator_address, spec.process_id) == ("js-workers-0-0.js:55527", 5)


def test_jobset_subdomain_from_fqdn():
    spec = run(jobset_env("0"), hostname="js-workers-0-1", fqdn="js-workers-0-1.svcname.team.svc.cluster.local")
    assert spec.coordinator_address == "js-workers-0-0.svcname:55527"


def test_jobset_job_index_from_hostname():
    spec = run(jobset_env(None, MESHAX_PROCESSES_PER_JOB="4"), hostname="js-workers-1-1")
    assert spec.process_id == 5


def test_jobset_later_job_without_processes_per_job():
    with pytest.raises(ValueError, match="MESHAX_PROCESSES_PER_JOB"):
        run(jobset_env("1"), hostname="js-workers-1-1")


def test_jobset_index_beyond_processes_per_job():
    with pytest.raises(ValueError, match="JOB_COMPLETION_INDEX=1 is out of range"):
        run(jobset_env("1", MESHAX_PROCESSES_PER_JOB="1"), hostname="js-workers-1-1")


def test_jobset_bad_hostname():
    with pytest.raises(ValueError, match="JobSet"):
        run(jobset_env("0"), hostname="js-1")


# -- deactivate and named methods -------------------------------------------------------------

def test_deactivate_skips_detection():
    spec = run({**SLURM_STEP, **HYDRA}, cluster_detection_method="deactivate")
    assert (spec.method, spec.launcher_pmi, spec.num_processes) == ("single", False, 1)


def test_deactivate_still_reads_environment_variables():
    env = {**SLURM_STEP, "MESHAX_COORDINATOR_ADDRESS": "h:1", "MESHAX_NUM_PROCESSES": "2",
           "MESHAX_PROCESS_ID": "1"}
    spec = run(env, cluster_detection_method="deactivate")
    assert (spec.coordinator_address, spec.num_processes, spec.process_id, spec.method) == ("h:1", 2, 1, "env")


def test_named_method_runs_only_that_detector():
    spec = run({**SLURM_STEP, **HYDRA}, cluster_detection_method="slurm")
    assert (spec.method, spec.launcher_pmi, spec.process_id) == ("slurm", False, 3)


@pytest.mark.parametrize("name", ["mpi", "ompi", "mpi4py"])
def test_mpi_aliases(name):
    spec = run({**OPEN_MPI, **SLURM_STEP}, cluster_detection_method=name)
    assert (spec.method, spec.process_id, spec.coordinator_address) == ("mpi", 2, None)


def test_named_kubernetes():
    spec = run({**K8S_JOB, **SLURM_STEP}, hostname="train-2", cluster_detection_method="kubernetes")
    assert (spec.method, spec.process_id) == ("kubernetes", 2)


@pytest.mark.parametrize("name, match", [
    ("mpi", "no MPI launcher"), ("slurm", "not a Slurm job step"), ("kubernetes", "JOB_COMPLETION_INDEX"),
])
def test_named_method_without_its_environment(name, match):
    with pytest.raises(ValueError, match=f"cluster_detection_method='{name}' was requested, but .*{match}"):
        run(cluster_detection_method=name)


def test_unknown_method_lists_valid_ones():
    with pytest.raises(ValueError, match="'gke' is unknown.*'mpi', 'slurm', 'kubernetes'.*'deactivate'"):
        run(cluster_detection_method="gke")


# -- validation ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, -2, "4", 2.0, True])
def test_bad_num_processes(value):
    with pytest.raises(ValueError, match="num_processes"):
        run(num_processes=value, process_id=0, coordinator_address="h:1")


def test_process_id_out_of_range_message():
    with pytest.raises(ValueError) as info:
        run(num_processes=4, process_id=4, coordinator_address="h:1")
    assert str(info.value) == "process_id=4 is out of range for num_processes=4: process ids run from 0 to 3."


def test_negative_process_id():
    with pytest.raises(ValueError, match="process_id=-1 is out of range"):
        run(num_processes=4, process_id=-1, coordinator_address="h:1")


def test_process_id_out_of_range_names_environment_sources():
    with pytest.raises(ValueError, match=r"process_id=9 \(from JAX_PROCESS_ID\)"):
        run({"JAX_PROCESS_ID": "9", "JAX_NUM_PROCESSES": "2", "JAX_COORDINATOR_ADDRESS": "h:1"})


def test_process_id_without_num_processes():
    with pytest.raises(ValueError, match="process_id=1 was given but num_processes is unknown.*MESHAX_NUM_PROCESSES"):
        run(process_id=1, coordinator_address="h:1")


def test_num_processes_without_process_id():
    with pytest.raises(ValueError, match="num_processes=2 was given but process_id is unknown.*MESHAX_PROCESS_ID"):
        run(num_processes=2, coordinator_address="h:1")


def test_coordinator_without_counts():
    with pytest.raises(ValueError, match="without num_processes and process_id"):
        run(coordinator_address="h:1")


def test_multi_process_needs_coordinator():
    with pytest.raises(ValueError, match="coordinator_address='host:port' or set MESHAX_COORDINATOR_ADDRESS"):
        run(num_processes=2, process_id=0)


@pytest.mark.parametrize("address", ["localhost", "host:abc", "host:70000", "host:0", ":80", "a b:1",
                                     "::1:80", "[::1", "[::1]x"])
def test_malformed_coordinator_address(address):
    with pytest.raises(ValueError, match="coordinator_address"):
        run(coordinator_address=address, num_processes=2, process_id=0)


def test_malformed_address_from_environment_names_variable():
    env = {"MESHAX_COORDINATOR_ADDRESS": "localhost", "MESHAX_NUM_PROCESSES": "2", "MESHAX_PROCESS_ID": "0"}
    with pytest.raises(ValueError, match=r"'localhost' \(from MESHAX_COORDINATOR_ADDRESS\) has no port"):
        run(env)


@pytest.mark.parametrize("ids", [[-1], ["0"], 1.5])
def test_bad_local_device_ids(ids):
    with pytest.raises(ValueError, match="local_device_ids"):
        run(local_device_ids=ids)


@pytest.mark.parametrize("env, kwargs", [
    ({}, {}),
    (HYDRA, {}),
    (SLURM_STEP, {}),
    ({"PMIX_RANK": "0"}, {}),
    ({"MESHAX_NUM_PROCESSES": "2", "MESHAX_PROCESS_ID": "0"}, {"coordinator_address": "h:1"}),
])
def test_descriptions_are_one_meshax_line(env, kwargs):
    check_description(run(env, **kwargs))
