"""Unreduced and reduced values inside shard_map (in_specs/out_specs with unreduced=/reduced=, lax.pcast to
'unreduced'/'reduced'/'varying', psum of partial sums) and their derivatives, compared with JAX 0.10.2 eagerly and
under jit: types printed in the body, each device's buffers, values and gradients."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp

LIBS = [(jax, jjnp), (meshax, mnp)]
MODES = ["eager", "jit"]


def both(run):
    return [run(lib, np_) for lib, np_ in LIBS]


def mesh_x(lib):
    return lib.make_mesh((2,), ("X",), axis_types=(lib.sharding.AxisType.Explicit,))


def shards(array):
    return sorted((shard.device.id, np.asarray(shard.data).tolist()) for shard in array.addressable_shards)


def wrap(lib, mode):
    return lib.jit if mode == "jit" else (lambda f: f)


@pytest.mark.parametrize("mode", MODES)
def test_inputs_typed_unreduced_and_reduced_in_the_body(mode):
    def run(lib, np_):
        seen = []
        with lib.set_mesh(mesh_x(lib)):
            sharded = lib.device_put(np_.arange(8.0), lib.P("X"))
            partial = np_.einsum("i,i->", sharded, sharded, out_sharding=lib.P(unreduced={"X"}))
            reduced = lib.reshard(np_.arange(4.0), lib.P(reduced={"X"}))

            @lib.shard_map(in_specs=(lib.P("X"), lib.P(unreduced={"X"}), lib.P(reduced={"X"})),
                           out_specs=(lib.P("X"), lib.P()))
            def f(a, c, d):
                seen.extend(str(lib.typeof(v)) for v in (a, c, d))
                return a + d, lib.lax.psum(c, "X")

            out, total = wrap(lib, mode)(f)(sharded, partial, reduced)
            return seen, str(lib.typeof(out)), np.asarray(out).tolist(), float(total)

    theirs, ours = both(run)
    assert ours == theirs
    assert ours[0] == ["float32[4]{V:X}", "float32[]{U:X}", "float32[4]{R:X}"]


def _matmul_partial(lib):
    @lib.shard_map(in_specs=(lib.P(None, "X"), lib.P("X", None)), out_specs=lib.P(None, None, unreduced={"X"}))
    def matmul_partial(a, b):
        return lib.lax.pcast(a @ b, "X", to="unreduced")

    return matmul_partial


def _operands(lib, np_):
    a = lib.device_put(np_.arange(4.0).reshape(2, 2), lib.P(None, "X"))
    b = lib.device_put(np_.arange(4.0, 8.0).reshape(2, 2), lib.P("X", None))
    return a, b


@pytest.mark.parametrize("mode", MODES)
def test_pcast_to_unreduced_returns_each_devices_partial_product(mode):
    def run(lib, np_):
        with lib.set_mesh(mesh_x(lib)):
            a, b = _operands(lib, np_)
            c = wrap(lib, mode)(_matmul_partial(lib))(a, b)
            return str(lib.typeof(c)), shards(c), np.asarray(lib.reshard(c, lib.P())).tolist()

    theirs, ours = both(run)
    assert ours == theirs
    assert ours[2] == (np.arange(4.0).reshape(2, 2) @ np.arange(4.0, 8.0).reshape(2, 2)).tolist()


@pytest.mark.parametrize("mode", MODES)
def test_gradient_through_an_unreduced_output(mode):
    def run(lib, np_):
        with lib.set_mesh(mesh_x(lib)):
            a, b = _operands(lib, np_)
            matmul_partial = _matmul_partial(lib)

            def loss(a, b):
                return np_.sum(lib.reshard(matmul_partial(a, b), lib.P(None, None)) ** 2)

            grads = wrap(lib, mode)(lib.grad(loss, argnums=(0, 1)))(a, b)
            return [(str(lib.typeof(g)), np.asarray(g).tolist()) for g in grads]

    theirs, ours = both(run)
    assert ours == theirs


@pytest.mark.parametrize("mode", MODES)
def test_gradient_of_a_reduced_input_is_unreduced(mode):
    def run(lib, np_):
        with lib.set_mesh(mesh_x(lib)):
            x = lib.device_put(np_.arange(8 * 4.0).reshape(8, 4) / 32.0, lib.P("X", None))
            w = lib.reshard(np_.arange(4 * 2.0).reshape(4, 2) / 10.0, lib.P(None, None, reduced={"X"}))

            @lib.shard_map(in_specs=(lib.P("X", None), lib.P(None, None, reduced={"X"})), out_specs=lib.P("X", None))
            def apply_layer(x, w):
                return np_.tanh(x @ w)

            dw = wrap(lib, mode)(lib.grad(lambda w, x: np_.sum(apply_layer(x, w) ** 2)))(w, x)
            return str(lib.typeof(dw)), shards(dw), np.asarray(lib.reshard(dw, lib.P())).tolist()

    theirs, ours = both(run)
    assert ours[0] == theirs[0] == "float32[4,2]{U:X}"
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-7)
    for (_, mine), (_, reference) in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(mine, reference, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", MODES)
def test_scan_over_reduced_weights_accumulates_unreduced_gradients(mode):
    def run(lib, np_):
        def loss(stacked_ws, batch):
            final, _ = lib.lax.scan(lambda xs, w: (np_.tanh(xs @ w), None), batch, stacked_ws)
            return np_.sum(final ** 2)

        def step(stacked_ws, xs):
            def microbatch(acc, xs_mb):
                grads = lib.grad(loss)(stacked_ws, xs_mb)
                assert lib.typeof(grads).sharding.spec.unreduced == {"X"}
                return acc + grads, None

            acc = lib.reshard(np_.zeros_like(stacked_ws), lib.P(unreduced={"X"}))
            acc, _ = lib.lax.scan(microbatch, acc, xs)
            return lib.reshard(stacked_ws, lib.P()) - 0.01 * lib.reshard(acc, lib.P())

        with lib.set_mesh(mesh_x(lib)):
            ws = lib.device_put(np_.stack([np_.eye(4) / 2] * 3), lib.P(reduced={"X"}))
            xs = lib.device_put(np_.linspace(-1.0, 1.0, 5 * 2 * 4).reshape(5, 2, 4), lib.P(None, "X", None))
            new = wrap(lib, mode)(step)(ws, xs)
            return str(lib.typeof(new)), np.asarray(new)

    theirs, ours = both(run)
    assert ours[0] == theirs[0] == "float32[3,4,4]"
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("source, to", [("varying", "reduced"), ("varying", "varying"), ("invariant", "unreduced"),
                                        ("varying", "sideways")])
def test_pcasts_jax_refuses_are_refused(source, to):
    def run(lib, np_):
        with lib.set_mesh(mesh_x(lib)):
            x = lib.device_put(np_.arange(4.0), lib.P("X"))
            spec = lib.P("X") if source == "varying" else lib.P()

            @lib.shard_map(in_specs=spec, out_specs=lib.P("X"))
            def f(v):
                return lib.lax.pcast(v, "X", to=to)

            with pytest.raises(Exception) as caught:
                f(x if source == "varying" else np_.arange(2.0))
            return type(caught.value).__name__

    theirs, ours = both(run)
    assert ours == theirs == "ValueError"


def test_in_specs_must_say_what_inputs_are():
    def run(lib, np_):
        with lib.set_mesh(mesh_x(lib)):
            sharded = lib.device_put(np_.arange(8.0), lib.P("X"))
            partial = np_.einsum("i,i->", sharded, sharded, out_sharding=lib.P(unreduced={"X"}))
            f = lib.shard_map(lambda c: c, in_specs=lib.P(), out_specs=lib.P(unreduced={"X"}))
            with pytest.raises(ValueError) as caught:
                f(partial)
            return "unreduced" in str(caught.value)

    theirs, ours = both(run)
    assert ours == theirs == True  # noqa: E712


def test_unreduced_specs_need_explicit_axes():
    def run(lib, np_):
        with lib.set_mesh(lib.make_mesh((2,), ("X",), axis_types=(lib.sharding.AxisType.Auto,))):
            f = lib.shard_map(lambda v: v, in_specs=lib.P("X"), out_specs=lib.P(unreduced={"X"}))
            with pytest.raises(ValueError) as caught:
                f(np_.arange(4.0))
            return "Explicit" in str(caught.value)

    theirs, ours = both(run)
    assert ours == theirs == True  # noqa: E712


def test_the_replication_error_names_the_users_function():
    """README: the out_specs replication error names the function passed to shard_map and the output's type (JAX
    0.10.2 names its own internal `_rem_singleton`)."""
    with meshax.set_mesh(mesh_x(meshax)):
        x = meshax.device_put(mnp.arange(6.0), meshax.P("X"))

        def identity(v):
            return v

        with pytest.raises(ValueError, match=r"(?s)function .identity. .*\(output 0, f32\[3\]\{V:X\}\)"):
            meshax.shard_map(identity, in_specs=meshax.P("X"), out_specs=meshax.P())(x)
