"""Clusters compiled by numba (interpreters/numba_executor.py, kernel_compiler.py): every way of reading an
input (broadcast rows, columns, scalars, size-one axes) gives NumPy's values bit for bit, in any number of row
ranges, eagerly, under jit and in shard_map; until its kernel is compiled in the background a cluster runs as
NumPy calls with the same values; kernels are kept in the kernel cache and loaded from it by later processes;
without a writable cache they compile in memory."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from meshax._src.interpreters import fusion, kernel_compiler
from meshax._src.interpreters.fusion import executable, fused_p
from meshax._src.runtime import compute_pool as device_pool
from meshax.sharding import Mesh, PartitionSpec as P

from fusion_support import assert_bitwise_equal, fused_and_reference

lax = meshax.lax
EXECUTOR = fusion.EXECUTORS["cpu"]


def edges(shape, seed):
    """float32 values of `shape`: NaN, infinities and signed zeros among random ones of many magnitudes."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)).astype(np.float32)
    flat = x.reshape(-1)
    flat[:8] = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0][: flat.size]
    return x


@pytest.fixture(autouse=True)
def compile_now(monkeypatch):
    """Kernels compiled on first use, the call waiting for them (as with MESHAX_COMPILE_KERNELS=now)."""
    monkeypatch.setattr(EXECUTOR.numba.compiler, "background", False)


def compiled_runs(monkeypatch):
    """A list that gets an entry for each cluster run by a compiled kernel."""
    runs = []
    original = EXECUTOR.numba.run

    def run(*args):
        done = original(*args)
        if done is not None:
            runs.append(1)
        return done

    monkeypatch.setattr(EXECUTOR.numba, "run", run)
    return runs


@pytest.fixture(params=[1, 2, 16], ids=lambda n: f"{n}-threads")
def threads(request, monkeypatch):
    monkeypatch.setattr(device_pool, "call_threads", lambda: request.param)
    return request.param


@pytest.mark.parametrize("case", [
    ("row bias", (300, 200), (200,), lambda h, b: mnp.maximum(h + b, 0.0)),
    ("column", (300, 200), (300, 1), lambda h, c: mnp.where(h > c, h * c, h - c)),
    ("broadcast_in_dim of a column", (300, 200), (300,), lambda h, c: h / lax.broadcast_in_dim(c, h.shape, (0,))),
    ("3-D, bias and leading", (4, 100, 120), (4, 1, 1), lambda h, s: (h * s + 1.5) * (h >= -s)),
    ("size-one rows", (1, 40000), (1, 1), lambda h, s: mnp.minimum(h, s) - h * 0.25),
    ("1-D", (40000,), (40000,), lambda a, b: lax.select(a < b, -a, mnp.abs(b)) * lax.square(a)),
    ("scalar input", (300, 200), (), lambda h, lr: h - lr * h * h),
    ("bool output", (300, 200), (200,), lambda h, b: (h + b != h) & (h * b <= 1.0)),
    ("float64 and back", (300, 200), (200,),
     lambda h, b: lax.convert_element_type(lax.convert_element_type(h, np.float64) * 3.0 + b, np.float32)),
], ids=lambda case: case[0])
def test_every_way_of_reading_inputs_gives_numpys_bits(case, threads, monkeypatch):
    _, shape, other, function = case
    runs = compiled_runs(monkeypatch)
    h, b = edges(shape, 0), edges(other, 1)
    fused, expected, _ = fused_and_reference(function, h, b)
    assert runs, "the cluster did not run compiled"
    assert_bitwise_equal(fused, expected)


def test_read_only_inputs_run_compiled_and_strided_ones_as_numpy_calls(monkeypatch):
    runs = compiled_runs(monkeypatch)
    frozen = edges((300, 200), 3)
    frozen.setflags(write=False)
    fused, expected, _ = fused_and_reference(lambda a, b: mnp.maximum(a * b, b - a), edges((300, 200), 2), frozen)
    assert len(runs) == 1
    assert_bitwise_equal(fused, expected)
    strided = edges((300, 400), 2)[:, ::2]  # a view with a step: the loop would walk it across pages
    fused, expected, _ = fused_and_reference(lambda a, b: mnp.maximum(a * b, b - a), strided, frozen)
    assert len(runs) == 1
    assert_bitwise_equal(fused, expected)


def test_until_compiled_in_the_background_clusters_run_as_numpy_calls_with_the_same_values(monkeypatch):
    compiler = kernel_compiler.KernelCompiler()
    monkeypatch.setattr(EXECUTOR.numba, "compiler", compiler)
    assert compiler.background
    runs = compiled_runs(monkeypatch)
    h, b = edges((300, 200), 7), edges((200,), 8)
    step = meshax.jit(lambda h, b: mnp.where(h * b > 2.0, h - b, mnp.minimum(h, b) * 0.75))
    expected = np.where(h * b > 2, h - b, np.minimum(h, b) * np.float32(0.75))
    with np.errstate(all="ignore"):
        assert_bitwise_equal([step(h, b)], [expected])  # the kernel only asked for: NumPy's calls ran
        assert not runs
        assert compiler.wait(timeout=120)
        assert_bitwise_equal([step(h, b)], [expected])
    assert runs


