"""The JAX modules libraries build on (jax.scipy, jax.flatten_util, jax.extend / jax.core /
jax.interpreters, checkify, pmap, jax.test_util), checked against real JAX (the oracle) eagerly, under jit and,
where it applies, in shard_map and under grad/vmap."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import jax.scipy as jsp
import numpy as np
import pytest
from jax.experimental import checkify as jcheckify

import meshax
import meshax.numpy as mnp
import meshax.scipy as msp
from meshax.experimental import checkify
from meshax.extend import core as mcore
from meshax.interpreters import ad, batching
from meshax.sharding import PartitionSpec as P

from oracle import assert_same_tree

X = np.linspace(-3.0, 3.0, 13).astype(np.float32)
POSITIVE = np.linspace(0.1, 4.0, 9).astype(np.float32)
UNIT = np.linspace(0.05, 0.95, 7).astype(np.float32)


def both(case, *args, jitted=False, rtol=2e-5, atol=1e-6):
    """`case(library_module_tuple, *args)` with meshax and with JAX, compared."""
    ours_fn = (lambda *a: case((meshax, mnp, msp), *map(mnp.asarray, a)))
    theirs_fn = (lambda *a: case((jax, jjnp, jsp), *map(jjnp.asarray, a)))
    if jitted:
        ours_fn, theirs_fn = meshax.jit(ours_fn), jax.jit(theirs_fn)
    assert_same_tree(ours_fn(*args), theirs_fn(*args), rtol=rtol, atol=atol)


UNARY_SPECIAL = ["erf", "erfc", "erfinv", "gammaln", "digamma", "expit", "logit", "ndtr", "ndtri", "log_ndtr", "i0e",
                 "i1e", "i0", "i1", "entr", "gamma"]
DOMAIN = {"erfinv": UNIT * 2 - 1, "logit": UNIT, "ndtri": UNIT, "digamma": POSITIVE, "gamma": POSITIVE,
          "entr": POSITIVE}


@pytest.mark.parametrize("jitted", [False, True])
@pytest.mark.parametrize("name", UNARY_SPECIAL)
def test_special_unary(name, jitted):
    x = DOMAIN.get(name, X)
    both(lambda m, v: getattr(m[2].special, name)(v), x, jitted=jitted, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["erf", "gammaln", "expit", "log_ndtr", "ndtr", "xlogy", "xlog1py", "logsumexp"])
def test_special_gradients(name):
    def case(m, v):
        fn = getattr(m[2].special, name)
        if name in ("xlogy", "xlog1py"):
            return m[0].grad(lambda a, b: m[1].sum(fn(a, b)), argnums=(0, 1))(v, v + 1)
        return m[0].grad(lambda a: m[1].sum(fn(a)))(v)

    both(case, POSITIVE, rtol=1e-5)


def test_special_binary_and_edge_values():
    def case(m, x, y):
        s = m[2].special
        return dict(xlogy=s.xlogy(x, y), xlog1py=s.xlog1py(x, y), rel_entr=s.rel_entr(x, y), kl_div=s.kl_div(x, y),
                    betaln=s.betaln(y, y + 1), gammainc=s.gammainc(y, y), betainc=s.betainc(y, y, m[1].full_like(y, .3)),
                    poch=s.poch(y, 2.0), logsumexp=s.logsumexp(x, b=y), softmax=s.softmax(x),
                    multigammaln=s.multigammaln(y + 2, 3), factorial=s.factorial(m[1].arange(6.0)),
                    zeros=s.xlogy(m[1].zeros(2), m[1].zeros(2)), ndtr_tail=s.log_ndtr(m[1].array([-30.0, -8.0, 9.0])))

    x = np.array([0.0, 0.5, 2.0, 3.0], np.float32)
    y = np.array([0.0, 1.5, 0.25, 4.0], np.float32)
    both(case, x, y, rtol=1e-5, atol=1e-6)
    both(case, x, y, jitted=True, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("jitted", [False, True])
def test_stats(jitted):
    def case(m, x):
        stats = m[2].stats
        mean = m[1].array([0.5, -1.0])
        cov = m[1].array([[2.0, 0.3], [0.3, 1.0]])
        pts = m[1].stack([x[:5], x[5:10]], axis=-1)
        return dict(norm=[stats.norm.logpdf(x, 1.0, 2.0), stats.norm.pdf(x), stats.norm.cdf(x, 0.5),
                          stats.norm.logcdf(x), stats.norm.sf(x), stats.norm.logsf(x), stats.norm.ppf(UNIT, 1.0, 3.0),
                          stats.norm.isf(UNIT)],
                    logistic=[stats.logistic.logpdf(x, 0.5, 2.0), stats.logistic.cdf(x), stats.logistic.ppf(UNIT),
                              stats.logistic.sf(x)],
                    mvn=[stats.multivariate_normal.logpdf(pts, mean, cov), stats.multivariate_normal.pdf(pts, mean, cov)])

    both(case, X, jitted=jitted, rtol=2e-5, atol=1e-6)


def test_scipy_linalg():
    a = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32)
    b = np.arange(6.0, dtype=np.float32).reshape(3, 2)

    def case(m, a, b):
        la = m[2].linalg
        factor = la.cho_factor(a, lower=True)
        return dict(chol=la.cholesky(a), chol_lower=la.cholesky(a, lower=True), cho_solve=la.cho_solve(factor, b),
                    tri=la.solve_triangular(a, b, lower=True), tri_t=la.solve_triangular(a, b[:, 0], trans="T"),
                    solve=la.solve(a, b, assume_a="pos"), expm=la.expm(a / 4), block=la.block_diag(a, b, b[0]),
                    det=la.det(a), inv=la.inv(a))

    both(case, a, b, rtol=2e-5, atol=2e-5)
    both(case, a, b, jitted=True, rtol=2e-5, atol=2e-5)


def test_ravel_pytree():
    from jax.flatten_util import ravel_pytree as jravel
    from meshax.flatten_util import ravel_pytree

    tree = {"a": np.ones((2, 3), np.float32), "b": [np.arange(3, dtype=np.int32), np.float32(2.0)], "c": ()}
    ours, unravel = ravel_pytree(tree)
    theirs, junravel = jravel(tree)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    back = unravel(ours * 2)
    assert_same_tree(back, junravel(theirs * 2))
    assert back["b"][0].dtype == np.int32
    jitted = meshax.jit(lambda t: ravel_pytree(t)[0])(tree)
    np.testing.assert_array_equal(np.asarray(jitted), np.asarray(theirs))
    with pytest.raises(ValueError, match="expected an array of shape"):
        unravel(mnp.zeros(3))
    empty, unravel_empty = ravel_pytree({})
    assert empty.shape == (0,) and unravel_empty(empty) == {}


# ---- user-defined primitives (jax.extend.core.Primitive) on meshax's trace mechanism ---------------------------


def _make_scale_primitive():
    """scale(x, y) = 3 * x * y, with every rule a library registers."""
    prim = mcore.Primitive("scale3")
    calls = []

    @prim.def_impl
    def impl(x, y):
        calls.append(1)
        return 3.0 * x * y

    prim.def_abstract_eval(lambda x, y: mcore.ShapedArray(x.shape, x.dtype))
    ad.primitive_jvps[prim] = lambda primals, tangents: (
        prim.bind(*primals),
        sum(3.0 * ad.instantiate_zeros(t) * o for t, o in zip(tangents, primals[::-1])))
    batching.primitive_batchers[prim] = lambda args, dims: (
        prim.bind(*[batching.bdim_at_front(a, d, 4) for a, d in zip(args, dims)]), 0)
    return prim, calls


def test_primitive_eager_jit_grad_vmap_shard_map():
    prim, calls = _make_scale_primitive()
    x, y = mnp.arange(4.0), mnp.full(4, 2.0)
    expected = 3.0 * np.arange(4.0) * 2.0
    np.testing.assert_allclose(np.asarray(prim.bind(x, y)), expected)
    jitted = meshax.jit(lambda a, b: prim.bind(a, b) + 1)
    np.testing.assert_allclose(np.asarray(jitted(x, y)), expected + 1)
    assert "scale3" in str(meshax.make_jaxpr(lambda a, b: prim.bind(a, b))(x, y))
    grads = meshax.grad(lambda a, b: mnp.sum(prim.bind(a, b)), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(np.asarray(grads[0]), 6.0 * np.ones(4))
    np.testing.assert_allclose(np.asarray(grads[1]), 3.0 * np.arange(4.0))
    batched = meshax.vmap(lambda a: prim.bind(a, mnp.ones(3)))(mnp.arange(12.0).reshape(4, 3))
    np.testing.assert_allclose(np.asarray(batched), 3.0 * np.arange(12.0).reshape(4, 3))
    mesh = meshax.make_mesh((4,), ("x",))
    sharded = meshax.shard_map(lambda a, b: prim.bind(a, b), mesh=mesh, in_specs=(P("x"), P("x")), out_specs=P("x"))
    np.testing.assert_allclose(np.asarray(meshax.jit(sharded)(x, y)), expected)
    assert calls


def test_primitive_without_jvp_differentiates_through_its_impl_and_transpose_rule():
    prim = mcore.Primitive("cube")
    prim.def_impl(lambda x: x * x * x)
    prim.def_abstract_eval(lambda x: x)
    np.testing.assert_allclose(np.asarray(meshax.grad(lambda v: prim.bind(v))(2.0)), 12.0)

    double = mcore.Primitive("double")
    double.def_impl(lambda x: 2.0 * x)
    double.def_abstract_eval(lambda x: x)
    ad.deflinear2(double, lambda ct, x: [2.0 * ct])
    assert float(meshax.grad(lambda v: mnp.sum(double.bind(v)))(mnp.ones(3))[0]) == 2.0


def test_multiple_results_and_partial_eval():
    from meshax.extend import linear_util as lu
    from meshax.interpreters import partial_eval as pe

    split = mcore.Primitive("split2")
    split.multiple_results = True
    split.def_impl(lambda x: [x + 1, x * 2])
    split.def_abstract_eval(lambda x: [x, x])
    a, b = meshax.jit(lambda v: split.bind(v))(mnp.arange(3.0))
    np.testing.assert_allclose(np.asarray(a), [1, 2, 3])
    np.testing.assert_allclose(np.asarray(b), [0, 2, 4])

    def fn(known, unknown):
        return [known * 2, unknown + known]

    jaxpr, out_pvals, consts = pe.trace_to_jaxpr_nounits(
        lu.wrap_init(fn), [pe.PartialVal.known(mnp.ones(2)), pe.PartialVal.unknown(mcore.ShapedArray((2,), np.float32))])
    assert out_pvals[0].is_known() and not out_pvals[1].is_known()
    np.testing.assert_allclose(np.asarray(out_pvals[0].get_known()), [2, 2])
    assert len(jaxpr.invars) == 1 and len(jaxpr.outvars) == 1


def test_trace_state_and_avals():
    outside = mcore.get_opaque_trace_state(convention="flax")
    assert outside == mcore.get_opaque_trace_state()
    inside = []
    meshax.jit(lambda v: inside.append(mcore.get_opaque_trace_state()) or v)(1.0)
    assert inside[0] != outside
    aval = mcore.ShapedArray((3, 4), np.float32)
    assert mcore.mapped_aval(3, 0, aval).shape == (4,)
    assert mcore.unmapped_aval(5, 1, aval).shape == (3, 5, 4)
    assert mcore.primal_dtype_to_tangent_dtype(np.int32) == meshax.dtypes.float0


# ---- checkify ---------------------------------------------------------------------------------------------------


def _positive_log(lib, np_lib):
    def f(x):
        lib.check(x > 0, "x must be positive, got {x}", x=x)
        return np_lib.log(x)

    return f


@pytest.mark.parametrize("jitted", [False, True])
def test_checkify_user_checks(jitted):
    for lib, np_lib, cf in ((checkify, mnp, meshax.jit), (jcheckify, jjnp, jax.jit)):
        checked = lib.checkify(_positive_log(lib, np_lib))
        checked = cf(checked) if jitted else checked
        err, out = checked(np_lib.asarray(np.float32(-1.0)))
        assert err.get() == "x must be positive, got -1.0 (`check` failed)"
        assert np.isnan(np.asarray(out))
        err, out = checked(np_lib.asarray(np.float32(2.0)))
        assert err.get() is None and np.isclose(float(out), np.log(2.0))
        err.throw()
        with pytest.raises(lib.JaxRuntimeError, match="x must be positive"):
            checked(np_lib.asarray(np.float32(-3.0)))[0].throw()


def test_checkify_outside_checkify_and_automatic_checks():
    f = _positive_log(checkify, mnp)
    with pytest.raises(checkify.JaxRuntimeError, match=r"x must be positive, got -1.0 \(`check` failed\)"):
        f(mnp.asarray(np.float32(-1.0)))
    with pytest.raises(ValueError, match="Cannot abstractly evaluate a checkify.check which was not functionalized"):
        meshax.jit(f)(1.0)
    err, _ = checkify.checkify(lambda v: mnp.log(v), errors=checkify.nan_checks)(-1.0)
    assert err.get() == "nan generated by primitive: log."
    err, _ = checkify.checkify(lambda v: v // 0, errors=checkify.div_checks)(mnp.array(3))
    assert err.get() == "division by zero"
    err, _ = checkify.checkify(lambda v: meshax.vmap(f)(v))(mnp.array([1.0, -2.0, -3.0]))
    assert err.get().startswith("x must be positive, got -")
    err, _ = checkify.checkify(meshax.jit(f))(mnp.asarray(np.float32(-5.0)))
    assert err.get() == "x must be positive, got -5.0 (`check` failed)"
    leaves = meshax.tree_util.tree_leaves(err)
    assert bool(leaves[0]) is True
    with pytest.raises(TypeError, match="need to be PyTrees of arrays"):
        checkify.checkify(lambda v: checkify.check(v > 0, "{}", 1.0))(1.0)


# ---- pmap and pswapaxes -------------------------------------------------------------------------------------------


def test_pmap_against_jax():
    x = np.arange(4 * 4 * 2, dtype=np.float32).reshape(4, 4, 2)

    def case(m):
        lib, np_lib = m[0], m[1]
        return dict(
            psum=lib.pmap(lambda v: lib.lax.psum(v, "i"), axis_name="i")(np_lib.arange(4.0)),
            swap=lib.pmap(lambda v: lib.lax.pswapaxes(v, "i", 0), axis_name="i")(x),
            mean=lib.pmap(lambda v: lib.lax.pmean(v, "i") * 2, axis_name="i", in_axes=1)(x[:, :, 0]),
            broadcast=lib.pmap(lambda a, b: a * b, in_axes=(0, None))(np_lib.arange(4.0), 3.0),
            static=lib.pmap(lambda a, k: a + k, static_broadcasted_argnums=1)(np_lib.arange(2.0), 5),
            out_none=lib.pmap(lambda v: lib.lax.psum(v, "i"), axis_name="i", out_axes=None)(np_lib.ones(4)),
            index=lib.pmap(lambda v: lib.lax.axis_index("i") + v, axis_name="i")(np_lib.zeros(4, np.int32)),
        )

    assert_same_tree(case((meshax, mnp)), case((jax, jjnp)))
    with pytest.raises(ValueError, match="requires 9 logical devices"):
        meshax.pmap(lambda v: v)(mnp.ones(9))


# ---- jax.test_util ------------------------------------------------------------------------------------------------


def test_check_grads():
    from meshax.test_util import check_grads

    check_grads(lambda x, y: mnp.sin(x) * y ** 2, (np.float32(0.7), np.float32(1.3)), order=2, modes=("fwd", "rev"))

    @meshax.custom_jvp
    def wrong(x):
        return mnp.sin(x)

    wrong.defjvp(lambda primals, tangents: (mnp.sin(primals[0]), 2.0 * tangents[0]))
    with pytest.raises(AssertionError):
        check_grads(wrong, (np.float32(0.3),), order=1, modes=("fwd",))


def test_layout_names():
    from meshax.experimental.layout import Format, Layout, with_layout_constraint

    fmt = Format(Layout((0, 1)), meshax.NamedSharding(meshax.make_mesh((2,), ("x",)), P()))
    assert fmt.layout == Layout((0, 1)) and fmt.sharding is not None
    x = mnp.ones((2, 3))
    assert with_layout_constraint(x, Layout((0, 1))) is x
    with pytest.raises(NotImplementedError, match="row-major"):
        with_layout_constraint(x, Layout((1, 0)))


NEW_MODULES = ["jax.scipy.special", "jax.scipy.linalg", "jax.scipy.stats", "jax.scipy.stats.norm", "jax.core",
               "jax.extend.core", "jax.interpreters.ad", "jax.interpreters.batching", "jax.interpreters.partial_eval",
               "jax.experimental.checkify"]


@pytest.mark.parametrize("module", NEW_MODULES)
def test_jax_names_there_or_not_implemented(module):
    import importlib

    from meshax._src.compat.jax_names import JAX_NAMES

    ours = importlib.import_module("meshax" + module[len("jax"):])
    present = []
    for name in sorted(JAX_NAMES[module]):
        try:
            getattr(ours, name)
            present.append(name)
        except NotImplementedError as e:
            assert str(e) == f"{module}.{name} is not implemented in meshax yet" and isinstance(e, AttributeError)
    assert present, module
    with pytest.raises(AttributeError) as info:
        getattr(ours, "surely_not_a_jax_name")
    assert not isinstance(info.value, NotImplementedError)


def test_custom_vjp_symbolic_zeros_against_jax():
    def case(lib, np_lib):
        seen = []

        @lib.custom_vjp
        def f(x, y):
            return x * np_lib.sin(y)

        def fwd(x, y):
            seen.append((type(x).__name__, x.perturbed, y.perturbed))
            return f(x.value, y.value), (x.value, y.value)

        def bwd(res, g):
            x, y = res
            return g * np_lib.sin(y), g * x * np_lib.cos(y)

        f.defvjp(fwd, bwd, symbolic_zeros=True)
        grad_x = lib.grad(lambda x: f(x, 0.5))(2.0)
        grad_both = lib.grad(lambda x, y: f(x, y), argnums=(0, 1))(2.0, 0.5)
        return seen, float(grad_x), [float(v) for v in grad_both]

    ours = case(meshax, mnp)
    theirs = case(jax, jjnp)
    assert ours[0] == theirs[0] == [("CustomVJPPrimal", True, False), ("CustomVJPPrimal", True, True)]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6)
