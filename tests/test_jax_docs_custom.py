"""custom_jvp/custom_vjp as JAX's custom-derivatives page uses them: the function itself runs outside
transformations; the user's rules under grad, also through vmap, jit and shard_map. Against JAX."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp


def functions(lib, np_):
    @lib.custom_jvp
    def f(x, y):
        return np_.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        return f(x, y), np_.cos(x) * tx * y * 10.0 + np_.sin(x) * ty

    @lib.custom_vjp
    def g(x, y):
        return np_.sin(x) * y

    g.defvjp(lambda x, y: (g(x, y), (np_.cos(x), np_.sin(x), y)),
             lambda res, ct: (res[0] * ct * res[2] * 3.0, None))  # no cotangent for y: zeros
    return f, g


def mesh_of(lib):
    if lib is jax:
        return jax.make_mesh((8,), ("i",), axis_types=(jax.sharding.AxisType.Auto,))
    return meshax.make_mesh((8,), ("i",))


CASES = {
    "call": lambda lib, np_, h, x: h(x, 2.0),
    "jit": lambda lib, np_, h, x: lib.jit(h)(x, 2.0),
    "grad": lambda lib, np_, h, x: lib.grad(lambda x, y: h(x, y).sum(), (0, 1))(x, 2.0),
    "jit_grad": lambda lib, np_, h, x: lib.jit(lib.grad(lambda x, y: h(x, y).sum(), (0, 1)))(x, 2.0),
    "grad_jit": lambda lib, np_, h, x: lib.grad(lib.jit(lambda x, y: h(x, y).sum()), (0, 1))(x, 2.0),
    "vmap_grad": lambda lib, np_, h, x: lib.vmap(lib.grad(lambda v: h(v, 3.0)))(x),
    "grad_vmap": lambda lib, np_, h, x: lib.grad(lambda v: lib.vmap(h, (0, None))(v, 2.0).sum())(x),
    "grad_vmap_both": lambda lib, np_, h, x: lib.grad(lambda v: lib.vmap(h)(v, v * 2).sum())(x),
    "jit_closure": lambda lib, np_, h, x: lib.jit(lambda x, y: lib.grad(lambda v: h(v, y).sum())(x))(x, 2.0),
    "shard_map_grad": lambda lib, np_, h, x: lib.shard_map(
        lambda v: lib.grad(lambda w: h(w, 2.0).sum())(v), mesh=mesh_of(lib), in_specs=lib.sharding.PartitionSpec("i"),
        out_specs=lib.sharding.PartitionSpec("i"))(x),
    "jit_shard_map_grad": lambda lib, np_, h, x: lib.jit(lib.shard_map(
        lambda v: lib.grad(lambda w: h(w, 2.0).sum())(v), mesh=mesh_of(lib), in_specs=lib.sharding.PartitionSpec("i"),
        out_specs=lib.sharding.PartitionSpec("i")))(x),
    "grad_shard_map": lambda lib, np_, h, x: lib.grad(lambda v: lib.shard_map(
        lambda w: h(w, 2.0), mesh=mesh_of(lib), in_specs=lib.sharding.PartitionSpec("i"),
        out_specs=lib.sharding.PartitionSpec("i"))(v).sum())(x),
}


@pytest.mark.parametrize("which", [0, 1], ids=["custom_jvp", "custom_vjp"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_custom_rules_as_in_jax(case, which):
    def run(lib, np_):
        h = functions(lib, np_)[which]
        return CASES[case](lib, np_, h, np_.linspace(0.0, 1.0, 8))

    ours, theirs = run(meshax, mnp), run(jax, jjnp)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-6)


def test_the_function_runs_itself_outside_transformations():
    def run(lib, np_):
        calls = []

        @lib.custom_jvp
        def relu_like(x):
            calls.append(1)
            if x > 0:  # Python control flow on the value: fine when called directly, and under grad
                return x
            return 0.0  # a Python scalar result stays one

        relu_like.defjvps(lambda t, ans, x: np_.where(x > 0, t, 0.0))
        direct = relu_like(3.0)
        kind = type(relu_like(-2.0)).__name__
        grad = float(lib.grad(relu_like)(3.0))
        return direct, kind, len(calls), grad

    assert run(meshax, mnp) == run(jax, jjnp) == (3.0, "float", 3, 1.0)  # the jvps call it once more


def test_custom_vjp_runs_itself_once_outside_transformations():
    calls = []

    @meshax.custom_vjp
    def f(x):
        calls.append(x)
        return x * 2.0 if x > 0 else x

    f.defvjp(lambda x: (f(x), None), lambda _, ct: (ct * 3.0,))
    assert f(2.0) == 4.0 and calls == [2.0]
    assert float(meshax.grad(f)(2.0)) == 3.0


def test_python_control_flow_in_the_function_fails_under_jit_as_in_jax():
    def run(lib):
        @lib.custom_jvp
        def f(x):
            return x if x > 0 else 0.0

        f.defjvps(lambda t, ans, x: t)
        with pytest.raises(lib.errors.TracerBoolConversionError):
            lib.jit(f)(1.0)

    run(meshax)
    run(jax)


def test_jvp_and_jaxpr():
    f = functions(meshax, mnp)[0]
    primal, tangent = meshax.jvp(f, (2.0, 3.0), (1.0, 0.0))
    theirs = jax.jvp(functions(jax, jjnp)[0], (2.0, 3.0), (1.0, 0.0))
    np.testing.assert_allclose([float(primal), float(tangent)], [float(v) for v in theirs], rtol=1e-6)
    assert "custom_jvp_call" in str(meshax.make_jaxpr(lambda x: f(x, 2.0))(1.0))


@pytest.mark.parametrize("fun", [lambda np_, x: x + 2.0 / x, lambda np_, x: 0.5 * (x + 3.0 / x),
                                 lambda np_, x: np_.sin(x) + x * x], ids=["add_div", "newton", "sin_square"])
def test_vmap_of_grad_sums_batched_and_unbatched_cotangents(fun):
    """A value used twice gets one unbatched and one batched cotangent under vmap(grad): they sum batched."""
    def run(lib, np_):
        xs = np_.array([1.0, 4.0, 9.0])
        return (lib.vmap(lib.grad(lambda x: fun(np_, x)))(xs),
                lib.vmap(lambda a: lib.vjp(lambda x: fun(np_, x), a)[1](1.0)[0])(xs),
                lib.jit(lib.vmap(lib.grad(lambda x: fun(np_, x))))(xs))

    for a, b in zip(run(meshax, mnp), run(jax, jjnp)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
