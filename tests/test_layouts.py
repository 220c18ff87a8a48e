"""Formats and layouts (jax.experimental.layout) compared with JAX 0.10.2: an Array's `.format`, jit with
Format in_shardings/out_shardings, a compiled program's input_formats/output_formats, device_put to a Format; and
meshax's refusal of layouts other than row-major (README)."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from jax.experimental import layout as jlayout
from meshax.experimental import layout as mlayout

LIBS = [(jax, jjnp, jlayout), (meshax, mnp, mlayout)]


def both(run):
    return [run(*lib) for lib in LIBS]


def describe(fmt):
    sharding = fmt.sharding
    return fmt.layout.major_to_minor, fmt.layout.tiling, type(sharding).__name__


@pytest.mark.parametrize("shape", [(), (5,), (4, 8), (2, 3, 4)])
def test_an_arrays_format_is_row_major_on_its_sharding(shape):
    def run(lib, np_, layout):
        x = np_.ones(shape)
        return describe(x.format), x.format.sharding == x.sharding, repr(x.format.layout)

    theirs, ours = both(run)
    assert ours == theirs


def test_format_and_layout_reprs():
    def run(lib, np_, layout):
        L, F = layout.Layout, layout.Format
        with pytest.raises(TypeError):
            F(lib.sharding.SingleDeviceSharding(lib.devices()[0]))
        return [repr(L((1, 0))), repr(F()), repr(F(L.AUTO)), L((0, 1)) == L(major_to_minor=(0, 1)), repr(L.AUTO)]

    theirs, ours = both(run)
    assert ours == theirs


@pytest.mark.parametrize("context_mesh", [False, True])
def test_compiled_formats_with_auto_layouts(context_mesh):
    def run(lib, np_, layout):
        L, F = layout.Layout, layout.Format
        duck = lib.ShapeDtypeStruct((4, 8), np_.float32)
        mesh = lib.make_mesh((2,), ("a",)) if context_mesh else None

        def compile_both():
            apply = lib.jit(lambda a, b: (a[0, :], b[:, 0]), in_shardings=F(L.AUTO), out_shardings=F(L.AUTO))
            compiled = apply.trace(duck, duck).lower().compile()
            arg_formats, kwarg_formats = compiled.input_formats
            init = lib.jit(lambda a, b: (a * 2, b * 3), out_shardings=arg_formats).trace(duck, duck).lower().compile()
            x = np_.arange(32.0).reshape(4, 8)
            first, second = compiled(*init(x, x))
            return ([f.layout.major_to_minor for f in arg_formats], kwarg_formats,
                    [f.layout.major_to_minor for f in init.output_formats], np.asarray(first).tolist(),
                    np.asarray(second).tolist())

        if mesh is None:
            return compile_both()
        with lib.set_mesh(mesh):
            return compile_both()

    theirs, ours = both(run)
    assert ours == theirs


def test_device_put_to_a_row_major_format():
    def run(lib, np_, layout):
        target = layout.Format(layout.Layout((0, 1)), lib.sharding.SingleDeviceSharding(lib.devices()[1]))
        y = lib.device_put(np.arange(6.0).reshape(2, 3), target)
        return describe(y.format), [d.id for d in y.devices()], y.committed, np.asarray(y).tolist()

    theirs, ours = both(run)
    assert ours == theirs


def test_other_layouts_are_refused():
    """README: meshax keeps NumPy's row-major buffers; a Format or constraint asking for another order raises."""
    F, L = mlayout.Format, mlayout.Layout
    with pytest.raises(NotImplementedError, match=r"row-major.*major_to_minor=\(1, 0\)"):
        meshax.device_put(np.ones((2, 3)), F(L((1, 0)), meshax.sharding.SingleDeviceSharding(meshax.devices()[0])))
    with pytest.raises(NotImplementedError, match="row-major"):
        meshax.jit(lambda a: a, in_shardings=F(L((1, 0))))


def test_compiled_formats_under_a_context_mesh_are_named_shardings():
    """README: arguments given without a sharding under set_mesh report NamedSharding(mesh, P()) in
    input_formats (JAX: GSPMDSharding, unequal to the NamedSharding its output_formats give)."""
    F, L = mlayout.Format, mlayout.Layout
    mesh = meshax.make_mesh((2,), ("a",))
    duck = meshax.ShapeDtypeStruct((4, 8), np.float32)
    with meshax.set_mesh(mesh):
        compiled = meshax.jit(lambda a: a, in_shardings=F(L.AUTO)).trace(duck).lower().compile()
        (fmt,), _ = compiled.input_formats
        again = meshax.jit(lambda a: a, out_shardings=fmt).trace(duck).lower().compile()
    assert fmt.sharding == meshax.NamedSharding(mesh, meshax.P())
    assert again.output_formats == fmt
