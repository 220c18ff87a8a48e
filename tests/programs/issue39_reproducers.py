"""Issue 39's reproducers, plain JAX programs, each printing its value (list, dtype, weak type) or the class of
its exception; tests/test_issue39_reproducers.py runs this file with real JAX and with `python -m meshax.as_jax`."""
import contextlib
import functools
import io

import numpy as np
import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P, NamedSharding
from jax import lax

mesh = jax.make_mesh((8,), ("i",), axis_types=(jax.sharding.AxisType.Auto,))

def show(name, fn):
    try:
        out = fn()
        if isinstance(out, tuple):
            out = tuple(np.asarray(o).tolist() if hasattr(o, "shape") else o for o in out)
        elif hasattr(out, "shape"):
            out = (np.asarray(out).tolist(), str(out.dtype), getattr(out, "weak_type", None))
        print(f"{name}: {out!r}")
    except Exception as e:
        print(f"{name}: raises {type(e).__name__}")

try:
    from jax import shard_map
except ImportError:
    from jax.experimental.shard_map import shard_map

def psum_one():
    seen = []
    def g(x):
        n = jax.lax.psum(1, "i"); seen.append(type(n).__name__); return x * len(range(n))
    out = shard_map(g, mesh=mesh, in_specs=P("i"), out_specs=P("i"))(jnp.arange(8.))
    return (np.asarray(out).tolist(), seen[0])
show("psum(1)", psum_one)
show("psum(1) jit", lambda: jax.jit(shard_map(lambda x: x * jax.lax.psum(1, "i"), mesh=mesh, in_specs=P("i"), out_specs=P("i")))(jnp.arange(8.)))

def typeof_sharding():
    s = jax.typeof(jnp.zeros((2, 3))).sharding
    return (tuple(s.spec), tuple(s.update(spec=P(None, None)).spec), len(s.spec))
show("typeof sharding", typeof_sharding)

def spec_prefix():
    shapes = []
    def f(a, b, c):
        shapes.extend([x.shape for x in jax.tree.leaves(c)]); return a
    shard_map(f, mesh=mesh, in_specs=(P(), P(), P("i")), out_specs=P())(jnp.zeros(3), None, (jnp.zeros((16, 2)), jnp.zeros(16)))
    return shapes
show("spec prefix", spec_prefix)
show("expand_dims range", lambda: jnp.expand_dims(jnp.zeros((3, 4)), axis=range(2)).shape)

def remat_print():
    buf = io.StringIO()
    @jax.checkpoint
    def f(x):
        jax.debug.print("x={x}", x=x); return jnp.sin(x)
    with contextlib.redirect_stdout(buf):
        jax.grad(f)(1.0); jax.effects_barrier()
    return buf.getvalue().count("x=")
show("debug.print in checkpoint under grad", remat_print)
show("profiler exists", lambda: hasattr(jax.profiler, "trace") and callable(jax.profiler.start_trace))
show("out_specs longer than rank", lambda: shard_map(lambda x: x, mesh=mesh, in_specs=P("i"), out_specs=P("i", None))(jnp.arange(8.)))
x5 = jnp.arange(5)
show("at clip", lambda: x5.at[20].add(10, mode="clip"))
show("at drop no-wrap", lambda: x5.at[-1].set(99, wrap_negative_indices=False, mode="drop"))
x6 = jnp.arange(6)
show("reshape F", lambda: jnp.reshape(x6, (2, 3), order="F"))
show("ravel F", lambda: jnp.ravel(jnp.reshape(x6, (2, 3)), order="F"))
show("bincount neg", lambda: jnp.bincount(jnp.array([-1, 0, 1, 3, -2]), length=5))
m = jnp.array([[1., 2.], [3., 4.]]); w = jnp.array([[True, False], [True, False]])
show("nanmax initial where", lambda: jnp.nanmax(m, axis=0, initial=-5., where=w))
show("nanmin initial where", lambda: jnp.nanmin(m, axis=0, initial=9., where=w))
show("sinc d2", lambda: jax.grad(jax.grad(jnp.sinc))(0.))
show("sinc d4", lambda: jax.grad(jax.grad(jax.grad(jax.grad(jnp.sinc))))(0.))
show("percentile nearest", lambda: jnp.percentile(jnp.array([1., 2., 3., 4.]), jnp.array([25., 50., 75.]), method="nearest"))
def committed():
    a = jax.device_put(1., jax.devices()[0]); b = jax.device_put(2., jax.devices()[1]); return a + b
