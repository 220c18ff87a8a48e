"""Sharding in types with Explicit mesh axes, against JAX 0.10: for a battery of operations, `typeof` inside jit,
the result's type and sharding and its values, eagerly and under jit; the ambiguous cases raise JAX's
ShardingTypeError with its message, and out_sharding= decides them."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax import lax as jlax
from jax.sharding import AxisType as JAxisType

import meshax
import meshax.numpy as mnp
from meshax import lax as mlax
from meshax._src.core.core import ShardingTypeError
from meshax.sharding import AxisType

LIBS = {"meshax": (meshax, mnp, mlax, AxisType), "jax": (jax, jjnp, jlax, JAxisType)}
ARGS = {  # name: (shape, spec)
    "x": ((8, 4), ("X", None)), "xy": ((8, 4), ("X", "Y")), "yx": ((8, 4), ("Y", "X")), "r": ((4, 6), ()),
    "y": ((4, 6), (None, "Y")), "w": ((4, 6), ("Y",)), "cx": ((4, 6), ("X",)), "v": ((4,), ("Y",)),
    "b3": ((4, 8, 4), ("X", None, "Y")), "t": ((8, 4), (None, "X")), "s": ((16, 2), (("X", "Y"),)),
    "cxT": ((4, 8), (None, "X")),
}


def _spec(lib, spec):
    return lib.P(*spec)


CASES = {  # name: (function of (lib, np_, lax, P), argument names)
    "add_scalar": (lambda L, np_, lax, P: lambda a: a + 1, "x"),
    "sin": (lambda L, np_, lax, P: np_.sin, "xy"),
    "broadcast_vector": (lambda L, np_, lax, P: lambda a, b: a * b, "xy v"),
    "incompatible": (lambda L, np_, lax, P: lambda a, b: a + b, "xy yx"),
    "where": (lambda L, np_, lax, P: lambda a: np_.where(a > 1, a, 0.0), "xy"),
    "astype": (lambda L, np_, lax, P: lambda a: a.astype(np_.int32), "xy"),
    "sum0": (lambda L, np_, lax, P: lambda a: a.sum(0), "xy"),
    "sum_all": (lambda L, np_, lax, P: lambda a: a.sum(), "xy"),
    "max1": (lambda L, np_, lax, P: lambda a: np_.max(a, 1), "xy"),
    "mean_keepdims": (lambda L, np_, lax, P: lambda a: np_.mean(a, 1, keepdims=True), "xy"),
    "argmax": (lambda L, np_, lax, P: lambda a: np_.argmax(a, 1), "xy"),
    "softmax": (lambda L, np_, lax, P: L.nn.softmax, "xy"),
    "matmul": (lambda L, np_, lax, P: np_.matmul, "x y"),
    "matmul_ambiguous": (lambda L, np_, lax, P: np_.matmul, "xy w"),
    "matmul_out_sharding": (lambda L, np_, lax, P: lambda a, b: np_.matmul(a, b, out_sharding=P("X", None)), "xy w"),
    "matmul_one_side": (lambda L, np_, lax, P: np_.matmul, "xy r"),
    "matmul_rhs_side": (lambda L, np_, lax, P: np_.matmul, "x cx"),
    "matmul_inconsistent": (lambda L, np_, lax, P: np_.matmul, "t w"),
    "matmul_duplicate": (lambda L, np_, lax, P: np_.matmul, "x cxT"),
    "dot": (lambda L, np_, lax, P: np_.dot, "x y"),
    "einsum": (lambda L, np_, lax, P: lambda a, b: np_.einsum("ij,jk->ik", a, b), "x y"),
    "einsum_out_sharding": (
        lambda L, np_, lax, P: lambda a, b: np_.einsum("ij,jk->ik", a, b, out_sharding=P("X", None)), "xy w"),
    "dot_general_out_sharding": (lambda L, np_, lax, P: lambda a, b: lax.dot_general(
        a, b, (((1,), (0,)), ((), ())), out_sharding=P(None, "Y")), "xy w"),
    "batched_matmul": (lambda L, np_, lax, P: lambda a: a @ np_.ones((4, 3)), "b3"),
    "transpose": (lambda L, np_, lax, P: lambda a: a.T, "xy"),
    "swapaxes": (lambda L, np_, lax, P: lambda a: np_.swapaxes(a, 0, 2), "b3"),
    "reshape_split": (lambda L, np_, lax, P: lambda a: a.reshape(4, 2, 4), "x"),
    "reshape_keep": (lambda L, np_, lax, P: lambda a: a.reshape(8, 2, 2), "x"),
    "reshape_merge": (lambda L, np_, lax, P: lambda a: a.reshape(32), "xy"),
    "reshape_merge3": (lambda L, np_, lax, P: lambda a: a.reshape(32, 4), "b3"),
    "reshape_split_two_axes": (lambda L, np_, lax, P: lambda a: a.reshape(4, 4, 2), "s"),
    "reshape_ambiguous": (lambda L, np_, lax, P: lambda a: a.reshape(2, 4, 4), "x"),
    "reshape_trailing_split": (lambda L, np_, lax, P: lambda a: a.reshape(32), "t"),
    "reshape_out_sharding": (lambda L, np_, lax, P: lambda a: np_.reshape(a, (4, 8), out_sharding=P(None, "X")),
                             "x"),
    "lax_reshape_out_sharding": (lambda L, np_, lax, P: lambda a: lax.reshape(a, (32,), out_sharding=P("X")), "xy"),
    "expand_dims": (lambda L, np_, lax, P: lambda a: a[None], "xy"),
    "squeeze": (lambda L, np_, lax, P: lambda a: a[:, None, :].squeeze(1), "xy"),
    "slice_columns": (lambda L, np_, lax, P: lambda a: lax.slice(a, (0, 0), (8, 2)), "xy"),
    "slice_strided": (lambda L, np_, lax, P: lambda a: lax.slice(a, (0, 0), (8, 4), (2, 1)), "xy"),
    "dynamic_slice": (lambda L, np_, lax, P: lambda a: lax.dynamic_slice(a, (0, 0), (8, 2)), "xy"),
    "index_unsplit_column": (lambda L, np_, lax, P: lambda a: a[:, 1], "x"),
    "pad": (lambda L, np_, lax, P: lambda a: np_.pad(a, ((0, 0), (1, 1))), "x"),
    "pad_split_dim": (lambda L, np_, lax, P: lambda a: np_.pad(a, ((1, 1), (0, 0))), "xy"),
    "concatenate0": (lambda L, np_, lax, P: lambda a: np_.concatenate([a, a], 0), "x"),
    "concatenate1": (lambda L, np_, lax, P: lambda a: np_.concatenate([a, a], 1), "xy"),
    "concatenate_mismatch": (lambda L, np_, lax, P: lambda a, b: np_.concatenate([a, b]), "xy x"),
    "stack": (lambda L, np_, lax, P: lambda a: np_.stack([a, a]), "xy"),
    "take": (lambda L, np_, lax, P: lambda a: np_.take(a, np_.array([0, 1]), axis=1), "x"),
    "flip": (lambda L, np_, lax, P: lambda a: np_.flip(a, 0), "xy"),
    "cumsum_free_axis": (lambda L, np_, lax, P: lambda a: np_.cumsum(a, 1), "x"),
    "cumsum_split_axis": (lambda L, np_, lax, P: lambda a: np_.cumsum(a, 0), "xy"),
    "sort": (lambda L, np_, lax, P: lambda a: np_.sort(a, 1), "x"),
    "sort_split_axis": (lambda L, np_, lax, P: lambda a: np_.sort(a, 0), "x"),
    "argsort_split_axis": (lambda L, np_, lax, P: lambda a: np_.argsort(a, 0), "x"),
    "zeros_plus": (lambda L, np_, lax, P: lambda a: np_.zeros((8, 4)) + a, "x"),
    "zeros_out_sharding": (lambda L, np_, lax, P: lambda a: np_.zeros((8, 4), out_sharding=P("X", "Y")) + a, "x"),
    "full_out_sharding": (lambda L, np_, lax, P: lambda a: np_.full((8, 4), 2.0, out_sharding=P("X")) * a, "xy"),
    "ones_like": (lambda L, np_, lax, P: np_.ones_like, "xy"),
    "iota_out_sharding": (lambda L, np_, lax, P: lambda a: lax.broadcasted_iota(
        np_.int32, (8, 4), 0, out_sharding=P("X")) + a, "x"),
    "reshard": (lambda L, np_, lax, P: lambda a: L.sharding.reshard(a, P(None, "X")), "x"),
    "auto_axes": (lambda L, np_, lax, P: lambda a: L.sharding.auto_axes(
        lambda t: (t @ t.T).sum(1), out_sharding=P("X"))(a), "xy"),
    "fori_loop": (lambda L, np_, lax, P: lambda a: lax.fori_loop(0, 3, lambda i, c: c * 2, a), "xy"),
    "while_loop": (lambda L, np_, lax, P: lambda a: lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2), (0, a))[1], "xy"),
    "cond": (lambda L, np_, lax, P: lambda a: lax.cond(True, lambda v: v + 1, lambda v: v * 2, a), "xy"),
    "scan_split_rows": (lambda L, np_, lax, P: lambda a: lax.scan(lambda c, r: (c + r, c), np_.zeros(4), a)[1], "x"),
    "scan_rows": (lambda L, np_, lax, P: lambda a: lax.scan(lambda c, r: (c, r * 2), 0.0, a)[1], "t"),
    "scan_carry_changes_type": (lambda L, np_, lax, P: lambda a: lax.scan(
        lambda c, r: (c + r, r.sum()), np_.zeros(4), a)[0], "t"),
    "shard_map": (lambda L, np_, lax, P: L.shard_map(lambda a, b: lax.psum(a @ b, "Y"), in_specs=(P("X", "Y"), P("Y")),
                                                     out_specs=P("X")), "xy w"),
    "grad": (lambda L, np_, lax, P: L.grad(lambda a: (np_.sin(a) ** 2).sum()), "xy"),
    "vmap": (lambda L, np_, lax, P: L.vmap(lambda r: r * 2), "xy"),
}
# JAX's eager basic indexing gathers, whose typing refuses what its jitted slices accept; meshax slices eagerly
# too, so its eager results equal JAX's jitted ones there.
EAGER_AS_JIT = {"index_unsplit_column"}


def _run(lib_name, case, jitted):
    lib, np_, lax, types = LIBS[lib_name]
    make, names = CASES[case]
    mesh = lib.make_mesh((4, 2), ("X", "Y"), axis_types=(types.Explicit, types.Explicit))
    with lib.set_mesh(mesh):
        args = []
        for i, name in enumerate(names.split()):
            shape, spec = ARGS[name]
            value = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 7 + i
            args.append(lib.device_put(value, _spec(lib, spec)))
        fn = make(lib, np_, lax, lib.P)
        inside = []

        def traced(*a):
            out = fn(*a)
            inside.append(str(lib.typeof(out)))
            return out

        try:
            out = lib.jit(traced)(*args) if jitted else fn(*args)
        except Exception as error:  # noqa: BLE001 - the error is what is compared
            return ("error", type(error).__name__, str(error).split(". Got")[0].split(", got")[0][:120])
        spec = tuple(out.sharding.spec) + (None,) * (out.ndim - len(out.sharding.spec))
        spec = tuple(e if not isinstance(e, tuple) or len(e) != 1 else e[0] for e in spec)
        return ("ok", str(lib.typeof(out)), inside[0] if jitted else None, spec, np.asarray(out))


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_types_and_shardings_as_jax(case, jitted):
    theirs = _run("jax", case, jitted or case in EAGER_AS_JIT)
    ours = _run("meshax", case, jitted)
    if case in EAGER_AS_JIT and not jitted:
        theirs = theirs[:2] + (None,) + theirs[3:]
    if theirs[0] == "error":
        assert ours == theirs
    else:
        assert ours[:-1] == theirs[:-1]
        np.testing.assert_allclose(ours[-1], theirs[-1], rtol=2e-5, atol=1e-5)


def test_errors_are_sharding_type_errors():
    mesh = meshax.make_mesh((4, 2), ("X", "Y"), axis_types=(AxisType.Explicit,) * 2)
    with meshax.set_mesh(mesh):
        a = meshax.device_put(np.ones((8, 4), np.float32), meshax.P(None, "X"))
        b = meshax.device_put(np.ones((4, 2), np.float32), meshax.P("X"))
        with pytest.raises(ShardingTypeError, match="ambiguous how the output should be sharded"):
            meshax.jit(mnp.matmul)(a, b)
        with pytest.raises(ShardingTypeError, match="This reshape is not supported"):
            meshax.jit(lambda t: t.reshape(32))(a)


def test_auto_axes_and_explicit_axes_retype_inside_jit():
    def program(lib, np_, types):
        seen = []
        mesh = lib.make_mesh((4, 2), ("X", "Y"), axis_types=(types.Explicit, types.Explicit))
        auto = lib.make_mesh((4, 2), ("X", "Y"), axis_types=(types.Auto, types.Auto))
        with lib.set_mesh(mesh):
            x = lib.device_put(np.arange(32, dtype=np.float32).reshape(8, 4), lib.P("X", "Y"))

            def inner(t):
                seen.append(str(lib.typeof(t)))
                return t * 2

            out = lib.jit(lambda a: lib.sharding.auto_axes(inner, out_sharding=lib.P(None, "Y"))(a))(x)
            seen += [str(lib.typeof(out)), repr(out.sharding.spec)]
        with lib.set_mesh(auto):
            x = lib.device_put(np.arange(32, dtype=np.float32).reshape(8, 4), lib.P("X", "Y"))
            out = lib.jit(lambda a: lib.sharding.explicit_axes(inner, in_sharding=lib.P("X"))(a))(x)
            seen += [str(lib.typeof(out))]
        return seen

    ours, theirs = program(meshax, mnp, AxisType), program(jax, jjnp, JAxisType)
    theirs = [s.replace("P(", "PartitionSpec(") for s in theirs]
    assert ours == theirs


def test_sharding_type_error_is_a_type_error():
    """A deliberate difference (README): JAX's ShardingTypeError is an Exception; meshax's is also a TypeError."""
    assert issubclass(ShardingTypeError, TypeError)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_cond_branches_of_different_shardings_are_refused_as_jax(jitted):
    def program(lib, types):
        mesh = lib.make_mesh((4, 2), ("X", "Y"), axis_types=(types.Explicit,) * 2)
        with lib.set_mesh(mesh):
            x = lib.device_put(np.ones((8, 4), np.float32), lib.P("X"))
            fn = lambda p, a: lib.lax.cond(  # noqa: E731
                p, lambda v: v * 2, lambda v: lib.sharding.reshard(v, lib.P(None, "X")), a)
            with pytest.raises(TypeError) as error:
                (lib.jit(fn) if jitted else fn)(True, x)
        message = str(error.value)
        return message.split("\n")[0], next(line for line in message.split("\n") if line.startswith("The output"))

    assert program(meshax, AxisType) == program(jax, JAxisType)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_an_operation_run_inside_auto_axes_is_typed_afresh_outside_it(jitted):
    """Eager operations remember their plan per inputs' types: a transpose run with the axes typed Auto (inside
    auto_axes) must not lend its Auto layout to the same transpose outside, where the axes are Explicit."""
    mesh = meshax.make_mesh((4, 2), ("X", "Y"), axis_types=(AxisType.Explicit,) * 2)
    with meshax.set_mesh(mesh):
        a = meshax.device_put(np.arange(32, dtype=np.float32).reshape(8, 4), meshax.P("X", "Y"))
        inside = meshax.sharding.auto_axes(lambda t: t.T, out_sharding=meshax.P("Y", "X"))
        (meshax.jit(inside) if jitted else inside)(a)
        assert tuple(a.T.sharding.spec) == _run("jax", "transpose", False)[3] == ("Y", "X")
