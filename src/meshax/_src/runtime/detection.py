"""Decide the coordinator address, process count and process id for `distributed.initialize`.

Sources, strongest first: the arguments, the MESHAX_*/JAX_* environment variables, then
the cluster detectors (an MPI launcher, a Slurm job step, a Kubernetes indexed Job or
JobSet). Each source fills only the fields that are still unknown.
"""
from __future__ import annotations

import itertools
import logging
import operator
import os
import re
import socket
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

logger = logging.getLogger(__name__)

SLURM_PORT_BASE = 61440
KUBERNETES_PORT = 55527

_ENV_NAMES = {
    "coordinator_address": ("MESHAX_COORDINATOR_ADDRESS", "JAX_COORDINATOR_ADDRESS"),
    "num_processes": ("MESHAX_NUM_PROCESSES", "JAX_NUM_PROCESSES"),
    "process_id": ("MESHAX_PROCESS_ID", "JAX_PROCESS_ID"),
    "local_device_ids": ("MESHAX_LOCAL_DEVICE_IDS", "JAX_LOCAL_DEVICE_IDS"),
}
_PORT_ENV_NAMES = ("MESHAX_COORDINATOR_PORT", "JAX_COORDINATOR_PORT")
_SLURM_STEP_VARS = (
    "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NODELIST",
    "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID",
)
_KUBERNETES_VARS = ("KUBERNETES_SERVICE_HOST", "JOB_COMPLETION_INDEX")


@dataclass
class ClusterSpec:
    """Where this process stands in the job, and how that was found out."""

    coordinator_address: str | None   # 'host:port'
    num_processes: int | None
    process_id: int | None
    local_device_ids: list[int] | None
    launcher_pmi: bool  # started by mpiexec/srun/Open MPI: initialise MPI with the launcher's PMI
    method: str         # 'explicit', 'env', 'mpi', 'slurm', 'kubernetes' or 'single'
    description: str    # one human line saying what was found


class ProcessIdOutOfRange(ValueError):
    """process_id is not in range(num_processes); `coordinator_address` is where the job it meant to join is."""

    def __init__(self, message: str, coordinator_address: str | None) -> None:
        super().__init__(message)
        self.coordinator_address = coordinator_address


class _Absent(Exception):
    """Raised by a detector whose cluster environment is not present; the message says why."""


@dataclass
class _Context:
    """The process's environment and host names; the names are looked up only when needed."""

    environ: Mapping[str, str]
    given_hostname: str | None = None
    given_fqdn: str | None = None

    @property
    def hostname(self) -> str:
        return self.given_hostname if self.given_hostname is not None else socket.gethostname()

    @property
    def fqdn(self) -> str:
        return self.given_fqdn if self.given_fqdn is not None else socket.getfqdn()

    def get(self, name: str) -> str | None:
        """The variable's value with surrounding blanks removed; None when unset or empty."""
        value = self.environ.get(name, "").strip()
        return value or None

    def first(self, names: tuple[str, ...]) -> tuple[str, str] | None:
        """(name, value) of the first of `names` that is set."""
        for name in names:
            value = self.get(name)
            if value is not None:
                return name, value
        return None

    def get_int(self, name: str) -> int | None:
        """The variable as an int, None when unset; a non-integer raises ValueError naming it."""
        value = self.get(name)
        return None if value is None else _parse_int(value, name)


@dataclass
class _Draft:
    """The fields being filled, where each value came from, and what was detected."""

    values: dict[str, Any] = field(default_factory=lambda: dict.fromkeys(_ENV_NAMES))
    origins: dict[str, tuple[str, str]] = field(default_factory=dict)  # field -> (method, label)
    detected: dict[str, str] = field(default_factory=dict)  # method -> phrase for the description
    launcher_pmi: bool = False
    notes: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def fill(self, name: str, value: Any, method: str, label: str) -> None:
        """Set field `name` unless a stronger source already did."""
        if self.values[name] is None and value is not None:
            self.values[name] = value
            self.origins[name] = (method, label)

    def named(self, name: str) -> str:
        """'name=value', plus the value's source unless it was an argument to initialize()."""
        method, label = self.origins[name]
        suffix = "" if method == "explicit" else f" (from {label})"
        return f"{name}={self.values[name]!r}{suffix}"


