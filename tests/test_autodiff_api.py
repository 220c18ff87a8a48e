"""The autodiff API against JAX: jacobians, hessian, custom_jvp/custom_vjp, checkpoint policies, stop_gradient,
has_aux, linearize, eagerly and under jit."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as jnp
from oracle import check_against_jax
from meshax.sharding import NamedSharding, PartitionSpec as P

X = np.linspace(0.1, 1.2, 6, dtype=np.float32).reshape(2, 3)
W = np.linspace(-1, 1, 9, dtype=np.float32).reshape(3, 3)


def _softplus(lib, np_):
    @lib.custom_jvp
    def softplus(x):
        return np_.log1p(np_.exp(x))

    @softplus.defjvp
    def softplus_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return softplus(x), t * 0.5

    return softplus


def _clipped(lib, np_):
    @lib.custom_vjp
    def scaled(x, s):
        return x * s

    scaled.defvjp(lambda x, s: (x * s, (s,)), lambda res, g: (np_.clip(g * res[0], -0.1, 0.1), np_.sum(g) * 0.))
    return scaled


def _mlp(np_):
    return lambda w, x: np_.sum(np_.tanh(np_.tanh(x @ w) @ w.T))


CASES = {
    "jacrev": lambda lib, np_: lib.jacrev(lambda x: np_.sin(x) * np_.sum(x ** 2))(X),
    "jacfwd": lambda lib, np_: lib.jacfwd(lambda x: np_.sin(x) * np_.sum(x ** 2))(X),
    "jacrev_tree": lambda lib, np_: lib.jacrev(lambda a, b: {"u": a * b, "v": np_.sum(a)}, argnums=(0, 1))(X[0], X[1]),
    "jacfwd_tree": lambda lib, np_: lib.jacfwd(lambda a, b: (a * b, np_.sum(a)), argnums=(0, 1))(X[0], X[1]),
    "hessian": lambda lib, np_: lib.hessian(lambda v: np_.sum(np_.tanh(v) ** 3))(X[0]),
    "custom_jvp_grad": lambda lib, np_: lib.grad(lambda x: np_.sum(_softplus(lib, np_)(x)))(X),
    "custom_jvp_jvp": lambda lib, np_: lib.jvp(_softplus(lib, np_), (X,), (np.ones_like(X),)),
    "custom_vjp_grad": lambda lib, np_: lib.grad(lambda x: np_.sum(_clipped(lib, np_)(x, 2.0) ** 2))(X),
    "stop_gradient": lambda lib, np_: lib.grad(lambda x: np_.sum(x * lib.lax.stop_gradient(x)))(X),
    "value_and_grad_aux": lambda lib, np_: lib.value_and_grad(lambda a, b: (np_.sum(a * b), a), argnums=(0, 1),
                                                              has_aux=True)(X, X),
    "linearize": lambda lib, np_: lib.linearize(lambda x: np_.sin(x) * x, X)[1](np.ones_like(X)),
    "vjp_tree": lambda lib, np_: lib.vjp(lambda d: {"s": np_.sum(d["a"] * d["b"])}, {"a": X, "b": X})[1](
        {"s": np.float32(3.)}),
}
for _policy in ("nothing_saveable", "everything_saveable", "dots_saveable"):
    CASES[f"checkpoint_{_policy}"] = (lambda p: lambda lib, np_: lib.grad(
        lib.checkpoint(_mlp(np_), policy=getattr(lib.checkpoint_policies, p)), argnums=(0, 1))(W, X))(_policy)
CASES["remat_default"] = lambda lib, np_: lib.grad(lib.remat(_mlp(np_)))(W, X)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_against_jax(name, jitted):
    check_against_jax(CASES[name], jitted)


def test_forward_mode_of_custom_vjp_is_refused_as_in_jax():
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        meshax.jvp(lambda x: _clipped(meshax, jnp)(x, 2.0), (X,), (X,))


def test_checkpoint_recomputes_what_the_policy_does_not_save():
    def tanh_count(policy):
        f = meshax.checkpoint(_mlp(jnp), policy=policy) if policy else _mlp(jnp)
        return str(meshax.make_jaxpr(meshax.grad(f))(W, X)).count("= tanh ")

    policies = meshax.checkpoint_policies
    assert tanh_count(None) == tanh_count(policies.everything_saveable) == 2
    assert tanh_count(policies.nothing_saveable) == tanh_count(policies.dots_saveable) == 4  # forward, then again


Z = np.array([1 + 1j, 0.5 - 2j], np.complex64)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_holomorphic_and_complex_vjp(jitted):
    def program(lib, np_):
        wrap = lib.jit if jitted else (lambda f: f)
        return (wrap(lib.grad(lambda z: np_.sum(z ** 2 * np_.sin(z)), holomorphic=True))(Z),
                wrap(lambda z: lib.vjp(lambda z: z * np_.conj(z), z)[1](np_.ones(2, np_.complex64)))(Z),
                wrap(lambda z: lib.vjp(np_.abs, z)[1](np_.ones(3, np_.float32)))(np.append(Z, 0j)),
                wrap(lib.grad(lambda x: np_.sum(np_.abs(x * (1 + 1j)))))(np.array([1., -2.], np.float32)))
    for a, b in zip(jax.tree_util.tree_leaves(program(meshax, jnp)), jax.tree_util.tree_leaves(program(jax, jjnp))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5)


def test_complex_output_needs_holomorphic():
    for lib, np_ in ((meshax, jnp), (jax, jjnp)):
        with pytest.raises(TypeError, match="holomorphic=True"):
            lib.grad(lambda z: np_.sum(z ** 2))(Z)


def test_jit_in_and_out_shardings_of_gradients():
    mesh = meshax.make_mesh((4, 2), ("a", "b"))
    rows = NamedSharding(mesh, P("a"))
    w = meshax.device_put(np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4), rows)
    f = lambda w: jnp.sum(jnp.tanh(w) ** 2)  # noqa: E731
    expected = jax.grad(lambda w: jjnp.sum(jjnp.tanh(w) ** 2))(np.asarray(w))
    g = meshax.jit(meshax.grad(f), in_shardings=rows, out_shardings=NamedSharding(mesh, P(None, "b")))(w)
    assert g.sharding == NamedSharding(mesh, P(None, "b"))
    g2 = meshax.grad(meshax.jit(f, in_shardings=rows))(w)
    assert g2.sharding == w.sharding
    for got in (g, g2):
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=2e-6)


@pytest.mark.parametrize("jitted", [False, True])
def test_the_zero_gradient_of_a_python_scalar_is_weakly_typed_as_in_jax(jitted):
    def grads(lib, np_):
        g = lib.grad(lambda x, y: np_.sin(x) * 2.0, argnums=(0, 1))
        return (lib.jit(g) if jitted else g)(1.0, 2.0)

    ours, theirs = grads(meshax, jnp), grads(jax, jjnp)
    for mine, reference in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(reference), rtol=1e-6)
        assert (mine.dtype, mine.weak_type) == (reference.dtype, reference.weak_type)


@pytest.mark.parametrize("jitted", [False, True])
def test_zero_cotangents_given_to_a_custom_vjp_rule_keep_the_weak_type(jitted):
    def grads(lib, np_):
        @lib.custom_vjp
        def f(x, y):
            return x ** 2, np_.cos(y)

        f.defvjp(lambda x, y: (f(x, y), (x, y)), lambda res, g: (2 * res[0] * g[0], -np_.sin(res[1]) * g[1]))
        g = lib.grad(lambda x, y: f(x, y)[0], argnums=(0, 1))
        return (lib.jit(g) if jitted else g)(1.0, 2.0)

    for mine, reference in zip(grads(meshax, jnp), grads(jax, jjnp)):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(reference), rtol=1e-6)
        assert (mine.dtype, mine.weak_type) == (reference.dtype, reference.weak_type)
