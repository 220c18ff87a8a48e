"""Generated flattening of one pytree structure (tree/structure_code.py), against tree_flatten/tree_unflatten."""
from __future__ import annotations

import collections

import pytest

import meshax
from meshax._src.tree.structure_code import structure_code
from meshax._src.tree.tree_util import tree_flatten, tree_unflatten

Pair = collections.namedtuple("Pair", "first second")

TREES = [
    1,
    (),
    [],
    {},
    None,
    (1, [2, 3], {"b": 4, "a": (5, None)}, Pair(6, {"z": [7]})),
    ((1,), {}, [None]),
    {1: 2, 3: [None, (4,)]},
    ([(1, 2)] * 3, {"w": {"k": 1, "b": 2}}),
]


@pytest.mark.parametrize("tree", TREES, ids=repr)
def test_round_trip_matches_tree_flatten_and_unflatten(tree):
    leaves, td = tree_flatten(tree)
    flatten, unflatten = structure_code(td)
    assert flatten(tree) == leaves
    rebuilt = unflatten(leaves)
    expected = tree_unflatten(td, leaves)
    assert rebuilt == expected and type(rebuilt) is type(expected)
    assert tree_flatten(rebuilt)[1] == td
    if isinstance(rebuilt, dict):
        assert list(rebuilt) == list(expected)  # the same key order


@pytest.mark.parametrize("structure, other", [
    ((1, 2), (1, 2, 3)),
    ((1, 2), [1, 2]),
    ({"a": 1, "b": 2}, {"a": 1, "c": 2}),
    ({"a": 1, "b": 2}, {"a": 1}),
    ({"a": 1}, collections.OrderedDict(a=1)),
    (Pair(1, 2), (1, 2)),
    ((None, 1), (0, 1)),
    ([[1]], [1]),
])
def test_another_structure_gives_none(structure, other):
    flatten, _ = structure_code(tree_flatten(structure)[1])
    assert flatten(other) is None


def test_a_leaf_position_takes_any_value():
    flatten, _ = structure_code(tree_flatten((1, {"a": 2}))[1])
    assert flatten(((9, 9), {"a": None})) == [(9, 9), None]


def test_a_registered_node_is_not_written_out():
    assert structure_code(tree_flatten(meshax.tree_util.Partial(print, 1))[1]) is None
    assert structure_code(tree_flatten(collections.OrderedDict(a=1))[1]) is None
