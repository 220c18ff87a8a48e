"""JAX names that meshax lacks raise NotImplementedError (also an AttributeError, so hasattr stays False);
names JAX lacks raise a plain AttributeError; the name lists are JAX's own."""
from __future__ import annotations

import pytest

import meshax
import meshax.lax
import meshax.nn
import meshax.numpy
import meshax.random
from meshax._src.compat.jax_names import JAX_NAMES

MODULES = {"jax": meshax, "jax.lax": meshax.lax, "jax.numpy": meshax.numpy, "jax.random": meshax.random,
           "jax.nn": meshax.nn, "jax.tree": meshax.tree, "jax.debug": meshax.debug}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_jax_name_is_there_or_not_implemented(module):
    ours = MODULES[module]
    missing = []
    for name in sorted(JAX_NAMES[module]):
        try:
            getattr(ours, name)
        except NotImplementedError as e:
            assert str(e) == f"{module}.{name} is not implemented in meshax yet"
            assert isinstance(e, AttributeError)
            assert not hasattr(ours, name)
            missing.append(name)
    assert len(missing) < len(JAX_NAMES[module])  # tests/test_api_coverage.py asks for none


@pytest.mark.parametrize("module, name", [("jax.interpreters.partial_eval", "lower_jaxpr2"),
                                          ("jax.interpreters.batching", "batch_subtrace"),
                                          ("jax.extend.core", "TraceTag")])
def test_known_missing_names(module, name):
    import importlib

    with pytest.raises(NotImplementedError, match=f"{module}.{name} is not implemented in meshax yet"):
        getattr(importlib.import_module("meshax" + module[len("jax"):]), name)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_names_jax_lacks_are_attribute_errors(module):
    with pytest.raises(AttributeError) as info:
        getattr(MODULES[module], "no_such_name_anywhere")
    assert not isinstance(info.value, NotImplementedError)


def test_new_public_names():
    assert meshax.eval_shape is not None and meshax.ShapeDtypeStruct is not None
    from meshax.experimental import mesh_utils

    devices = mesh_utils.create_device_mesh((meshax.device_count(),))
    assert list(devices) == sorted(meshax.devices(), key=lambda d: (d.process_index, d.id))
    grid = mesh_utils.create_device_mesh((2, meshax.device_count() // 2))
    assert grid.shape == (2, meshax.device_count() // 2)
    mesh = meshax.sharding.Mesh(grid, ("a", "b"))
    assert mesh.shape == {"a": 2, "b": meshax.device_count() // 2}
    with pytest.raises(ValueError):
        mesh_utils.create_device_mesh((3, 5))