show("committed different devices", committed)
def donated():
    f = jax.jit(lambda x: x + 1, donate_argnums=0); x = jnp.ones(3); f(x); return np.asarray(x)
show("donated read", donated)
show("jit lone spec", lambda: jax.jit(lambda x: x * 2, in_shardings=NamedSharding(jax.make_mesh((8,), ("dev",)), P("dev")))(jnp.arange(8.)))
def lone_spec():
    m2 = jax.make_mesh((8,), ("dev",), axis_types=(jax.sharding.AxisType.Auto,))
    with jax.set_mesh(m2):
        out = jax.jit(lambda x: x * 2, in_shardings=P("dev"))(np.arange(8.))
        return (np.asarray(out).tolist(), tuple(out.sharding.spec))
show("jit lone PartitionSpec", lone_spec)
a23 = jnp.arange(6.).reshape(2, 3); b34 = jnp.arange(12.).reshape(3, 4)
show("einsum interleaved", lambda: jnp.einsum(a23, [0, 1], b34, [1, 2], [0, 2]))
show("unique size jit", lambda: jax.jit(lambda x: jnp.unique(x, size=3, fill_value=-1))(jnp.array([3, 1, 3, 2, 1])))
show("repeat total jit", lambda: jax.jit(lambda x, r: jnp.repeat(x, r, total_repeat_length=6))(jnp.array([1, 2, 3]), jnp.array([1, 2, 3])))
show("extract size jit", lambda: jax.jit(lambda c, x: jnp.extract(c, x, size=2, fill_value=-1))(jnp.array([True, False, True]), jnp.array([1, 2, 3])))
show("size axis tuple", lambda: jnp.size(jnp.zeros((2, 3)), axis=(1,)))
show("pad mean", lambda: jnp.pad(jnp.array([1., 2., 6.]), 2, mode="mean"))
def padfn(vector, pad_width, iaxis, kwargs):
    vector = vector.at[:pad_width[0]].set(-1); return vector.at[vector.shape[0] - pad_width[1]:].set(-2) if pad_width[1] else vector
show("pad callable", lambda: jnp.pad(jnp.array([1., 2., 3.]), 1, mode=padfn))
show("percentile weights", lambda: jnp.percentile(jnp.array([1., 2., 3., 4.]), 50., weights=jnp.array([1., 1., 1., 5.]), method="inverted_cdf"))
show("reduce_window defaults", lambda: lax.reduce_window(jnp.arange(16.).reshape(4, 4), 0., lax.add, (2, 2)))
def groups(name):
    def body(x):
        if name == "psum":
            return lax.psum(x, "i", axis_index_groups=[[0, 1, 2, 3], [4, 5, 6, 7]])
        if name == "all_gather":
            return lax.all_gather(x, "i", axis_index_groups=[[0, 1, 2, 3], [4, 5, 6, 7]], tiled=True)
        return lax.psum_scatter(x, "i", axis_index_groups=[[0, 1, 2, 3], [4, 5, 6, 7]], tiled=True)
    spec = P("i")
    return shard_map(body, mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False)(jnp.arange(32.))
for name in ("psum", "all_gather", "psum_scatter"):
    show(f"{name} groups", functools.partial(groups, name))
show("wrap_key_data dtype", lambda: jax.random.key_data(jax.random.wrap_key_data(np.array([0, 1], dtype=np.uint32))))
show("eigh eigvals_only", lambda: jax.scipy.linalg.eigh(jnp.array([[2., 1.], [1., 2.]]), eigvals_only=True))
show("delete assume_unique", lambda: jnp.delete(jnp.arange(5), jnp.array([1, 3]), assume_unique_indices=True))
show("linspace retstep", lambda: type(jnp.linspace(0., 1., 5, retstep=True)[1]).__name__ in ("ArrayImpl", "Array"))
for fname in ("nonzero", "unique"):
    def conc(fname=fname):
        try:
            jax.jit(lambda x: getattr(jnp, fname)(x))(jnp.array([1, 0, 2]))
        except Exception as e:
            return type(e).__name__
    show(f"{fname} jit error", conc)
def delete_conc():
    try:
        jax.jit(lambda x, i: jnp.delete(x, i))(jnp.arange(4), jnp.array([1]))
    except Exception as e:
        return type(e).__name__
show("delete jit error", delete_conc)
show("float_power weak", lambda: jnp.float_power(2., 3.))
show("heaviside weak", lambda: jnp.heaviside(0., 0.5))
show("argwhere 0d", lambda: jnp.argwhere(jnp.array(3)).shape)