@pytest.mark.parametrize("mode", ["eager", "jit", "shard_map"])
def test_an_mlp_layer_and_its_derivative_give_numpys_values(mode, monkeypatch):
    runs = compiled_runs(monkeypatch)
    rows = 128 * len(meshax.devices())  # 65536 elements on each device, in shard_map too
    h, b, g = edges((rows, 512), 4), edges((512,), 5), edges((rows, 512), 6)

    def layer(h, b, g):
        return mnp.maximum(h + b, 0.0), mnp.where(h + b > 0, g, 0.0), h - 0.01 * g

    expected = (np.maximum(h + b, np.float32(0)), np.where(h + b > 0, g, np.float32(0)), h - np.float32(0.01) * g)
    if mode == "jit":
        layer = meshax.jit(layer)
    elif mode == "shard_map":
        mesh = Mesh(np.array(meshax.devices()), ("d",))
        layer = meshax.jit(meshax.shard_map(layer, mesh=mesh, in_specs=(P("d"), P(), P("d")), out_specs=P("d")))
    with np.errstate(all="ignore"):
        ours = layer(h, b, g)
    assert_bitwise_equal(ours, expected)
    assert runs or mode == "eager"  # eagerly, each operation runs alone


def test_an_input_that_does_not_broadcast_is_refused_not_read_past():
    closed = meshax.make_jaxpr(lambda h, b: h + b)(np.ones((300, 200), np.float32), np.ones(200, np.float32))
    cluster = next(eq.params["cluster"] for eq in executable(closed.jaxpr).equations if eq.primitive is fused_p)
    program = EXECUTOR.numba.compile(cluster.jaxpr)
    with pytest.raises(ValueError, match=r"shape \(300,\) does not broadcast to the output's \(300, 200\)"):
        program.source([np.ones((300, 200), np.float32), np.ones(300, np.float32)], (300, 200))


def test_operations_without_an_exact_translation_are_not_compiled():
    x = np.ones(40000, np.float32)
    for function in (lambda a: mnp.floor(a * 2.0) - a, lambda a: a.astype(np.int32) + 1,
                     lambda a: (a * 2.0).astype(np.float16) * 3):
        program = executable(meshax.make_jaxpr(function)(x).jaxpr)
        found = [eq.params["cluster"] for eq in program.equations if eq.primitive is fused_p]
        assert len(found) == 1 and EXECUTOR.numba.compile(found[0].jaxpr) is None, found


CACHED_PROGRAM = textwrap.dedent("""
    import numpy as np
    import meshax, meshax.numpy as mnp
    from meshax._src.interpreters import fusion
    h = np.arange(60000, dtype=np.float32).reshape(300, 200) - 30000
    out = meshax.jit(lambda h: mnp.maximum(h * 0.5 - 3.0, 7.0))(h)
    assert (np.asarray(out) == np.maximum(h * np.float32(0.5) - np.float32(3), np.float32(7))).all()
    (kernel,) = fusion.EXECUTORS["cpu"].numba.compiler._ready.values()
    print("hits", sum(kernel.stats.cache_hits.values()), "misses", sum(kernel.stats.cache_misses.values()))
""")


