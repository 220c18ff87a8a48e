"""The `jax` alias: `python -m meshax.as_jax`, `import meshax.as_jax` and `meshax launch --as-jax` make `import jax`
and every `jax.X` meshax's, in that process only. Each case runs in a fresh subprocess (the alias cannot be
installed here: this process imports the real jax as the test oracle)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from multiprocess import MPIEXEC, REPO, child_env, lines_by_process, start, collect

PYTHON = sys.executable
TIMEOUT = 120


def run_alias(code: str, *args: str, cwd: Path = REPO, devices: int = 4) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "meshax.as_jax", "-c", textwrap.dedent(code), *args], cwd=cwd,
                          env=child_env(devices), capture_output=True, text=True, timeout=TIMEOUT)


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_import_jax_is_meshax_with_jax_version():
    out = ok(run_alias("""
        import sys
        import jax, jax.numpy as jnp, jax.lax, jax.scipy.special, jax.extend.core, jax.interpreters.ad
        import meshax, meshax.numpy, meshax.lax
        assert jax.numpy is meshax.numpy and jax.lax is meshax.lax and sys.modules["jax.numpy"] is meshax.numpy
        assert jax.jit is meshax.jit and jax.Array is meshax.Array
        assert meshax.numpy.__name__ == "meshax.numpy" and meshax.numpy.__spec__.name == "meshax.numpy"
        assert meshax.__version__ != jax.__version__
        print(jax.__version__, jax.__version_info__, float(jnp.sum(jnp.arange(5.))), jax.device_count())
    """))
    assert out.split() == ["0.12.0.1", "(0,", "12,", "0,", "1)", "10.0", "4"]


def test_missing_module_and_name_fail_clearly_and_probes_still_work():
    out = ok(run_alias("""
        import jax
        try:
            import jax.experimental.jax2tf
        except ImportError as e:
            print(type(e).__name__, "|", e)
        try:
            from jax.experimental import jax2tf
        except ImportError as e:
            print("from-import", type(e).__name__)
        try:
            jax.interpreters.batching.batch_subtrace
        except AttributeError as e:
            print(type(e).__name__, "|", e)
        print(hasattr(jax, "no_such_name"), hasattr(jax.numpy, "cumsum"))
    """))
    lines = out.splitlines()
    assert lines[0] == ("JaxModuleNotImplemented | jax.experimental.jax2tf is not implemented in meshax yet (`import "
                        "jax` is answered by meshax in this process)")
    assert lines[1] == "from-import ImportError"
    assert lines[2] == ("NotImplementedInMeshax | jax.interpreters.batching.batch_subtrace is not implemented in "
                        "meshax yet")
    assert lines[3] == "False True"


def test_script_mode_sets_argv_path_and_main(tmp_path: Path):
    (tmp_path / "helper_mod.py").write_text("VALUE = 41\n")
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import sys, jax, helper_mod
        print(__name__, sys.argv, helper_mod.VALUE + 1, jax.__version__)
    """))
    result = subprocess.run([PYTHON, "-m", "meshax.as_jax", str(script), "--lr", "0.1"], cwd=REPO,
                            env=child_env(2), capture_output=True, text=True, timeout=TIMEOUT)
    assert ok(result).strip() == f"__main__ [{str(script)!r}, '--lr', '0.1'] 42 0.12.0.1"