# -- parsing helpers -------------------------------------------------------------------

def _parse_int(text: str, name: str) -> int:
    if re.fullmatch(r"[+-]?[0-9]+", text) is None:
        raise ValueError(f"{name}={text!r} is not an integer; set it to a whole number.")
    return int(text)


def _as_int(value: Any, name: str) -> int:
    """An int argument (NumPy integers accepted; bools and strings refused)."""
    if isinstance(value, bool):
        raise ValueError(f"{name}={value!r} is not an integer; pass an int.")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{name}={value!r} is not an integer; pass an int.") from None


def _parse_device_ids(text: str, name: str) -> list[int]:
    return [_parse_int(part.strip(), name) for part in text.split(",") if part.strip()]


def _as_device_ids(value: Any) -> list[int]:
    """local_device_ids given as one int or a sequence of ints."""
    if isinstance(value, Iterable) and not isinstance(value, str):
        return [_as_int(v, "local_device_ids") for v in value]
    return [_as_int(value, "local_device_ids")]


def split_address(address: str) -> tuple[str, str | None]:
    """('host', 'port' or None) of 'host:port', '[ipv6]:port', 'host' or '[ipv6]'.

    A malformed host part (empty, blanks, or a bare IPv6 address) raises ValueError.
    """
    if address.startswith("["):
        host, closed, rest = address[1:].partition("]")
        if closed and (not rest or rest.startswith(":")):
            return f"[{host}]" if host else "", rest[1:] if rest else None
        host = ""
    elif address.count(":") > 1:
        host = ""
    else:
        host, colon, port = address.partition(":")
        if host and not any(c.isspace() for c in host):
            return host, port if colon else None
    raise ValueError(
        f"coordinator_address={address!r} is malformed; give it as 'host:port', "
        "e.g. 'node001:1234' or '[::1]:1234'."
    )


def _valid_port(text: str) -> bool:
    return re.fullmatch(r"[0-9]+", text) is not None and 1 <= int(text) <= 65535


def parse_hostlist(nodelist: str) -> list[str]:
    """Expand a Slurm hostlist: 'node[001-003],h2' -> ['node001', 'node002', 'node003', 'h2']."""
    hosts: list[str] = []
    for entry in re.split(r",(?![^\[]*\])", nodelist):  # commas outside brackets
        pieces = re.split(r"\[([^\]]*)\]", entry)  # literal, ranges, literal, ranges, ..., literal
        if not entry.strip() or any("[" in p or "]" in p for p in pieces[::2]):
            raise ValueError(f"SLURM_STEP_NODELIST={nodelist!r} is not a valid Slurm hostlist.")
        choices = [[p] if i % 2 == 0 else _expand_ranges(p, nodelist) for i, p in enumerate(pieces)]
        hosts.extend("".join(parts) for parts in itertools.product(*choices))
    return hosts


def _expand_ranges(ranges: str, nodelist: str) -> list[str]:
    """'001-003,7' -> ['001', '002', '003', '7'], keeping each range's zero padding."""
    out: list[str] = []
    for item in ranges.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", item)
        if match is None or (match[2] is not None and int(match[2]) < int(match[1])):
            raise ValueError(f"SLURM_STEP_NODELIST={nodelist!r} has a bad range {item!r}.")
        start, stop = match[1], match[2] or match[1]
        out.extend(str(n).zfill(len(start)) for n in range(int(start), int(stop) + 1))
    return out


# -- sources ---------------------------------------------------------------------------

def _fill_from_arguments(draft: _Draft, args: dict[str, Any]) -> None:
    normalise: dict[str, Callable[[Any], Any]] = {
        "coordinator_address": str,
        "num_processes": lambda v: _as_int(v, "num_processes"),
        "process_id": lambda v: _as_int(v, "process_id"),
        "local_device_ids": _as_device_ids,
    }
    for name, value in args.items():
        if value is not None:
            draft.fill(name, normalise[name](value), "explicit", "initialize() argument")