def run_program(cache: str) -> str:
    env = dict(os.environ, MESHAX_CACHE_DIR=cache, MESHAX_NUM_CPU_DEVICES="1", MESHAX_COMPILE_KERNELS="now")
    done = subprocess.run([sys.executable, "-c", CACHED_PROGRAM], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_kernels_are_compiled_once_and_loaded_by_later_processes(tmp_path):
    assert run_program(str(tmp_path)) == "hits 0 misses 1"
    sources = list((tmp_path / "kernels").glob("meshax_kernel_*.py"))
    assert len(sources) == 1 and "def kernel(" in sources[0].read_text()
    assert run_program(str(tmp_path)) == "hits 1 misses 0"
    assert list((tmp_path / "kernels").glob("meshax_kernel_*.py")) == sources


def test_without_a_writable_cache_kernels_compile_in_memory(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    assert run_program(str(blocked)).startswith("hits 0 ")  # compiled in memory, the values right
    assert kernel_compiler.kernel_cache() is not None  # this process's own cache is unaffected


def test_processes_whose_kernels_are_ready_at_different_steps_compute_the_same_values(tmp_path):
    """A job of 2 processes: each compiles its kernel in the background at its own moment, so steps run with the
    cluster compiled in one process and as NumPy calls in the other; every step's values are NumPy's on both."""
    from multiprocess import REPO, lines_by_process, run_launcher

    result = run_launcher(str(REPO / "tests" / "programs" / "compiled_clusters_job.py"), 2, 2, str(tmp_path),
                          timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    reports = {i: dict(field.split("=") for field in next(line for line in lines if line.startswith("compiled "))
                       .split()[2:]) for i, lines in lines_by_process(result.stdout).items()}
    assert sorted(reports) == [0, 1]
    for report in reports.values():
        assert int(report["numpy_runs"]) > 0 and int(report["kernel_runs"]) > 0, reports


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("power", [-3, -1, 0, 2, 3, 5])
def test_integer_powers_square_roots_and_reciprocals_give_numpys_bits(power, dtype, monkeypatch):
    runs = compiled_runs(monkeypatch)
    x = edges((300, 200), 10).astype(dtype)
    old = meshax.config.jax_enable_x64
    meshax.config.update("jax_enable_x64", True)  # float64 stays float64
    try:
        fused, expected, _ = fused_and_reference(
            lambda a: lax.integer_pow(a * 1.5, power) + mnp.sqrt(mnp.abs(a)) * lax.reciprocal(a - 0.5), x)
    finally:
        meshax.config.update("jax_enable_x64", old)
    assert runs and fused[0].dtype == dtype
    assert_bitwise_equal(fused, expected)


def test_an_adam_update_is_one_compiled_cluster_with_numpys_bits(monkeypatch):
    """optax's Adam update of one parameter (moments, bias correction, the step) as meshax runs it under jit."""
    runs = compiled_runs(monkeypatch)
    p, g, m, v = (edges((300, 200), seed) for seed in (11, 12, 13, 14))
    v = np.abs(v)

    def adam(p, g, m, v):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g ** 2
        return p - 0.001 * (m / 0.1) / (mnp.sqrt(v / 0.001) + 1e-8)

    fused, expected, count = fused_and_reference(adam, p, g, m, v)
    assert count == 1 and runs
    assert_bitwise_equal(fused, expected)


# ---- small clusters inside programs: their loops called directly (numba_executor.SmallClusterCall) ----

def _small_calls(function, *args):
    """The SmallClusterCall steps of the program `jit(function)` runs on `args`."""
    from meshax._src.interpreters import numpy_eval
    from meshax._src.interpreters.numba_executor import SmallClusterCall

    closed = meshax.make_jaxpr(function)(*args)
    program = numpy_eval.program(closed.jaxpr)
    return closed, program, [step[0] for step in program.steps if isinstance(step[0], SmallClusterCall)]


def adam_like(p, m, v, g, bias, lr):
    """Three elementwise chains of a few operations each (scalars, a broadcast row, a select)."""
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    p = p - lr * m / (jnp_sqrt(v) + 1e-8) + jnp_where(p > 0, bias, 0.0)
    return p, m, v


jnp_sqrt, jnp_where = mnp.sqrt, mnp.where


def test_small_clusters_run_as_their_loops_with_numpys_bits():
    """Each chain of a small program is one compiled loop once asked for (on its ASK_ON_CALL-th call; compiled
    at once here), its values NumPy's bit for bit (subnormals apart: both flush here); before that, and for an
    input that is not C-ordered, the NumPy calls, with the same values."""
    rng = np.random.default_rng(3)
    p, m, v, g = (edges((64, 48), seed) for seed in range(4))
    v = np.abs(v)
    bias, lr = rng.standard_normal(48).astype(np.float32), np.float32(1e-3)
    closed, program, calls = _small_calls(adam_like, p, m, v, g, bias, lr)
    assert len(calls) >= 3, calls
    inputs = [p, m, v, g, bias, lr]
    reference = program.interpret(closed.consts, inputs)  # first runs: the NumPy calls
    for _ in range(calls[0].ASK_ON_CALL):
        program.interpret(closed.consts, inputs)
    assert all(call._entry is not None for call in calls)  # compiled, called through its entry point
    for got, want in zip(program.generated()(closed.consts, inputs), reference):
        assert_bitwise_equal(got, want)
    transposed = [np.asfortranarray(x) for x in inputs[:4]] + inputs[4:]  # not C-ordered: the NumPy calls
    for got, want in zip(program.generated()(closed.consts, transposed), reference):
        assert_bitwise_equal(np.ascontiguousarray(got), want)
    for got, want in zip(meshax.jit(adam_like)(p, m, v, g, bias, lr), reference):
        assert_bitwise_equal(np.asarray(got), want)


def test_a_one_operation_cluster_stays_a_numpy_call():
    x = np.ones((8, 8), np.float32)
    assert _small_calls(lambda a: a * 2.0, x)[2] == []
