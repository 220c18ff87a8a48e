"""The no-false-positive corpus: hundreds of correct programs run in sequence in one job, with the desync check on.

Run by tests/test_no_false_positives.py as `meshax launch -n 4 --cpu-devices 2 no_false_positives.py DIR` (and -n 2
--cpu-devices 4), DIR a fresh directory for its checkpoints.
The programs come from the single-process test suites (their case tables, imported): every NumPy differential
case on its sharded inputs over the job's 8 devices, derivatives of the autodiff cases (eagerly and jit of
grad) on inputs placed on the whole mesh, sharded gradients, vmap, control-flow and lax cases inside a shard_map
over all devices (eagerly and under jit), and whole programs (remat, async checkpointing while training, multihost
utilities, reshards). Each program's result is gathered and compared with the same program run on this
process alone (one local device: no communication), whose values the single-process suites compare with JAX.

Every process prints `FAIL <program>: <why>` for each program whose values differ or that raised where the
single-process run did not, and at the end `SUMMARY <process> programs=<n> ok=<n> seconds=<s>`; a desync check
that fires ends the job (exit 70) instead.
"""
import collections
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

import meshax
import meshax.numpy as mnp
from meshax.sharding import Mesh, NamedSharding, PartitionSpec as P

meshax.distributed.initialize()
HERE = meshax.process_index()
from meshax._src.config import config  # noqa: E402

assert config.read("meshax_check"), "the corpus runs with the desync check on (its default)"
# The suites' modules build JAX meshes of 8 CPU devices when imported (their oracle side, unused here); meshax
# has read its own device count already.
os.environ.pop("JAX_NUM_CPU_DEVICES", None)
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import test_autodiff as autodiff  # noqa: E402
import test_control_flow as control_flow  # noqa: E402
import test_lax_more as lax_cases  # noqa: E402
import test_numpy_differential as differential  # noqa: E402
import test_vmap as vmap_cases  # noqa: E402

STRIDE = int(sys.argv[2]) if len(sys.argv) > 2 else 1  # run every STRIDE-th case of the large tables
LINE = meshax.make_mesh((meshax.device_count(),), ("d",))
LOCAL_LINE = Mesh(np.array(meshax.local_devices()), ("d",))  # this process's devices alone: the reference
GRID = meshax.make_mesh((4, 2), ("a", "b"))
results = {"ok": 0, "programs": 0}
kinds: collections.Counter = collections.Counter()  # programs run, by kind


def leaves(tree):
    flat, _ = meshax.tree_util.tree_flatten(tree)
    return flat


def host(value):
    """A result leaf as a NumPy value (gathering an Array that spans processes, on every process)."""
    if isinstance(value, meshax.Array):
        return np.asarray(meshax.device_get(value))
    return np.asarray(value)


def local_inputs(values):
    """Host values as arrays of this process only (uncommitted, on its first device)."""
    return [mnp.asarray(v) if isinstance(v, np.ndarray) else v for v in values]