def _fill_from_environment(draft: _Draft, ctx: _Context) -> None:
    parse: dict[str, Callable[[str, str], Any]] = {
        "coordinator_address": lambda text, _: text,
        "num_processes": _parse_int,
        "process_id": _parse_int,
        "local_device_ids": _parse_device_ids,
    }
    for name, env_names in _ENV_NAMES.items():
        found = ctx.first(env_names)
        if found is not None and draft[name] is None:  # an overridden variable is not even parsed
            env_name, text = found
            draft.fill(name, parse[name](text, env_name), "env", env_name)


def _mpi_launch(ctx: _Context) -> tuple[str, str, str | None]:
    """(phrase, rank variable, size variable or None) of the MPI launcher that started us."""
    if ctx.get("OMPI_COMM_WORLD_RANK") and ctx.get("OMPI_COMM_WORLD_SIZE"):
        return "an Open MPI launch (mpirun)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"
    if ctx.get("PMI_RANK") and ctx.get("PMI_SIZE") and (ctx.get("PMI_FD") or ctx.get("PMI_PORT")):
        if ctx.get("SLURM_STEP_ID") and not ctx.get("MPI_LOCALNRANKS"):
            return "an srun launch (PMI-2)", "PMI_RANK", "PMI_SIZE"
        if ctx.get("PMI_FD"):
            return "an mpiexec launch (MPICH hydra)", "PMI_RANK", "PMI_SIZE"
        return "a PMI-2 launch (PMI_PORT)", "PMI_RANK", "PMI_SIZE"
    if ctx.get("PMIX_RANK"):
        return "a PMIx launch", "PMIX_RANK", None
    raise _Absent(
        "no MPI launcher started this process (none of PMI_RANK+PMI_SIZE+PMI_FD/PMI_PORT, "
        "OMPI_COMM_WORLD_RANK+OMPI_COMM_WORLD_SIZE or PMIX_RANK is set)"
    )


def _detect_mpi(draft: _Draft, ctx: _Context) -> None:
    """A process started by mpiexec, srun or Open MPI: its rank and size come from the launcher."""
    phrase, rank_var, size_var = _mpi_launch(ctx)
    launcher = {"process_id": (rank_var, ctx.get_int(rank_var))}
    if size_var is not None:
        launcher["num_processes"] = (size_var, ctx.get_int(size_var))
    for name, (var, value) in launcher.items():
        if draft[name] is not None and draft[name] != value:
            raise ValueError(
                f"{draft.named(name)} contradicts the MPI launcher, which set {var}={value}; "
                f"drop {name} or start the job without mpiexec/srun."
            )
        draft.fill(name, value, "mpi", var)
    draft.launcher_pmi = True
    draft.detected["mpi"] = phrase


def _detect_slurm(draft: _Draft, ctx: _Context) -> None:
    """A Slurm job step started by srun: coordinator on the step's first node."""
    missing = [name for name in _SLURM_STEP_VARS if ctx.get(name) is None]
    if len(missing) == len(_SLURM_STEP_VARS):
        raise _Absent("this is not a Slurm job step (no SLURM_* variable is set)")
    if missing:
        raise _Absent(
            f"this is not a Slurm job step: {', '.join(missing)} not set, as in a shell inside "
            "an allocation rather than a task started by srun"
        )
    job_id = ctx.get_int("SLURM_JOB_ID")
    if draft["coordinator_address"] is None:
        host = parse_hostlist(ctx.get("SLURM_STEP_NODELIST"))[0]
        port = job_id % 4096 + SLURM_PORT_BASE
        draft.fill("coordinator_address", f"{host}:{port}", "slurm", "SLURM_STEP_NODELIST")
    draft.fill("num_processes", ctx.get_int("SLURM_STEP_NUM_TASKS"), "slurm", "SLURM_STEP_NUM_TASKS")
    draft.fill("process_id", ctx.get_int("SLURM_PROCID"), "slurm", "SLURM_PROCID")
    draft.detected["slurm"] = "a Slurm job step"


def _detect_kubernetes(draft: _Draft, ctx: _Context) -> None:
    """A pod of an indexed Job or a JobSet; the process count must come from the environment."""
    missing = [name for name in _KUBERNETES_VARS if ctx.get(name) is None]
    if missing:
        raise _Absent(
            f"this is not a pod of a Kubernetes indexed Job: {', '.join(missing)} not set "
            "(the Job needs completionMode: Indexed)"
        )
    index = ctx.get_int("JOB_COMPLETION_INDEX")
    jobset = ctx.get("JOBSET_NAME")
    kind = f"a Kubernetes JobSet ({jobset})" if jobset else "a Kubernetes indexed Job"
    if draft["num_processes"] is None:
        raise ValueError(
            f"meshax detected {kind} but not its process count; set MESHAX_NUM_PROCESSES "
            "in the pod spec to the number of pods."
        )
    if draft["coordinator_address"] is None:
        host = _jobset_coordinator(ctx, jobset, index) if jobset else _job_coordinator(ctx, index)
        draft.fill("coordinator_address", f"{host}:{KUBERNETES_PORT}", "kubernetes", "the pod hostname")
    if draft["process_id"] is None:
        process_id = _jobset_process_id(ctx, index) if jobset else index
        draft.fill("process_id", process_id, "kubernetes", "JOB_COMPLETION_INDEX")
    draft.detected["kubernetes"] = kind


def _pod_subdomain(ctx: _Context, short_host: str) -> str | None:
    """The headless-service subdomain in an fqdn '<host>.<subdomain>.<namespace>.svc...'."""
    labels = ctx.fqdn.split(".")
    if len(labels) >= 4 and labels[0] == short_host and labels[3] == "svc":
        return labels[1]
    return None


def _job_coordinator(ctx: _Context, index: int) -> str:
    """'<job>-0.<subdomain>' for the pod '<job>-<index>' of an indexed Job."""
    short = ctx.hostname.split(".")[0]
    suffix = f"-{index}"
    if not short.endswith(suffix) or len(short) == len(suffix):
        raise ValueError(
            f"pod hostname {short!r} is not '<job>{suffix}' as in an indexed Job; "
            "set MESHAX_COORDINATOR_ADDRESS to the address of the pod with index 0."
        )
    host = f"{short[:-len(suffix)]}-0"
    subdomain = _pod_subdomain(ctx, short)
    return f"{host}.{subdomain}" if subdomain else host


def _jobset_hostname(ctx: _Context, index: int) -> tuple[str, int]:
    """('<jobset>-<replicatedjob>', job index) from the hostname '<...>-<jobindex>-<index>'."""
    short = ctx.hostname.split(".")[0]
    match = re.fullmatch(rf"(.+)-(\d+)-{index}", short)
    if match is None:
        raise ValueError(
            f"pod hostname {short!r} is not '<jobset>-<replicatedjob>-<jobindex>-{index}' as in "
            "a JobSet; set MESHAX_COORDINATOR_ADDRESS and MESHAX_PROCESS_ID."
        )
    return match[1], int(match[2])


def _jobset_coordinator(ctx: _Context, jobset: str, index: int) -> str:
    """'<jobset>-<replicatedjob>-0-0.<subdomain>'; the subdomain defaults to the JobSet name."""
    prefix, _ = _jobset_hostname(ctx, index)
    subdomain = _pod_subdomain(ctx, ctx.hostname.split(".")[0]) or jobset
    return f"{prefix}-0-0.{subdomain}"


def _jobset_process_id(ctx: _Context, index: int) -> int:
    """JOB_INDEX * processes per job + JOB_COMPLETION_INDEX."""
    job_index = ctx.get_int("JOB_INDEX")
    if job_index is None:
        job_index = _jobset_hostname(ctx, index)[1]
    if job_index == 0:
        return index
    per_job = ctx.get_int("MESHAX_PROCESSES_PER_JOB")
    if per_job is None:
        raise ValueError(
            f"JobSet job {job_index} cannot number its processes without knowing how many pods "
            "each job has; set MESHAX_PROCESSES_PER_JOB in the pod spec."
        )
    if not 0 <= index < per_job:
        raise ValueError(
            f"JOB_COMPLETION_INDEX={index} is out of range for MESHAX_PROCESSES_PER_JOB={per_job}; "
            "set MESHAX_PROCESSES_PER_JOB to the number of pods per job."
        )
    return job_index * per_job + index


_DETECTORS: dict[str, Callable[[_Draft, _Context], None]] = {
    "mpi": _detect_mpi,
    "slurm": _detect_slurm,
    "kubernetes": _detect_kubernetes,
}
_ALIASES = {"ompi": "mpi", "mpi4py": "mpi"}


def _run_detectors(draft: _Draft, ctx: _Context, method: str | None) -> None:
    """Run every detector in order, or only the named one (which must then find its cluster)."""
    if method == "deactivate":
        return
    if method is None:
        for name, detect in _DETECTORS.items():
            try:
                detect(draft, ctx)
            except _Absent as why:
                logger.debug("meshax: skipping %s detection: %s", name, why)
        return
    name = _ALIASES.get(method, method)
    if name not in _DETECTORS:
        valid = ", ".join(repr(n) for n in [*_DETECTORS, *_ALIASES, "deactivate"])
        raise ValueError(f"cluster_detection_method={method!r} is unknown; use one of {valid}.")
    try:
        _DETECTORS[name](draft, ctx)
    except _Absent as why:
        raise ValueError(f"cluster_detection_method={method!r} was requested, but {why}.") from None


# -- the result ------------------------------------------------------------------------

def _apply_port_override(draft: _Draft, ctx: _Context) -> None:
    found = ctx.first(_PORT_ENV_NAMES)
    if found is None or draft["coordinator_address"] is None:
        return
    name, port = found
    if not _valid_port(port):
        raise ValueError(f"{name}={port!r} is not a port number; set it to a number from 1 to 65535.")
    host, _ = split_address(draft["coordinator_address"])
    draft.values["coordinator_address"] = f"{host}:{port}"
    draft.notes.append(f"port from {name}")


def _complete_and_validate(draft: _Draft) -> None:
    """Fill the single-process defaults and refuse inconsistent values."""
    num, pid, address = draft["num_processes"], draft["process_id"], draft["coordinator_address"]
    if num is not None and num < 1:
        raise ValueError(f"{draft.named('num_processes')} is invalid: it must be an int >= 1.")
    if num is None and pid is None:
        if address is not None:
            raise ValueError(
                f"{draft.named('coordinator_address')} was given without num_processes and "
                "process_id; pass both, or set MESHAX_NUM_PROCESSES and MESHAX_PROCESS_ID."
            )
        draft.fill("num_processes", 1, "single", "default")
        draft.fill("process_id", 0, "single", "default")
    elif pid is None:
        if num != 1:
            raise ValueError(
                f"{draft.named('num_processes')} was given but process_id is unknown; "
                "pass process_id or set MESHAX_PROCESS_ID."
            )
        draft.fill("process_id", 0, draft.origins["num_processes"][0], "default")
    elif num is None and not draft.launcher_pmi:
        raise ValueError(
            f"{draft.named('process_id')} was given but num_processes is unknown; "
            "pass num_processes or set MESHAX_NUM_PROCESSES."
        )
    elif num is not None and not 0 <= pid < num:
        raise ProcessIdOutOfRange(
            f"{draft.named('process_id')} is out of range for {draft.named('num_processes')}: "
            f"process ids run from 0 to {num - 1}.", address
        )
    if address is not None:
        _validate_address(draft)
    elif draft["num_processes"] not in (None, 1) and not draft.launcher_pmi:
        raise ValueError(
            f"{draft.named('num_processes')} needs a coordinator; pass coordinator_address="
            "'host:port' or set MESHAX_COORDINATOR_ADDRESS."
        )
    for device in draft["local_device_ids"] or ():
        if device < 0:
            raise ValueError(f"{draft.named('local_device_ids')} is invalid: ids must be >= 0.")


def _validate_address(draft: _Draft) -> None:
    _, port = split_address(draft["coordinator_address"])
    if port is None:
        raise ValueError(
            f"{draft.named('coordinator_address')} has no port; give it as 'host:port', "
            "e.g. 'localhost:1234'."
        )
    if not _valid_port(port):
        raise ValueError(
            f"{draft.named('coordinator_address')} is malformed: the port must be a number "
            "from 1 to 65535, as in 'host:1234'."
        )


def _main_method(draft: _Draft) -> str:
    """The launcher when there is one, else the source of this process's id."""
    return "mpi" if draft.launcher_pmi else draft.origins["process_id"][0]


def _describe(draft: _Draft, method: str) -> str:
    headline = {
        "explicit": "configured by initialize() arguments",
        "env": "configured by environment variables",
        "single": "no cluster detected, running a single process",
    }.get(method) or f"detected {draft.detected[method]}"
    num, pid = draft["num_processes"], draft["process_id"]
    count = f"of {num}" if num is not None else "(process count to come from MPI)"
    line = f"meshax: {headline}: process {pid} {count}"
    if draft["coordinator_address"] is not None:
        line += f", coordinator {draft['coordinator_address']}"
    elif draft.launcher_pmi:
        line += "; coordinator to be chosen by process 0"
    if draft["local_device_ids"] is not None:
        line += f", local devices {draft['local_device_ids']}"
    sources = [
        f"{name} from {label}" for name, (source, label) in draft.origins.items()
        if source != method and label != "default"
    ]
    if sources or draft.notes:
        line += f" ({'; '.join(sources + draft.notes)})"
    return line


def resolve(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    local_device_ids: int | list[int] | None = None,
    cluster_detection_method: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    hostname: str | None = None,
    fqdn: str | None = None,
) -> ClusterSpec:
    """Combine the arguments, the environment and cluster detection into a `ClusterSpec`.

    `environ`, `hostname` and `fqdn` default to the real ones (`os.environ`,
    `socket.gethostname()`, `socket.getfqdn()`). Raises ValueError on inconsistent input.
    """
    ctx = _Context(os.environ if environ is None else environ, hostname, fqdn)
    draft = _Draft()
    _fill_from_arguments(draft, {
        "coordinator_address": coordinator_address,
        "num_processes": num_processes,
        "process_id": process_id,
        "local_device_ids": local_device_ids,
    })
    _fill_from_environment(draft, ctx)
    _run_detectors(draft, ctx, cluster_detection_method)
    _apply_port_override(draft, ctx)
    _complete_and_validate(draft)
    method = _main_method(draft)
    spec = ClusterSpec(
        coordinator_address=draft["coordinator_address"],
        num_processes=draft["num_processes"],
        process_id=draft["process_id"],
        local_device_ids=draft["local_device_ids"],
        launcher_pmi=draft.launcher_pmi,
        method=method,
        description=_describe(draft, method),
    )
    logger.debug("%s", spec.description)
    return spec


def launched_as(environ: Mapping[str, str] | None = None) -> tuple[int, str] | None:
    """(process count, variable naming it) when a launcher started this process as one of several,
    else None: `meshax launch`/MESHAX_*/JAX_* variables, mpiexec (PMI, Open MPI) or an srun task."""
    env = os.environ if environ is None else environ
    names = ["MESHAX_NUM_PROCESSES", "JAX_NUM_PROCESSES", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE"]
    if env.get("SLURM_STEP_ID") and env.get("SLURM_PROCID"):  # a task of a job step, not the batch script
        names += ["SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"]
    for name in names:
        text = env.get(name, "").strip()
        if text.isdigit() and int(text) > 1:
            return int(text), name
    return None
