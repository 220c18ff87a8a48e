"""The ``meshax`` command line: its parser (``launch``, ``info``, ``--version``) and ``meshax info``."""

from __future__ import annotations

import argparse
import os
import platform
import re
import socket
import sys

PROG = "meshax"
TIMEOUT_EXIT_CODE = 124  # Same as coreutils' `timeout`.

_LAUNCH_USAGE = (
    f"{PROG} launch -n N [--cpu-devices K] [--port P | --coordinator HOST:PORT] "
    "[--timeout SECONDS] [--grace SECONDS] [--as-jax] [--profile DIR] [--] [python] (script.py | -m module) "
    "[args ...]"
)

_EPILOG = """\
examples:
  meshax launch -n 4 --cpu-devices 2 train.py
  meshax launch -np 4 python train.py --lr 0.1       # mpiexec-style spelling
  meshax launch -n 2 --port 0 -- toy.py {process_id} {num_processes}
  meshax launch -n 4 -m mypackage.train
  meshax launch -n 2 --as-jax train.py               # unchanged JAX code: `import jax` is meshax
  meshax info                                        # versions, detected cluster, devices
"""

_LAUNCH_EPILOG = """\
examples:
  meshax launch -n 4 --cpu-devices 2 examples/toy.py {process_id} {num_processes}
  meshax launch -np 4 python examples/demo.py
  meshax launch --nproc-per-node 2 --port 0 -- examples/demo.py
  meshax launch -n 4 --timeout 600 -m mypackage.train --epochs 3
  meshax launch -n 2 --cpu-devices 4 --profile /tmp/prof train.py   # then open /tmp/prof/trace.json.gz

The program runs under this interpreter (%s); {process_id} and
{num_processes} in its arguments are replaced per process.
"""

# `python`, `python3`, `python3.11`, ... as the first word of the program (mpiexec style).
_PYTHON_NAME = re.compile(r"python(\d+(\.\d+)?)?")


# -- argument types ----------------------------------------------------------------------


