"""Unreduced arrays (PartitionSpec(unreduced=...): each device holds a partial sum) and reduced axes, compared
with JAX 0.10.2: placement, types, which operations their typing allows, partial products of contractions, and
resharding (summing), eagerly and under jit."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp

LIBS = [(jax, jjnp), (meshax, mnp)]


def explicit(lib, shape=(4, 2), names=("X", "Y")):
    return lib.make_mesh(shape, names, axis_types=(lib.sharding.AxisType.Explicit,) * len(shape))


def shards(array):
    return {shard.device.id: np.asarray(shard.data).tolist() for shard in array.addressable_shards}


def both(run):
    return [run(lib, np_) for lib, np_ in LIBS]


PLACEMENTS = [
    (None, ((), {"unreduced": {"Y"}})),
    (("X", "Y"), (("X", None), {"unreduced": {"Y"}})),
    (("X", "Y"), ((None, None), {"unreduced": {"X"}})),
    (("X", "Y"), ((None, None), {"unreduced": {"X", "Y"}})),
    (("X",), ((None, "Y"), {"unreduced": {"X"}})),
]


@pytest.mark.parametrize("source, target", PLACEMENTS,  # ids sorted: a set's order differs between processes
                         ids=[f"{spec}-unreduced={sorted(kw['unreduced'])}" for _, (spec, kw) in PLACEMENTS])
def test_placing_values_as_partial_sums_as_jax(source, target):
    def run(lib, np_):
        with lib.set_mesh(explicit(lib)):
            x = np_.arange(8 * 4.0).reshape(8, 4)
            if source is not None:
                x = lib.device_put(x, lib.P(*source))
            y = lib.device_put(x, lib.P(*target[0], **target[1]))
            back = lib.reshard(y, lib.P())
            return str(lib.typeof(y)), shards(y), tuple(back.sharding.spec), np.asarray(back).tolist()

    theirs, ours = both(run)
    assert ours == theirs


def _contractions(lib, np_, jitted):
    wrap = lib.jit if jitted else (lambda f: f)
    with lib.set_mesh(explicit(lib, (2,), ("X",))):
        a = lib.device_put(np_.arange(4.0).reshape(2, 2), lib.P(None, "X"))
        b = lib.device_put(np_.arange(4.0, 8.0).reshape(2, 2), lib.P("X", None))
        partial = lib.P(None, None, unreduced={"X"})
        c = wrap(lambda p, q: np_.einsum("ij,jk->ik", p, q, out_sharding=partial))(a, b)
        c2 = wrap(lambda p, q: np_.dot(2.0 * p, q, out_sharding=partial))(a, b)
        total = wrap(lambda u, v: u + v)(c, c2)
        summed = wrap(lambda u: u.sum(0))(c)
        reduced = wrap(lambda u: lib.reshard(u, lib.P("X", None)))(total)
        return (str(lib.typeof(c)), shards(c), str(lib.typeof(total)), shards(total), str(lib.typeof(summed)),
                shards(summed), str(lib.typeof(reduced)), np.asarray(reduced).tolist())


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_contractions_keep_each_devices_partial_product(jitted):
    theirs, ours = both(lambda lib, np_: _contractions(lib, np_, jitted))
    assert ours == theirs


OPERATIONS = {
    "add": lambda lib, np_, y, x: y + y,
    "mul_scalar": lambda lib, np_, y, x: y * 2,
    "neg": lambda lib, np_, y, x: -y,
    "sub": lambda lib, np_, y, x: y - y,
    "cos": lambda lib, np_, y, x: np_.cos(y),
    "add_plain": lambda lib, np_, y, x: y + x,
    "sum": lambda lib, np_, y, x: y.sum(),
    "sum_rows": lambda lib, np_, y, x: y.sum(1),
}


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_which_operations_partial_sums_allow_as_jax(name):
    """The typing (under jit: JAX's eager path cannot run some of these) and its errors."""
    def run(lib, np_):
        with lib.set_mesh(explicit(lib)):
            x = lib.device_put(np_.arange(32.0).reshape(8, 4), lib.P("X", "Y"))
            y = lib.device_put(x, lib.P("X", None, unreduced={"Y"}))
            try:
                out = lib.jit(lambda u, v: OPERATIONS[name](lib, np_, u, v))(y, x)
            except Exception as error:  # noqa: BLE001 - the error is the result compared
                return type(error).__name__, str(error).splitlines()[0]
            value = np.asarray(lib.reshard(out, lib.P())).tolist()
            return str(lib.typeof(out)), value

    theirs, ours = both(run)
    assert ours == theirs


def test_reduced_axes_stay_in_types_as_jax():
    def run(lib, np_):
        seen = []
        with lib.set_mesh(explicit(lib)):
            w = lib.reshard(np_.ones((4, 2)), lib.P(None, None, reduced={"Y"}))
            x = lib.device_put(np_.ones((8, 4)), lib.P("X", None))
            for f in (lambda v: v, lambda v: v * 2, lambda v: v + v, lambda v: v.T, lambda v: x @ v):
                seen.append(str(lib.typeof(f(w))))
                seen.append(str(lib.jit(f)(w).sharding.spec).replace("PartitionSpec(", "P("))
        return seen

    theirs, ours = both(run)
    assert ours == theirs


def test_reading_partial_sums_gives_their_sum():
    """A listed difference: JAX 0.12 fails reading an unreduced array on the host (JaxRuntimeError)."""
    with meshax.set_mesh(explicit(meshax)):
        x = np.arange(32.0).reshape(8, 4)
        y = meshax.device_put(meshax.device_put(x, meshax.P("X", "Y")), meshax.P("X", None, unreduced={"Y"}))
        np.testing.assert_array_equal(np.asarray(y), x)
        np.testing.assert_array_equal(np.asarray(y + y), 2 * x)
        assert float(y.sum()) == x.sum()
    with jax.set_mesh(explicit(jax)):
        z = jax.device_put(jax.device_put(x, jax.P("X", "Y")), jax.P("X", None, unreduced={"Y"}))
        with pytest.raises(jax.errors.JaxRuntimeError):
            np.asarray(z)


@pytest.mark.parametrize("n,k", [(2, 2), (4, 1)], ids=["2x2", "4x1"])
def test_partial_sums_across_processes(n, k):
    from multiprocess import check_names, checked_lines

    for lines in checked_lines("tests/programs/unreduced_partial_sums.py", n, k).values():
        names = check_names(lines)
        assert {"summed", "read", "doubled-sum", "product"} <= names, lines
        assert len([n for n in names if n.startswith(("placed-", "partial-"))]) == 2 * k, lines
        assert f"typed float32[{4},{4}]{{U:X}}" in lines, lines


def test_cotangents_of_reduced_values_are_unreduced_under_jit():
    """301/sharding-ad.md: a weight made reduced over the batch axis gets an unreduced gradient (no all-reduce
    per use), summed by the transpose of the reshard that made it reduced."""
    def run(lib, np_):
        with lib.set_mesh(explicit(lib, (2,), ("X",))):
            x = lib.device_put(np_.arange(8 * 4.0).reshape(8, 4), lib.P("X", None))
            w = lib.device_put(np_.arange(4 * 2.0).reshape(4, 2) / 10.0, lib.P(None, None))
            seen = []

            def loss(v, u):
                v = lib.reshard(v, lib.P(None, None, reduced={"X"}))
                return np_.sum((u @ v) ** 2)

            def inner(v, u):
                g = lib.grad(lambda a, b: np_.sum((b @ a) ** 2))(v, u)
                seen.append(str(lib.typeof(g)))
                return g

            g1 = lib.jit(lib.grad(loss))(w, x)
            g2 = lib.jit(inner)(lib.reshard(w, lib.P(None, None, reduced={"X"})), x)
            return (str(lib.typeof(g1)), np.asarray(g1), str(lib.typeof(g2)),
                    np.asarray(lib.reshard(g2, lib.P())), seen)

    theirs, ours = both(run)
    assert (ours[0], ours[2], ours[4]) == (theirs[0], theirs[2], theirs[4])
    for mine, jaxs in ((ours[1], theirs[1]), (ours[3], theirs[3])):  # the products' rounding is BLAS's or XLA's
        np.testing.assert_allclose(mine, jaxs, rtol=1e-6)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_gradients_of_reduced_weights_are_unreduced_through_indexing(jitted):
    """A stack of reduced weights indexed in the loss: the gradient is scattered into zeros that are partial
    sums too, and comes back unreduced (eagerly too: not resharded to the weights' layout)."""
    def run(lib, np_):
        with lib.set_mesh(explicit(lib, (2,), ("X",))):
            ws = lib.device_put(np_.stack([np_.eye(4) / 2] * 3), lib.P(reduced={"X"}))
            xb = lib.device_put(np_.arange(8.0).reshape(2, 4), lib.P("X", None))
            grad = lib.grad(lambda w, x: np_.sum(np_.tanh(x @ w[1]) ** 2))
            g = (lib.jit(grad) if jitted else grad)(ws, xb)
            return str(lib.typeof(g)), np.asarray(lib.reshard(g, lib.P()))

    theirs, ours = both(run)
    assert ours[0] == theirs[0] == "float32[3,4,4]{U:X}"
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5, atol=1e-6)
