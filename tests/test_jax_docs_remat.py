"""jax.ad_checkpoint and jax.checkpoint_policies as JAX's gradient-checkpointing page uses them, against JAX."""
import contextlib
import io

import jax
import jax.ad_checkpoint  # noqa: F401  (a submodule jax does not import itself)
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from meshax.sharding import PartitionSpec as P


def net(lib, np_, named=False):
    def layer(W, x):
        return np_.sin(np_.dot(W, x))

    def f(W1, W2, W3, x):
        x = layer(W1, x)
        x = lib.ad_checkpoint.checkpoint_name(x, name="a") if named else x
        x = layer(W2, x)
        x = lib.ad_checkpoint.checkpoint_name(x, name="b") if named else x
        x = layer(W3, x)
        return lib.ad_checkpoint.checkpoint_name(x, name="c") if named else x

    return f


def args(np_):
    return (np_.ones((5, 4)) * 0.3, np_.ones((6, 5)) * 0.2, np_.ones((7, 6)) * 0.1, np_.linspace(0.0, 1.0, 4))


POLICIES = [None, "everything_saveable", "nothing_saveable", "dots_saveable", "checkpoint_dots",
            "dots_with_no_batch_dims_saveable", ("save_only_these_names", "a"), ("save_any_names_but_these", "a"),
            ("save_anything_except_these_names", "b"), ("save_from_both", None),
            ("offload_dot_with_no_batch_dims", None)]


def policy_of(lib, spec):
    policies = lib.checkpoint_policies
    if spec is None:
        return None
    if isinstance(spec, str):
        return getattr(policies, spec)
    name, arg = spec
    if name == "save_from_both":
        return policies.save_from_both_policies(policies.save_only_these_names("a"), policies.dots_saveable)
    if name == "offload_dot_with_no_batch_dims":
        return policies.offload_dot_with_no_batch_dims("device", "pinned_host")
    return getattr(policies, name)(arg)


def printed(fn, *a):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fn(*a)
    return out.getvalue()


@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_policies_give_jax_gradients_eager_and_jitted(policy):
    def case(lib, np_):
        f = lib.checkpoint(net(lib, np_, named=True), policy=policy_of(lib, policy))
        grad = lib.grad(lambda *a: f(*a).sum(), argnums=(0, 1, 2, 3))
        return grad(*args(np_)), lib.jit(grad)(*args(np_))

    ours, theirs = case(meshax, mnp), case(jax, jjnp)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("policy", [None, "dots_with_no_batch_dims_saveable", ("save_only_these_names", "a"),
                                    ("save_any_names_but_these", "a")], ids=str)
def test_print_saved_residuals_prints_what_jax_prints(policy):
    def text(lib, np_):
        f = net(lib, np_, named=True)
        if policy is not None:
            f = lib.checkpoint(f, policy=policy_of(lib, policy))
        return printed(lib.ad_checkpoint.print_saved_residuals, f, *args(np_))

    assert text(meshax, mnp) == text(jax, jjnp)


def test_residuals_without_checkpoint_list_arguments_then_values_in_order():
    def text(lib, np_):
        return printed(lib.ad_checkpoint.print_saved_residuals, net(lib, np_), *args(np_))

    ours = text(meshax, mnp)
    assert ours == text(jax, jjnp)
    assert ours.splitlines()[0] == "f32[5,4] from the argument W1"


def test_checkpoint_name_is_the_identity_everywhere():
    x = np.linspace(0.0, 1.0, 8, dtype=np.float32)
    name = meshax.ad_checkpoint.checkpoint_name
    np.testing.assert_array_equal(np.asarray(name(mnp.asarray(x), "n")), x)
    np.testing.assert_array_equal(np.asarray(meshax.jit(lambda v: name(v * 2, "n"))(x)), x * 2)
    np.testing.assert_array_equal(np.asarray(meshax.vmap(lambda v: name(v, "n"))(x)), x)
    mesh = meshax.make_mesh((8,), ("i",))
    mapped = meshax.shard_map(lambda v: name(v + 1, "n"), mesh=mesh, in_specs=P("i"), out_specs=P("i"))
    np.testing.assert_array_equal(np.asarray(mapped(x)), x + 1)
    assert "name[name=n]" in str(meshax.make_jaxpr(lambda v: name(v, "n"))(x))
    np.testing.assert_allclose(float(meshax.grad(lambda v: name(mnp.sin(v), "n"))(0.5)), np.cos(0.5), rtol=1e-6)


def test_checkpoint_policies_namespace_has_jax_names():
    ours = {n for n in dir(meshax.checkpoint_policies) if not n.startswith("_")}
    theirs = {n for n in dir(jax.checkpoint_policies) if not n.startswith("_")}
    assert ours == theirs


def test_checkpoint_inside_shard_map_and_scan_matches_jax():
    def case(lib, np_):
        step = lib.checkpoint(lambda c, x: (np_.sin(c) * x, c),
                              policy=lib.checkpoint_policies.save_only_these_names("never"))
        loss = lambda xs: lib.lax.scan(step, np_.ones(()), xs)[0]
        return lib.grad(loss)(np_.linspace(0.1, 1.0, 5)), lib.jit(lib.grad(loss))(np_.linspace(0.1, 1.0, 5))

    for a, b in zip(case(meshax, mnp), case(jax, jjnp)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5)
    mesh = meshax.make_mesh((8,), ("i",))
    jmesh = jax.make_mesh((8,), ("i",), axis_types=(jax.sharding.AxisType.Auto,))

    def sharded(lib, np_, m):
        f = lib.checkpoint(lambda x: np_.sin(lib.ad_checkpoint.checkpoint_name(np_.cos(x), "c")) * x,
                           policy=lib.checkpoint_policies.save_only_these_names("c"))
        g = lib.shard_map(lib.grad(lambda x: f(x).sum()), mesh=m, in_specs=lib.sharding.PartitionSpec("i"),
                          out_specs=lib.sharding.PartitionSpec("i"))
        return g(np_.linspace(0.0, 1.0, 16)), lib.jit(g)(np_.linspace(0.0, 1.0, 16))

    for a, b in zip(sharded(meshax, mnp, mesh), sharded(jax, jjnp, jmesh)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5)


def test_remat3_and_other_documented_options_are_accepted():
    for name, value in [("jax_remat3", True), ("jax_threefry_partitionable", True),
                        ("jax_use_shardy_partitioner", True), ("jax_traceback_filtering", "off")]:
        previous = meshax.config.read(name)
        meshax.config.update(name, value)
        assert getattr(meshax.config, name) == value
        meshax.config.update(name, previous)
    assert meshax.config.jax_remat3 == jax.config.jax_remat3
    with pytest.raises(AttributeError, match="no option"):
        meshax.config.update("jax_no_such_option", 1)


def test_residuals_of_pytree_arguments_and_jitted_functions():
    def text(lib, np_):
        def f(p, x):
            return np_.sum(np_.sin(p["w"] * x) * p["b"][0])

        params = {"w": np_.ones(3), "b": (np_.ones(3),)}
        return (printed(lib.ad_checkpoint.print_saved_residuals, f, params, 2.0),
                printed(lib.ad_checkpoint.print_saved_residuals, lib.jit(f), params, 2.0))

    assert text(meshax, mnp) == text(jax, jjnp)
