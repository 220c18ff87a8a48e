"""meshax.tree (the jax.tree namespace), differential against real jax.tree."""
from __future__ import annotations

import collections
import operator

import pytest

import meshax

jax = pytest.importorskip("jax")

Point = collections.namedtuple("Point", ["x", "y"])
TREES = [
    {"a": 1, "b": (2, 3), "c": [4, {"d": 5}]},
    [1, None, (2,), Point(3, 4)],
    (),
    7,
    collections.OrderedDict([("z", 1), ("a", 2)]),
]


@pytest.mark.parametrize("tree", TREES)
def test_map_leaves_structure_flatten(tree):
    assert meshax.tree.map(lambda x: x * 10, tree) == jax.tree.map(lambda x: x * 10, tree)
    assert meshax.tree.leaves(tree) == jax.tree.leaves(tree)
    leaves, treedef = meshax.tree.flatten(tree)
    jleaves, jtreedef = jax.tree.flatten(tree)
    assert leaves == jleaves
    assert meshax.tree.structure(tree).num_leaves == jax.tree.structure(tree).num_leaves
    assert str(treedef) == str(jtreedef)
    assert meshax.tree.unflatten(treedef, [x + 1 for x in leaves]) == \
        jax.tree.unflatten(jtreedef, [x + 1 for x in jleaves])


@pytest.mark.parametrize("tree", TREES[:2])
def test_paths(tree):
    ours = [(meshax.tree_util.keystr(p), x) for p, x in meshax.tree.leaves_with_path(tree)]
    theirs = [(jax.tree_util.keystr(p), x) for p, x in jax.tree.leaves_with_path(tree)]
    assert ours == theirs
    assert [(meshax.tree_util.keystr(p), x) for p, x in meshax.tree.flatten_with_path(tree)[0]] == theirs
    f = lambda p, x: (len(p), x)  # noqa: E731
    assert meshax.tree.map_with_path(f, tree) == jax.tree.map_with_path(f, tree)


def test_reduce_all_transpose_broadcast_and_is_leaf():
    tree = {"a": [1, 2], "b": (3, 4)}
    assert meshax.tree.reduce(operator.add, tree) == jax.tree.reduce(operator.add, tree)
    assert meshax.tree.reduce(operator.add, tree, 100) == jax.tree.reduce(operator.add, tree, 100)
    assert meshax.tree.reduce_associative(operator.add, tree) == jax.tree.reduce_associative(operator.add, tree)
    assert meshax.tree.all(tree) == jax.tree.all(tree)
    assert meshax.tree.all([1, 0]) == jax.tree.all([1, 0])
    nested = [(1, 2), (3, 4), (5, 6)]
    ours = meshax.tree.transpose(meshax.tree.structure([0, 0, 0]), meshax.tree.structure((0, 0)), nested)
    theirs = jax.tree.transpose(jax.tree.structure([0, 0, 0]), jax.tree.structure((0, 0)), nested)
    assert ours == theirs
    assert meshax.tree.broadcast([1, 2], [[1, 2], [3, (4, 5)]]) == jax.tree.broadcast([1, 2], [[1, 2], [3, (4, 5)]])
    is_leaf = lambda x: isinstance(x, tuple)  # noqa: E731
    assert meshax.tree.leaves(nested, is_leaf=is_leaf) == jax.tree.leaves(nested, is_leaf=is_leaf)
    assert meshax.tree.map(len, nested, is_leaf=is_leaf) == jax.tree.map(len, nested, is_leaf=is_leaf)


def test_map_with_several_trees_and_mismatch():
    a, b = {"x": 1, "y": (2, 3)}, {"x": 10, "y": (20, 30)}
    assert meshax.tree.map(operator.add, a, b) == jax.tree.map(operator.add, a, b)
    with pytest.raises(ValueError):
        meshax.tree.map(operator.add, a, {"x": 1})


def test_tree_is_a_lazy_submodule():
    import subprocess
    import sys

    code = "import sys, meshax; meshax.tree.map(lambda x: x, [1]); print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr
