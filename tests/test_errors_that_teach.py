"""Errors and warnings a newcomer meets first: too few devices for a mesh, and a launched process that
forgot `distributed.initialize()`. Real processes; each message must name its fix."""
from __future__ import annotations

import collections
import textwrap

import pytest

from multiprocess import MPIEXEC, PYTHON, child_env, collect, lines_by_process, start

TIMEOUT = 120
WARNING = "UserWarning: meshax: this process was started as one of"

USES_DEVICES_WITHOUT_INITIALIZE = """\
import meshax as jax
import meshax.numpy as jnp
x = jnp.arange(8.0)                       # the first use of a device
print("sum", float(jnp.sum(x * 2)), jax.process_count(), len(jax.devices()))
"""


def write(tmp_path, source: str, name: str = "prog.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def run(args: list[str], env: dict[str, str] | None = None):
    return collect([start(args, env or child_env())], TIMEOUT)[0]


# -- too few devices ------------------------------------------------------------------------

def test_make_mesh_with_too_few_devices_names_every_fix(tmp_path):
    prog = write(tmp_path, """\
        import meshax as jax
        from meshax.experimental import mesh_utils
        for make in (lambda: jax.make_mesh((4, 2), ("a", "b")), lambda: mesh_utils.create_device_mesh((4, 2))):
            try:
                make()
            except ValueError as error:
                print(error)
    """)
    result = run([PYTHON, prog], child_env(cpu_devices=2))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("make_mesh: axis sizes (4, 2) hold 8 devices but 2 devices were given;")
    assert lines[1].startswith("Number of devices 2 must equal the product of mesh_shape (4, 2);")
    for line in lines:
        assert "give each process 8 CPU devices for 8 in all (this job has 1 process(es) with 2 device(s) each)" in line
        assert "`meshax launch --cpu-devices 8 ...`" in line
        assert "JAX_NUM_CPU_DEVICES=8" in line
        assert "jax.config.update('jax_num_cpu_devices', 8)" in line


def test_the_config_fix_the_error_names_works(tmp_path):
    prog = write(tmp_path, """\
        import meshax as jax
        jax.config.update('jax_num_cpu_devices', 8)
        print(jax.make_mesh((4, 2), ("a", "b")).shape)
    """)
    result = run([PYTHON, prog])
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{collections.OrderedDict(a=4, b=2)!r}\n"  # Python's repr (3.12 changed it)


def test_too_few_devices_across_processes_asks_per_process(tmp_path):
    prog = write(tmp_path, """\
        import meshax as jax
        jax.distributed.initialize()
        try:
            jax.make_mesh((4, 4), ("a", "b"))
        except ValueError as error:
            print(str(error).split("; ", 1)[1])
    """)
    result = run([PYTHON, "-m", "meshax", "launch", "-n", "2", "--cpu-devices", "2", prog])
    assert result.returncode == 0, result.stderr
    expected = ("make the product of the axis sizes equal the number of devices, or give each process 8 CPU devices "
                "for 16 in all (this job has 2 process(es) with 2 device(s) each): `meshax launch --cpu-devices 8 ...`, "
                "JAX_NUM_CPU_DEVICES=8 in every process's environment, or jax.config.update('jax_num_cpu_devices', 8) "
                "right after `import meshax as jax`.")
    assert lines_by_process(result.stdout) == {0: [expected], 1: [expected]}


# -- launched as several processes without initialize() --------------------------------------

def warnings_in(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if WARNING in line]


def test_launcher_children_without_initialize_warn_once_each(tmp_path):
    prog = write(tmp_path, USES_DEVICES_WITHOUT_INITIALIZE)
    result = run([PYTHON, "-m", "meshax", "launch", "-n", "2", "--cpu-devices", "2", prog])
    assert result.returncode == 0, result.stderr
    assert lines_by_process(result.stdout) == {0: ["sum 56.0 1 2"], 1: ["sum 56.0 1 2"]}
    found = warnings_in(result.stderr)
    assert sorted(line[:3] for line in found) == ["[0]", "[1]"], result.stderr  # once per process
    for line in found:
        assert f"{prog}:3: UserWarning" in line  # points at the user's line, not at meshax
        assert "(MESHAX_NUM_PROCESSES=2)" in line
        assert "runs alone on its own 2 device(s)" in line
        assert "call meshax.distributed.initialize()" in line


def test_no_warning_when_initialize_was_called(tmp_path):
    prog = write(tmp_path, "import meshax\nmeshax.distributed.initialize()\n" + USES_DEVICES_WITHOUT_INITIALIZE)
    result = run([PYTHON, "-m", "meshax", "launch", "-n", "2", "--cpu-devices", "2", prog],
                 child_env(PYTHONWARNINGS="error::UserWarning"))
    assert result.returncode == 0, result.stderr
    assert lines_by_process(result.stdout) == {0: ["sum 56.0 2 4"], 1: ["sum 56.0 2 4"]}
    assert "UserWarning" not in result.stderr


def test_no_warning_for_a_single_process(tmp_path):
    prog = write(tmp_path, USES_DEVICES_WITHOUT_INITIALIZE)
    for args in ([PYTHON, prog], [PYTHON, "-m", "meshax", "launch", "-n", "1", prog]):
        result = run(args, child_env(PYTHONWARNINGS="error::UserWarning"))
        assert result.returncode == 0, result.stderr
        assert "UserWarning" not in result.stderr


def test_mpiexec_ranks_without_initialize_warn(tmp_path):
    prog = write(tmp_path, USES_DEVICES_WITHOUT_INITIALIZE)
    result = run([MPIEXEC, "-n", "2", PYTHON, prog])
    assert result.returncode == 0, result.stderr
    found = warnings_in(result.stderr)
    assert len(found) == 2 and all("(PMI_SIZE=2)" in line for line in found), result.stderr


@pytest.mark.parametrize(("env", "variable"), [
    ({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "4"},
     "SLURM_STEP_NUM_TASKS=4"),
    ({"OMPI_COMM_WORLD_SIZE": "3", "OMPI_COMM_WORLD_RANK": "0"}, "OMPI_COMM_WORLD_SIZE=3"),
])
def test_other_launchers_environments_warn(tmp_path, env, variable):
    prog = write(tmp_path, USES_DEVICES_WITHOUT_INITIALIZE)
    result = run([PYTHON, prog], child_env(**env))
    assert result.returncode == 0, result.stderr
    found = warnings_in(result.stderr)
    assert len(found) == 1 and f"({variable})" in found[0], result.stderr


def test_a_slurm_batch_script_is_not_a_launched_task(tmp_path):
    prog = write(tmp_path, USES_DEVICES_WITHOUT_INITIALIZE)
    result = run([PYTHON, "-W", "error::UserWarning", prog], child_env(SLURM_JOB_ID="7", SLURM_NTASKS="8"))
    assert result.returncode == 0, result.stderr


# -- values that are not arrays, axes that are not in the mesh --------------------------------------------------

def _raised(call) -> BaseException:
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the test inspects it
        return error
    raise AssertionError("no error")


def _this_line_minus(n: int) -> str:
    import sys
    frame = sys._getframe(1)
    return f"{__file__}:{frame.f_lineno - n}"


def test_device_put_of_a_string_says_what_jax_says_at_the_users_line():
    import jax
    import meshax

    theirs = _raised(lambda: jax.device_put("hello"))
    ours = _raised(lambda: meshax.device_put("hello"))
    site = _this_line_minus(1)
    assert type(ours) is type(theirs) is TypeError
    assert str(ours).startswith(str(theirs)), (ours, theirs)  # "Argument 'hello' of type <class 'str'> is not..."
    assert site in str(ours) and "device_put" in str(ours) and "dtype_of" not in str(ours)
    ours = _raised(lambda: meshax.device_put({"a": b"x"}))
    assert str(ours).startswith("Argument b'x' of type <class 'bytes'> is not a valid JAX type"), ours


@pytest.mark.parametrize("make", ["PRNGKey", "key"])
def test_a_string_seed_says_what_jax_says_at_the_users_line(make):
    import jax
    import meshax

    theirs = _raised(lambda: getattr(jax.random, make)("x"))
    ours = _raised(lambda: getattr(meshax.random, make)("x"))
    site = _this_line_minus(1)
    assert type(ours) is type(theirs) is TypeError
    assert str(ours).startswith(str(theirs)), (ours, theirs)  # "Value 'x' with dtype <U1 is not a valid JAX..."
    assert site in str(ours) and "must be an integer" in str(ours) and "canonicalize_dtype" not in str(ours)


@pytest.mark.parametrize("jitted", [False, True])
@pytest.mark.parametrize("which", ["in_specs", "out_specs"])
def test_a_spec_naming_an_axis_outside_the_mesh_says_so_at_the_users_line(which, jitted):
    import meshax
    import meshax.numpy as jnp
    from meshax.sharding import PartitionSpec as P

    mesh = meshax.make_mesh((1,), ("x",))
    specs = {"in_specs": P("x"), "out_specs": P("x"), which: P("zz")}
    mapped = meshax.shard_map(lambda a: a * 2, mesh=mesh, **specs)
    call = meshax.jit(mapped) if jitted else mapped
    error = _raised(lambda: call(jnp.arange(4.0)))
    site = _this_line_minus(1)
    assert isinstance(error, ValueError)
    assert str(error) == (f"shard_map {which} PartitionSpec('zz',) (at {site} in <lambda>) names axis 'zz', which is "
                          "not in the mesh: its axes are ('x',).")
    # a correct spec still works, and an axis of the mesh left out of axis_names is named as such
    assert jnp.array_equal(meshax.shard_map(lambda a: a * 2, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(
        jnp.arange(4.0)), jnp.arange(4.0) * 2)
    mesh2 = meshax.make_mesh((1, 1), ("x", "y"))
    partial = meshax.shard_map(lambda a: a, mesh=mesh2, axis_names={"x"}, **{**specs, which: P("y")})
    assert "names the mesh axis 'y', which is not in axis_names=('x',)" in str(_raised(lambda: partial(jnp.ones(4))))
