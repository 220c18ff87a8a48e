"""README's "Differences from JAX": every row names a test that exists, every `meshax.X`/`jax.X` name in the
section resolves, and the rows without a test elsewhere are demonstrated here."""
from __future__ import annotations

import importlib
import re
import textwrap

import numpy as np
import pytest

import meshax
import meshax.numpy as jnp
from meshax import lax
from meshax.sharding import NamedSharding, PartitionSpec as P
from multiprocess import PYTHON, REPO, child_env, collect, lines_by_process, start

NODE_ID = re.compile(r"`(tests/[\w/]+\.py::\w+)`")
NAME = re.compile(r"`(?:meshax|jax)((?:\.\w+)+)")


def section() -> str:
    text = (REPO / "README.md").read_text()
    start_at = text.index("## Differences from JAX")
    return text[start_at:text.index("\n### JAX names meshax does not provide", start_at + 1)]


def table_rows() -> list[list[str]]:
    lines = [line for line in section().splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == ["meshax", "JAX 0.12", "why", "test"], header
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_every_row_names_a_test():
    rows = table_rows()
    assert len(rows) >= 10
    for row in rows:
        assert len(row) == 4, row
        assert NODE_ID.fullmatch(row[3]), f"row {row[0]!r} names no test as `tests/file.py::test_name`"


def test_named_tests_exist():
    """Every node id the table names is a test function defined in that file."""
    for node_id in sorted({NODE_ID.fullmatch(row[3])[1] for row in table_rows()}):
        path, _, name = node_id.partition("::")
        assert (REPO / path).is_file(), node_id
        assert re.search(rf"^def {name}\(", (REPO / path).read_text(), re.M), node_id


def resolve(dotted: str) -> object:
    """`a.b.c` under meshax: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(["meshax", *parts[:cut]]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            value = getattr(value, attribute)
        return value
    value = meshax
    for attribute in parts:
        value = getattr(value, attribute)
    return value


@pytest.mark.parametrize("name", sorted(set(NAME.findall(section()))))
def test_names_in_the_section_resolve(name):
    assert resolve(name.lstrip(".")) is not None


def test_bare_api_names_of_the_meshax_column_exist():
    """`make_mesh`, `device_get`, `jit`, `vmap`, ...: public names of meshax or meshax.sharding."""
    names = {name for row in table_rows() for name in re.findall(r"`([A-Za-z_]\w*)`", row[0])}
    assert {"make_mesh", "device_get", "jit", "grad", "shard_map", "vmap"} <= names
    for name in names - {"preduce", "reduce_scatter"}:  # jaxpr primitive names, not API
        assert hasattr(meshax, name) or hasattr(meshax.sharding, name), name


# -- rows demonstrated here -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mesh():
    if len(meshax.devices()) < 8:
        pytest.skip("needs 8 CPU devices (conftest sets them)")
    return meshax.make_mesh((8,), ("i",))


def test_experimental_shard_map_skips_varying_axes_typing(mesh):
    """An all_gather returned with a replicated out_spec: the experimental spelling runs, meshax.shard_map refuses."""
    from meshax.experimental.shard_map import shard_map as experimental_shard_map

    def gather(x):
        return lax.all_gather(x, "i", tiled=True)

    x = jnp.arange(8.0)
    old = experimental_shard_map(gather, mesh=mesh, in_specs=P("i"), out_specs=P())
    np.testing.assert_array_equal(np.asarray(old(x)), np.arange(8.0))
    with pytest.raises(ValueError, match="out_specs which require replication"):
        meshax.shard_map(gather, mesh=mesh, in_specs=P("i"), out_specs=P())(x)


def test_jit_evaluates_the_traced_program_with_numpy_unfused(mesh):
    def f(x):
        return jnp.sum(jnp.sin(x) * 2 + 1)

    x = meshax.device_put(jnp.linspace(0.0, 1.0, 64), NamedSharding(mesh, P("i")))
    assert float(meshax.jit(f)(x)) == float(f(x))  # the same NumPy evaluation, bit for bit
    program = str(meshax.make_jaxpr(f)(x))
    assert [op for op in ("sin", "mul", "add", "reduce") if op in program] == ["sin", "mul", "add", "reduce"]
    assert program.count(" = ") == 4  # four equations: nothing fused


def test_jaxprs_print_meshax_collective_primitives(mesh):
    f = meshax.shard_map(lambda x: lax.psum(x, "i"), mesh=mesh, in_specs=P("i"), out_specs=P())
    program = str(meshax.make_jaxpr(f)(jnp.ones(8)))
    assert "preduce[axes=('i',) op=sum]" in program
    assert "psum_invariant" not in program


def test_vmap_without_a_batching_rule_runs_per_element(monkeypatch):
    from meshax._src.interpreters import batching

    used = []
    original = batching._fallback[0]

    def spy(primitive):
        rule = original(primitive)

        def recorded(*args, **kwargs):
            used.append(primitive.name)
            return rule(*args, **kwargs)

        return recorded

    monkeypatch.setattr(batching, "_fallback", [spy])
    xs, idx = np.arange(12.0).reshape(3, 4), np.array([0, 2, 3])
    out = meshax.vmap(lambda x, i: x.at[i].set(-1.0))(jnp.asarray(xs), jnp.asarray(idx))
    expected = xs.copy()
    expected[np.arange(3), idx] = -1.0
    np.testing.assert_array_equal(np.asarray(out), expected)
    assert "scatter" in used


def test_device_get_of_an_array_spanning_processes_gathers(tmp_path):
    prog = tmp_path / "gather.py"
    prog.write_text(textwrap.dedent("""\
        import numpy as np
        import meshax as jax
        from meshax.sharding import NamedSharding, PartitionSpec as P
        jax.distributed.initialize()
        mesh = jax.make_mesh((4,), ("i",))
        x = jax.device_put(np.arange(8.0), NamedSharding(mesh, P("i")))
        print(len(x.addressable_shards), jax.device_get(x).tolist())
    """))
    [result] = collect([start([PYTHON, "-m", "meshax", "launch", "-n", "2", "--cpu-devices", "2", str(prog)],
                              child_env())], timeout=120)
    assert result.returncode == 0, result.stderr
    whole = str(np.arange(8.0).tolist())
    assert lines_by_process(result.stdout) == {0: [f"2 {whole}"], 1: [f"2 {whole}"]}


def test_configuration_contexts_apply_to_the_whole_process():
    """`default_device`, `enable_x64`, `debug_nans` and the other configuration contexts set their option for every
    thread of the process while the block runs (JAX's are per thread)."""
    import threading

    seen = {}
    with meshax.default_device(meshax.devices()[1]), meshax.enable_x64(True):
        worker = threading.Thread(target=lambda: seen.update(x=jnp.ones(2)))
        worker.start()
        worker.join(timeout=60)
    assert seen["x"].devices() == {meshax.devices()[1]} and seen["x"].dtype == np.float64