def same(got, want, rtol, atol) -> None:
    got, want = leaves(got), leaves(want)
    assert len(got) == len(want), f"{len(got)} results, the single-process run has {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = host(g), host(w)
        assert g.shape == w.shape and g.dtype == w.dtype, f"result {k}: {g.shape} {g.dtype} vs {w.shape} {w.dtype}"
        if g.dtype.kind in "fc" or str(g.dtype) == "bfloat16":
            np.testing.assert_allclose(g.astype(np.float64) if g.dtype.kind == "f" else g,
                                       w.astype(np.float64) if w.dtype.kind == "f" else w,
                                       rtol=rtol, atol=atol, equal_nan=True, err_msg=f"result {k}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"result {k}")


def program(name: str, run, reference, rtol: float = 1e-5, atol: float = 1e-6, shapes_only: bool = False) -> None:
    """Run one program on the job's devices and compare it with `reference()` (this process alone). A program
    that fails alone is not counted (the single-process suites check those); one that fails here is a FAIL."""
    try:
        want = reference()
    except Exception:  # noqa: BLE001 - not a program of the corpus
        return
    results["programs"] += 1
    kinds[name.split("/")[0]] += 1
    try:
        try:
            got = run()
        except RuntimeError as error:
            if "non-addressable" not in str(error):
                raise
            results["programs"] -= 1  # a data-dependent shape of an array spanning processes: JAX refuses it too
            kinds[name.split("/")[0]] -= 1
            return
        if shapes_only:
            got = [(np.shape(x), str(x.dtype)) for x in leaves(got)]
            want = [(np.shape(x), str(x.dtype)) for x in leaves(want)]
            assert got == want, (got, want)
        else:
            same(got, want, rtol, atol)
        results["ok"] += 1
    except Exception as error:  # noqa: BLE001
        detail = "".join(traceback.format_exception_only(type(error), error)).strip().replace("\n", " | ")
        print(f"FAIL {name}: {detail[:600]}", flush=True)


# ---- NumPy differential cases: their sharded inputs, eagerly and under jit -------------------------------------

def numpy_cases() -> None:
    for case in differential.CASES[::STRIDE]:
        if case.diverges is not None:
            continue
        for seed, plan in enumerate(differential.plans_for(case)[:1]):
            values = [v if isinstance(a, differential.A) else (None if isinstance(a, differential.Sh) else a)
                      for a, v in zip(plan.args, plan.values)]
            tolerance = dict(rtol=max(case.rtol, 1e-5), atol=max(case.atol, 1e-6), shapes_only=not case.compare_values)
            inputs = plan.inputs(differential.M)  # placed on the job's mesh (every process places the same)
            reference = lambda: case.fn(differential.M, *local_inputs(values))  # noqa: E731
            program(f"numpy/{case.name}/{seed}", lambda: case.fn(differential.M, *inputs), reference, **tolerance)
            arrays = [i for i, a in enumerate(plan.args) if isinstance(a, differential.A) and not a.host]
            if case.jit and arrays and not any(isinstance(a, differential.Sh) for a in plan.args) \
                    and not case.name.startswith(differential.LIKE):
                def jitted(inputs=inputs, arrays=arrays, case=case):
                    def body(*traced):
                        args = list(inputs)
                        for i, value in zip(arrays, traced):
                            args[i] = value
                        return case.fn(differential.M, *args)
                    return meshax.jit(body)(*[inputs[i] for i in arrays])
                program(f"numpy/{case.name}/{seed}/jit", jitted, reference, **tolerance)


# ---- derivatives: grad, jvp and vjp of the autodiff cases, on inputs placed on the whole mesh -------------------

def derivative_cases() -> None:
    replicated = NamedSharding(GRID, P())
    for index, (case, i) in enumerate(autodiff._ids()):
        if index % STRIDE:
            continue
        shapes = case.shapes[i]
        rng = np.random.default_rng(autodiff._seed(case.name, i))
        args = [autodiff.draw(rng, s, d, np.float32) for s, d in zip(shapes, case.domains)]
        tangents = [np.asarray(rng.normal(size=s), dtype=np.float32) for s in shapes]
        f = lambda *a, case=case: case.fn(autodiff.M, *a)  # noqa: E731
        try:
            out_shape = meshax.eval_shape(f, *args).shape
        except Exception:  # noqa: BLE001
            continue
        w = np.asarray(rng.normal(size=out_shape), dtype=np.float32)
        values = args + tangents + [w]

        def derivatives(a, t, w_, f=f):
            return autodiff.derivatives(meshax.grad, meshax.jvp, meshax.vjp, f, a, t, w_)

        def split(xs, n=len(args)):
            return list(xs[:n]), list(xs[n:2 * n]), xs[-1]

        placed = [meshax.device_put(v, replicated) for v in values]
        reference = lambda values=values, d=derivatives, s=split: d(*s(local_inputs(values)))  # noqa: E731
        program(f"autodiff/{case.name}/{i}", lambda p=placed, d=derivatives, s=split: d(*s(p)), reference,
                rtol=autodiff.RTOL, atol=autodiff.ATOL)
        program(f"autodiff/{case.name}/{i}/jit", lambda p=placed, d=derivatives, s=split: meshax.jit(
            lambda a, t, w_: d(a, t, w_))(*s(p)), reference, rtol=autodiff.RTOL, atol=autodiff.ATOL)


def sharded_gradients() -> None:
    modes = (("eager", lambda l: meshax.grad(l)), ("jit_of_grad", lambda l: meshax.jit(meshax.grad(l))),
             ("grad_of_jit", lambda l: meshax.grad(meshax.jit(l))))
    for index, (name, fn) in enumerate(autodiff.SHARDED):
        rng = np.random.default_rng(autodiff._seed(name, 7))
        x = rng.uniform(-2, 2, size=(8, 6)).astype(np.float32)
        w = rng.normal(size=meshax.eval_shape(lambda a: fn(autodiff.M, a), x).shape).astype(np.float32)
        loss = lambda a, fn=fn, w=w: mnp.sum(fn(autodiff.M, a) * w)  # noqa: E731
        for k, spec in enumerate((P("a"), P("a", "b"), P(None, "b"))):
            placed = meshax.device_put(x, NamedSharding(GRID, spec))
            for mode, make in modes if STRIDE == 1 else [modes[(index + k) % 3]]:
                program(f"sharded_grad/{name}/{spec}/{mode}", lambda g=make(loss), p=placed: g(p),
                        lambda g=make(loss): g(mnp.asarray(x)), rtol=autodiff.RTOL, atol=autodiff.ATOL)


# ---- vmap and control flow: every device runs the case inside a shard_map over all devices -------------------

def replicated_cases(prefix: str, cases: dict) -> None:
    for name, case in sorted(cases.items()):
        everywhere, alone = (meshax.shard_map(lambda case=case: case(meshax, mnp), mesh=mesh, in_specs=(),
                                              out_specs=P()) for mesh in (LINE, LOCAL_LINE))
        program(f"{prefix}/{name}", everywhere, alone, atol=1e-5)
        program(f"{prefix}/{name}/jit", meshax.jit(everywhere), meshax.jit(alone), atol=1e-5)


# ---- whole programs --------------------------------------------------------------------------------------------

def whole_programs() -> None:
    X = np.random.default_rng(3).standard_normal((16, 6)).astype(np.float32)
    w = np.random.default_rng(4).standard_normal(6).astype(np.float32)
    for shape in ((4, 2), (2, 4), (8, 1)):
        mesh = meshax.make_mesh(shape, ("data", "model"))
        Xs = meshax.device_put(X, NamedSharding(mesh, P("data", None)))
        for policy in (None, meshax.checkpoint_policies.nothing_saveable, meshax.checkpoint_policies.dots_saveable):
            def f(w, X=Xs):
                return mnp.sum(mnp.tanh(X @ mnp.outer(w, w)) ** 2)

            def f_local(w):
                return mnp.sum(mnp.tanh(mnp.asarray(X) @ mnp.outer(w, w)) ** 2)
            remat = (lambda g: meshax.checkpoint(g)) if policy is None else (lambda g: meshax.checkpoint(g, policy=policy))
            tag = "default" if policy is None else policy.__name__
            program(f"remat/{shape}/{tag}", lambda: (meshax.grad(f)(mnp.asarray(w)), meshax.grad(remat(f))(mnp.asarray(w))),
                    lambda: (meshax.grad(f_local)(mnp.asarray(w)), meshax.grad(remat(f_local))(mnp.asarray(w))),
                    rtol=1e-4, atol=1e-5)
            program(f"remat/{shape}/{tag}/jit", lambda: meshax.jit(meshax.grad(remat(f)))(mnp.asarray(w)),
                    lambda: meshax.grad(remat(f_local))(mnp.asarray(w)), rtol=1e-4, atol=1e-5)
    for shape, spec, blocks in (((4, 2), P("a", "b"), (4, 2)), ((2, 4), P("b", "a"), (4, 2)), ((8,), P("a"), (8, 1))):
        names = ("a", "b")[:len(shape)]
        mesh = meshax.make_mesh(shape, names)
        value = np.arange(64, dtype=np.float32).reshape(8, 8)
        source = meshax.device_put(value, NamedSharding(mesh, spec))
        for target in (P(), P(None, names[0]), P(names[-1]), P(names)):
            program(f"reshard/{shape}/{spec}->{target}",
                    lambda s=source, t=target, m=mesh: meshax.device_put(s, NamedSharding(m, t)) * 2, lambda: value * 2)
        program(f"make_array_from_callback/{shape}", lambda m=mesh: meshax.make_array_from_callback(
            value.shape, NamedSharding(m, spec), lambda index: value[index]) + 1, lambda: value + 1)
        program(f"psum/{shape}", lambda m=mesh: meshax.jit(meshax.shard_map(
            lambda x: meshax.lax.psum(x, names), mesh=m, in_specs=spec, out_specs=P()))(source),
            lambda b=blocks: value.reshape(b[0], 8 // b[0], b[1], 8 // b[1]).sum((0, 2)))
    from meshax.experimental import multihost_utils
    program("multihost/process_allgather", lambda: multihost_utils.process_allgather(np.full(3, HERE, np.int32)),
            lambda: np.repeat(np.arange(meshax.process_count(), dtype=np.int32)[:, None], 3, axis=1))
    program("multihost/broadcast_one_to_all", lambda: multihost_utils.broadcast_one_to_all(np.full(4, 7.0 + HERE)),
            lambda: np.full(4, 7.0, np.float32))
    program("multihost/sync_global_devices", lambda: multihost_utils.sync_global_devices("corpus") or 0, lambda: 0)
    program("checkpoint/async_training", async_training, lambda: "restored")


def async_training() -> str:
    """Train while asynchronous saves run; every checkpoint restores exactly what was saved."""
    mesh = meshax.make_mesh((4, 2), ("data", "model"))
    rng = np.random.default_rng(5)
    X = meshax.device_put(rng.standard_normal((32, 8)).astype(np.float32), NamedSharding(mesh, P("data")))
    y = meshax.device_put(rng.standard_normal((32, 4)).astype(np.float32), NamedSharding(mesh, P("data")))
    params = {"w": meshax.device_put(np.zeros((8, 4), np.float32), NamedSharding(mesh, P(None, "model")))}
    step = meshax.jit(lambda p: meshax.tree_util.tree_map(
        lambda a, g: a - 0.1 * g, p, meshax.grad(lambda q: mnp.mean((X @ q["w"] - y) ** 2))(p)))
    root = os.path.join(sys.argv[1], "async_training")
    saved = {}
    for i in range(12):
        params = step(params)
        if i % 4 == 1:
            saved[i] = np.asarray(meshax.device_get(params["w"]))
            meshax.checkpoint.async_save(os.path.join(root, f"step{i}"), params)
    meshax.checkpoint.save(os.path.join(root, "last"), params)
    for i, expected in saved.items():
        np.testing.assert_array_equal(np.asarray(meshax.device_get(
            meshax.checkpoint.restore(os.path.join(root, f"step{i}"))["w"])), expected)
    return "restored"


started = time.monotonic()
for part in (whole_programs, numpy_cases, derivative_cases, sharded_gradients,
             lambda: replicated_cases("vmap", vmap_cases.CASES),
             lambda: replicated_cases("control_flow", control_flow.CASES),
             lambda: replicated_cases("lax", {**lax_cases.CASES, **lax_cases.GATHER_CASES})):
    part()
print(f"KINDS {HERE} {dict(sorted(kinds.items()))}", flush=True)
print(f"SUMMARY {HERE} programs={results['programs']} ok={results['ok']} "
      f"seconds={time.monotonic() - started:.1f}", flush=True)