def test_module_mode_and_import_hook_in_code(tmp_path: Path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text("import sys, jax\nprint(__name__, sys.argv[1:], jax.__version__)\n")
    result = subprocess.run([PYTHON, "-m", "meshax.as_jax", "-m", "pkg.train", "x"], cwd=tmp_path,
                            env=child_env(2), capture_output=True, text=True, timeout=TIMEOUT)
    assert ok(result).strip() == "__main__ ['x'] 0.12.0.1"
    plain = subprocess.run([PYTHON, "-c", "import meshax.as_jax, jax; print(jax.__version__, jax.numpy.__name__)"],
                           env=child_env(2), capture_output=True, text=True, timeout=TIMEOUT)
    assert ok(plain).strip() == "0.12.0.1 meshax.numpy"


def test_the_alias_reaches_every_python_process_the_program_starts(tmp_path: Path):
    """pytest's -n workers, a subprocess and a spawned multiprocessing worker answer `import jax` with meshax; a
    sitecustomize of the user's own still runs; an interpreter that cannot import meshax starts as usual."""
    (tmp_path / "test_workers.py").write_text("import jax\n\ndef test_jax_is_meshax():\n"
                                              "    assert jax.numpy.__name__ == 'meshax.numpy'\n")
    (tmp_path / "site_of_mine").mkdir()
    (tmp_path / "site_of_mine" / "sitecustomize.py").write_text("import sys\nsys.mine_ran = 1\n")  # this process
    env = child_env(2, PYTHONPATH=str(tmp_path / "site_of_mine"))
    workers = subprocess.run([PYTHON, "-m", "meshax.as_jax", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                              "test_workers.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert "1 passed" in workers.stdout, workers.stdout[-3000:] + workers.stderr[-3000:]
    (tmp_path / "program.py").write_text(textwrap.dedent("""
        import multiprocessing, os, subprocess, sys
        def name(queue):
            import jax
            queue.put(jax.numpy.__name__)
        if __name__ == "__main__":
            child = subprocess.run([sys.executable, "-c", "import sys, jax; print(jax.numpy.__name__, "
                                    "getattr(sys, 'mine_ran', 0))"], capture_output=True, text=True, check=True)
            context = multiprocessing.get_context("spawn")
            queue = context.Queue()
            worker = context.Process(target=name, args=(queue,))
            worker.start()
            print(child.stdout.strip(), queue.get(timeout=60))
            worker.join(60)
    """))
    out = ok(subprocess.run([PYTHON, "-m", "meshax.as_jax", "program.py"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=TIMEOUT))
    assert out.split() == ["meshax.numpy", "1", "meshax.numpy"], out
    bare = subprocess.run([PYTHON, "-I", "-S", "-c", "print('started')"], env=dict(env, MESHAX_AS_JAX="1"),
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert bare.stdout.strip() == "started", bare.stderr


def test_real_jax_already_imported_is_refused():
    result = subprocess.run([PYTHON, "-c", "import jax; import meshax.as_jax"], env=child_env(1),
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode != 0
    assert "the real jax is already imported in this process" in result.stderr
    assert "python -m meshax.as_jax" in result.stderr


def test_usage_errors():
    result = subprocess.run([PYTHON, "-m", "meshax.as_jax"], env=child_env(1), capture_output=True, text=True,
                            timeout=TIMEOUT)
    assert result.returncode == 2 and "usage: python -m meshax.as_jax" in result.stderr
    result = subprocess.run([PYTHON, "-m", "meshax.as_jax", "no_such_script.py"], env=child_env(1),
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 2 and "can't open file 'no_such_script.py'" in result.stderr


_SUM_SCRIPT = """
import sys
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
jax.distributed.initialize()
mesh = jax.make_mesh((jax.device_count(),), ("data",))
local = jnp.arange(4.0) + 4 * jax.process_index()
x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("data")), local)
total = jax.jit(lambda v: jnp.sum(v * v))(x)
# one write per line: under mpiexec both processes share one pipe, and print() writes its pieces one by one
sys.stdout.write(f"{jax.__version__} {jax.process_index()} {jax.process_count()} {jax.device_count()} {float(total)}\\n")
"""


@pytest.mark.parametrize("how", ["launch", "mpiexec"])
def test_multiprocess_jobs_under_the_alias(tmp_path: Path, how: str):
    script = tmp_path / "sum.py"
    script.write_text(_SUM_SCRIPT)
    if how == "launch":
        proc = start([PYTHON, "-m", "meshax", "launch", "-n", "2", "--cpu-devices", "2", "--as-jax", str(script)],
                     child_env())
    else:
        proc = start([MPIEXEC, "-n", "2", PYTHON, "-m", "meshax.as_jax", str(script)], child_env(2))
    result = collect([proc], 240)[0]
    assert result.returncode == 0, result.stderr[-3000:]
    expected = float(sum(v * v for v in range(8)))
    if how == "launch":
        lines = {i: out[-1] for i, out in lines_by_process(result.stdout).items()}
    else:
        lines = {int(line.split()[1]): line for line in result.stdout.splitlines()}
    assert sorted(lines) == [0, 1]
    for i, line in lines.items():
        assert line.split() == ["0.12.0.1", str(i), "2", "4", str(expected)]


_PMAP_SCRIPT = """
import jax, jax.numpy as jnp
from jax import lax
jax.distributed.initialize()
x = jnp.arange(jax.local_device_count(), dtype=jnp.float32) + 10 * jax.process_index()
total = jax.pmap(lambda v: lax.psum(v, "i"), axis_name="i")(x)
index = jax.pmap(lambda v: lax.axis_index("i") + 0 * v, axis_name="i")(x)
print(jax.process_index(), total.shape, [float(s.data.reshape(-1)[0]) for s in total.addressable_shards],
      [int(s.data.reshape(-1)[0]) for s in index.addressable_shards])
"""


def test_pmap_spans_every_process(tmp_path: Path):
    """As JAX's multi-process pmap: each process maps one slice per local device; collectives span all devices."""
    script = tmp_path / "pmap.py"
    script.write_text(_PMAP_SCRIPT)
    proc = start([PYTHON, "-m", "meshax", "launch", "-n", "2", "--cpu-devices", "2", "--as-jax", str(script)],
                 child_env())
    result = collect([proc], 240)[0]
    assert result.returncode == 0, result.stderr[-3000:]
    lines = {i: out[-1] for i, out in lines_by_process(result.stdout).items()}
    assert lines == {0: "0 (4,) [22.0, 22.0] [0, 1]", 1: "1 (4,) [22.0, 22.0] [2, 3]"}