def _number(text: str, kind: type[int] | type[float]) -> int | float:
    """``kind(text)`` with an argparse-friendly error."""
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _positive_int(text: str) -> int:
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _port(text: str) -> int:
    value = int(_number(text, int))
    if not 0 <= value < 65536:
        raise argparse.ArgumentTypeError(f"must be a port from 0 (any free port) to 65535, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = _number(text, float)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = _number(text, float)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _address(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return text


# -- the parser --------------------------------------------------------------------------


def _version() -> str:
    from meshax import __version__

    return f"{PROG} {__version__}"


def _add_launch(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    launch = commands.add_parser(
        "launch",
        usage=_LAUNCH_USAGE,
        help="run a program as N local meshax processes",
        description="Run N local copies of a Python program as one meshax job, stopping them "
        "all when one fails.",
        epilog=_LAUNCH_EPILOG % sys.executable,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    launch.add_argument(
        "-n", "--num-processes", "-np", "--nproc-per-node", dest="num_processes",
        type=_positive_int, required=True, metavar="N",
        help="number of processes to start (-np and --nproc-per-node are synonyms)",
    )
    launch.add_argument(
        "--cpu-devices", type=_positive_int, metavar="K",
        help="number of CPU devices per process (sets JAX_NUM_CPU_DEVICES in each)",
    )
    where = launch.add_mutually_exclusive_group()
    where.add_argument(
        "--port", type=_port, metavar="P",
        help="coordinator port on 127.0.0.1; 0 picks a free one and prints it",
    )
    where.add_argument(
        "--coordinator", type=_address, metavar="HOST:PORT",
        help="coordinator address (default: a free port on 127.0.0.1)",
    )
    launch.add_argument(
        "--timeout", type=_positive_float, metavar="SECONDS",
        help=f"kill all processes after this long and exit {TIMEOUT_EXIT_CODE}",
    )
    launch.add_argument(
        "--grace", type=_non_negative_float, default=5.0, metavar="SECONDS",
        help="after a process fails, how long the others may take to exit on "
        "their own before they are terminated (default: 5)",
    )
    launch.add_argument(
        "--as-jax", action="store_true",
        help="run unchanged JAX code: `import jax` (and every jax.X) is answered by meshax in each process "
        "(python -m meshax.as_jax)",
    )
    launch.add_argument(
        "--profile", metavar="DIR",
        help="trace every process from start to exit (meshax.profiler: each primitive on its device's track, "
        "MPI calls with their bytes and waits, jit compilation, annotations) and merge the traces into "
        "DIR/trace.json.gz, one pid per process (Chrome trace JSON: open it at ui.perfetto.dev or "
        "chrome://tracing); each process's own trace is kept in DIR/processes/",
    )
    # REMAINDER makes everything after `-m` belong to the child, like `python -m`.
    launch.add_argument(
        "-m", dest="module", nargs=argparse.REMAINDER,
        help="run a library module as a script, like python -m",
    )
    launch.add_argument("program", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return launch


def build_parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """Return the top-level parser and the ``launch`` subcommand parser."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="meshax command line tools: run multi-process meshax jobs on this machine "
        "and show what meshax sees.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    launch = _add_launch(commands)
    commands.add_parser(
        "info",
        help="print versions, the detected cluster environment and device counts",
        description="Print meshax's version, the cluster environment this process is in "
        "(meshax launcher, mpiexec/PMI, Slurm, Kubernetes or none), process and device counts, "
        "and the Python, NumPy, mpi4py and MPI library versions.",
    )
    return parser, launch


def _strip_interpreter(program: list[str], launch: argparse.ArgumentParser) -> list[str]:
    """Drop a leading ``python`` word (``-np 4 python x.py``); the children use our interpreter."""
    if not program or not _PYTHON_NAME.fullmatch(os.path.basename(program[0])):
        return program
    named = program[0]
    if os.sep in named and os.path.realpath(named) != os.path.realpath(sys.executable):
        launch.error(
            f"the program names the interpreter {named}, but meshax launch runs programs with its "
            f"own ({sys.executable}); drop {named} or run `{named} -m meshax launch ...`"
        )
    return program[1:]


def _program_argv(args: argparse.Namespace, launch: argparse.ArgumentParser) -> list[str]:
    """The child's argv after the interpreter, validated (errors exit with usage)."""
    if args.module is not None:
        if not args.module:
            launch.error("argument -m: expected a module name")
        return ["-m", *args.module, *args.program]
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    program = _strip_interpreter(program, launch)
    if program[:1] == ["-m"]:
        if len(program) < 2:
            launch.error("argument -m: expected a module name")
        return program
    if not program:
        launch.error("missing the script to run (script.py or -m module)")
    if not os.path.exists(program[0]):
        launch.error(f"script not found: {program[0]}")
    return program


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _apply_port(args: argparse.Namespace) -> None:
    """Turn ``--port P`` into ``args.coordinator``; ``--port 0`` picks a free port and prints it."""
    if args.port is None:
        return
    port = args.port or free_port()
    args.coordinator = f"127.0.0.1:{port}"
    if args.port == 0:
        print(f"{PROG}: coordinator on {args.coordinator}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse and validate the command line (usage errors, --help and --version raise SystemExit)."""
    parser, launch = build_parser()
    args = parser.parse_args(argv)
    if args.command == "launch":
        args.program = _program_argv(args, launch)
        if args.as_jax:
            args.program = ["-m", "meshax.as_jax", *args.program]
        _apply_port(args)
    return args


# -- meshax info -------------------------------------------------------------------------


def _cluster_lines() -> tuple[list[str], int | None]:
    """What initialize() would detect here, in a few lines, and the process count if known."""
    from ..runtime import detection

    try:
        spec = detection.resolve()
    except ValueError as error:
        return [f"cluster:     cannot be detected: {error}"], None
    if os.environ.get("MESHAX_LAUNCHER") == "1":
        kind = "meshax launcher (meshax launch)"
    else:
        kind = {
            "mpi": "mpiexec/srun (PMI)",
            "slurm": "Slurm job step",
            "kubernetes": "Kubernetes indexed Job/JobSet",
            "env": "MESHAX_*/JAX_* environment variables",
            "explicit": "initialize() arguments",
        }.get(spec.method, "none (a single process)")
    count = spec.num_processes if spec.num_processes is not None else "(from MPI)"
    return [
        f"cluster:     {kind}",
        f"process:     {spec.process_id} of {count}",
        f"coordinator: {spec.coordinator_address or 'none'}",
        f"detection:   {spec.description}",
    ], spec.num_processes


def _device_line(num_processes: int | None) -> str:
    from ..runtime.devices import local_device_count_from_env

    try:
        per_process = local_device_count_from_env()
    except ValueError as error:
        return f"devices:     {error}"
    total = f", {per_process * num_processes} in all" if num_processes is not None else ""
    return f"devices:     {per_process} CPU device(s) per process{total}"


def _mpi_lines() -> list[str]:
    try:
        import mpi4py

        from ..runtime.mpi import loaded_library

        library = loaded_library()
    except Exception as error:  # noqa: BLE001 - info reports every failure as text
        return [f"mpi4py:      unavailable ({type(error).__name__}: {error})"]
    return [f"mpi4py:      {mpi4py.__version__}", f"MPI library: {library}"]


def _compute_lines() -> list[str]:
    from ..interpreters import kernel_compiler
    from ..runtime import allocator, blas_threads, compute_pool, cpu_budget, denormals

    try:
        compute, threads = cpu_budget.describe(), cpu_budget.compute_threads()
    except ValueError as error:
        compute, threads = str(error), 1
    blas = blas_threads.quiet_idle_threads(compute_pool.blas_controller(), threads)
    return [f"compute:     {compute}", f"BLAS idle:   {blas}", f"memory:      {allocator.keep_freed_memory()}",
            f"kernels:     {kernel_compiler.describe()}", f"subnormals:  {denormals.describe()}"]


def info() -> int:
    """Print what ``meshax info`` shows; returns the exit code."""
    import numpy

    cluster, processes = _cluster_lines()
    lines = [
        _version(),
        *cluster,
        _device_line(processes),
        f"python:      {platform.python_version()} ({sys.executable})",
        f"numpy:       {numpy.__version__}",
        *_compute_lines(),
        *_mpi_lines(),
    ]
    print("\n".join(lines), flush=True)
    return 0
