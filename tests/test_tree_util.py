"""Tests for meshax.tree_util, differential against real jax.tree_util."""
from __future__ import annotations

import collections
import dataclasses
import functools
import operator
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from meshax import tree_util as mtu

jtu = pytest.importorskip("jax.tree_util")


# ---------------------------------------------------------------------------
# Custom node types, registered in both registries
# ---------------------------------------------------------------------------

Point = collections.namedtuple("Point", ["x", "y"])
Empty = collections.namedtuple("Empty", [])


class Box:
    """Registered with register_pytree_node (no keys): children a, b; aux tag."""

    def __init__(self, a, b, tag="box"):
        self.a, self.b, self.tag = a, b, tag

    def __eq__(self, other):
        return (type(other) is Box and (self.a, self.b, self.tag) == (other.a, other.b, other.tag))

    def __repr__(self):
        return f"Box({self.a!r}, {self.b!r}, {self.tag!r})"


def _box_flatten(b):
    return (b.a, b.b), b.tag


def _box_unflatten(tag, children):
    return Box(*children, tag=tag)


mtu.register_pytree_node(Box, _box_flatten, _box_unflatten)
jtu.register_pytree_node(Box, _box_flatten, _box_unflatten)


class Keyed:
    """Registered with register_pytree_with_keys: children named by GetAttrKey."""

    def __init__(self, w, v):
        self.w, self.v = w, v

    def __eq__(self, other):
        return type(other) is Keyed and (self.w, self.v) == (other.w, other.v)


def _keyed_flatten_with_keys(k, key_cls):
    return [(key_cls("w"), k.w), (key_cls("v"), k.v)], None


mtu.register_pytree_with_keys(Keyed, lambda k: _keyed_flatten_with_keys(k, mtu.GetAttrKey),
                              lambda _, c: Keyed(*c))
jtu.register_pytree_with_keys(Keyed, lambda k: _keyed_flatten_with_keys(k, jtu.GetAttrKey),
                              lambda _, c: Keyed(*c))


class Pair:
    """Registered with the class decorator."""

    def __init__(self, first, second):
        self.first, self.second = first, second

    def tree_flatten(self):
        return (self.first, self.second), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)

    def __eq__(self, other):
        return type(other) is Pair and (self.first, self.second) == (other.first, other.second)


mtu.register_pytree_node_class(Pair)
jtu.register_pytree_node_class(Pair)


@dataclasses.dataclass
class DC:
    x: object
    y: object
    name: str = "dc"


mtu.register_dataclass(DC, data_fields=["x", "y"], meta_fields=["name"])
jtu.register_dataclass(DC, data_fields=["x", "y"], meta_fields=["name"])


class TupleSub(tuple):
    pass


class DictSub(dict):
    pass


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def assert_same_tree(a, b):
    """Structural equality that also checks node types and dict key order."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, dict):
        assert list(a.keys()) == list(b.keys())
        if isinstance(a, collections.defaultdict):
            assert a.default_factory is b.default_factory
        for k in a:
            assert_same_tree(a[k], b[k])
    elif isinstance(a, (tuple, list)) and not isinstance(a, TupleSub):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same_tree(x, y)
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


def check_against_jax(tree, is_leaf=None):
    leaves, td = mtu.tree_flatten(tree, is_leaf=is_leaf)
    jleaves, jtd = jtu.tree_flatten(tree, is_leaf=is_leaf)
    # Leaves: the very same objects, in the same order.
    assert len(leaves) == len(jleaves)
    assert all(a is b for a, b in zip(leaves, jleaves))
    assert mtu.tree_leaves(tree, is_leaf=is_leaf) == leaves or all(
        a is b for a, b in zip(mtu.tree_leaves(tree, is_leaf=is_leaf), leaves))
    # Structure.
    assert repr(td) == repr(jtd)
    assert str(td) == str(jtd)
    assert td.num_leaves == jtd.num_leaves
    assert td.num_nodes == jtd.num_nodes
    assert [repr(c) for c in td.children()] == [repr(c) for c in jtd.children()]
    assert mtu.treedef_is_leaf(td) == jtu.treedef_is_leaf(jtd)
    assert mtu.tree_structure(tree, is_leaf=is_leaf) == td
    assert hash(mtu.tree_structure(tree, is_leaf=is_leaf)) == hash(td)
    # Round trip.
    rebuilt = mtu.tree_unflatten(td, leaves)
    assert_same_tree(rebuilt, jtu.tree_unflatten(jtd, jleaves))
    assert_same_tree(td.unflatten(leaves), rebuilt)
    # Key paths.
    pl, ptd = mtu.tree_flatten_with_path(tree, is_leaf=is_leaf)
    jpl, _ = jtu.tree_flatten_with_path(tree, is_leaf=is_leaf)
    assert ptd == td
    assert [x for _, x in pl] == leaves or all(x is y for (_, x), y in zip(pl, leaves))
    assert [mtu.keystr(p) for p, _ in pl] == [jtu.keystr(p) for p, _ in jpl]
    assert [mtu.keystr(p, simple=True, separator="/") for p, _ in pl] == [
        jtu.keystr(p, simple=True, separator="/") for p, _ in jpl]
    assert [repr(p) for p, _ in pl] == [repr(p) for p, _ in jpl]
    # tree_map with one and two trees.
    f = lambda x: ("leaf", id(x))  # noqa: E731
    assert_same_tree(mtu.tree_map(f, tree, is_leaf=is_leaf), jtu.tree_map(f, tree, is_leaf=is_leaf))
    g = lambda x, y: (id(x), id(y))  # noqa: E731
    assert_same_tree(mtu.tree_map(g, tree, tree, is_leaf=is_leaf),
                     jtu.tree_map(g, tree, tree, is_leaf=is_leaf))
    h = lambda p, x: (jtu.keystr(p), id(x))  # noqa: E731
    assert_same_tree(mtu.tree_map_with_path(h, tree, is_leaf=is_leaf),
                     jtu.tree_map_with_path(h, tree, is_leaf=is_leaf))
    # Pickle round trip of the treedef.
    td2 = pickle.loads(pickle.dumps(td))
    assert td2 == td and hash(td2) == hash(td) and repr(td2) == repr(td)
    return td


ARR = np.arange(3.0)

STRUCTURES = [
    1,
    "s",
    None,
    ARR,
    (),
    [],
    {},
    (None,),
    [None, None],
    {"a": None},
    (1,),
    (1, 2.5, "x"),
    [1, [2, [3, []]]],
    (1, {"a": 2, "b": [3, None]}),
    {"b": 1, "a": 2, "c": {"z": (), "y": [ARR]}},
    {3: "x", 1: "y", 2: ["z"]},
    {(2, 1): 1, (1, 3): 2},
    {1.5: 1, -2: 2},
    collections.OrderedDict([("b", 1), ("a", 2)]),
    collections.OrderedDict(),
    collections.OrderedDict([("z", [1, None]), ("a", {"q": 2})]),
    collections.defaultdict(list, {"b": 1, "a": [2, 3]}),
    collections.defaultdict(int),
    Point(1, 2),
    Point(Point(1, None), [2, (3,)]),
    Empty(),
    [Empty(), Point((), {})],
    Box(1, [2, 3]),
    Box(Box(1, None, "inner"), {"k": 2}),
    Keyed(1, (2, 3)),
    Pair(Pair(1, 2), [3]),
    DC([1, 2], {"a": 3}, name="hello"),
    TupleSub((1, 2)),
    DictSub(a=1),
    [{"a": Point(Box(1, 2), Keyed(3, Pair(4, None)))}, collections.OrderedDict(x=DC(5, 6))],
    ((((((1,),),),),),),
]


@pytest.mark.parametrize("tree", STRUCTURES, ids=[f"s{i}" for i in range(len(STRUCTURES))])
def test_matches_jax(tree):
    check_against_jax(tree)


IS_LEAF_FNS = {
    "none": lambda x: x is None,
    "list": lambda x: isinstance(x, list),
    "tuple2": lambda x: isinstance(x, tuple) and len(x) == 2,
    "dict": lambda x: type(x) is dict,
    "box": lambda x: isinstance(x, Box),
    "always": lambda x: True,
}


@pytest.mark.parametrize("name", sorted(IS_LEAF_FNS))
@pytest.mark.parametrize("tree", STRUCTURES[-12:], ids=[f"s{i}" for i in range(12)])
def test_is_leaf_matches_jax(tree, name):
    check_against_jax(tree, is_leaf=IS_LEAF_FNS[name])


def test_is_leaf_none_keeps_none():
    leaves, td = mtu.tree_flatten((None, 1, [None]), is_leaf=lambda x: x is None)
    assert leaves == [None, 1, None]
    assert repr(td) == "PyTreeDef((*, *, [*]))"


def test_basic_repr_and_counts():
    leaves, td = mtu.tree_flatten((1, {"a": 2, "b": [3, None]}))
    assert leaves == [1, 2, 3]
    assert repr(td) == "PyTreeDef((*, {'a': *, 'b': [*, None]}))"
    assert td.num_leaves == 3 and td.num_nodes == 7
    assert repr(mtu.tree_structure(None)) == "PyTreeDef(None)"
    assert repr(mtu.tree_structure(5)) == "PyTreeDef(*)"
    assert mtu.tree_leaves([1, None, [], (2,)]) == [1, 2]


def test_dict_sorted_and_restored():
    out = mtu.tree_map(lambda x: x * 10, {"b": 1, "a": 2})
    assert list(out) == ["a", "b"] and out == {"a": 20, "b": 10}
    od = mtu.tree_map(lambda x: x, collections.OrderedDict([("b", 1), ("a", 2)]))
    assert type(od) is collections.OrderedDict and list(od) == ["b", "a"]
    dd = mtu.tree_map(lambda x: x, collections.defaultdict(list, {"b": 1}))
    assert type(dd) is collections.defaultdict and dd.default_factory is list


def test_unsortable_keys():
    with pytest.raises(ValueError):
        mtu.tree_flatten({1: 1, "a": 2})
    with pytest.raises(ValueError):
        jtu.tree_flatten({1: 1, "a": 2})


def test_treedef_equality():
    s = mtu.tree_structure
    assert s((1, 2)) == s((3, 4))
    assert s((1, 2)) != s([1, 2])
    assert s({"a": 1}) != s({"b": 1})
    assert s(Point(1, 2)) != s((1, 2))
    assert s(Box(1, 2, "x")) != s(Box(1, 2, "y"))
    assert s(None) != s(1)
    assert s(collections.OrderedDict(a=1, b=2)) != s(collections.OrderedDict(b=2, a=1))
    assert len({s({"a": 1}), s({"a": 2}), s([1])}) == 2


def test_unflatten_wrong_count():
    td = mtu.tree_structure((1, 2))
    with pytest.raises(ValueError, match="Too few leaves"):
        mtu.tree_unflatten(td, [1])
    with pytest.raises(ValueError, match="Too many leaves"):
        mtu.tree_unflatten(td, [1, 2, 3])
    assert mtu.tree_unflatten(td, iter([5, 6])) == (5, 6)


def test_tree_map_multiple_trees():
    a = {"x": [1, 2], "y": (3, None)}
    b = {"x": [10, 20], "y": (30, None)}
    c = {"x": [100, 200], "y": (300, None)}
    f = lambda *xs: sum(xs)  # noqa: E731
    assert mtu.tree_map(f, a, b, c) == jtu.tree_map(f, a, b, c) == {
        "x": [111, 222], "y": (333, None)}


def test_tree_map_prefix_semantics():
    # Like JAX, the first tree only needs to be a prefix of the others.
    g = lambda x, y: (x, y)  # noqa: E731
    for a, b in [((1, 2), (1, (2, 3))), ({"a": 1}, {"a": [2, 3]}), ((1, 2), (None, [3]))]:
        assert_same_tree(mtu.tree_map(g, a, b), jtu.tree_map(g, a, b))


MISMATCHES = [
    ((1, 2), [1, 2]),
    ((1, 2), (1, 2, 3)),
    ({"a": 1}, {"b": 1}),
    ({"a": 1}, {"a": 1, "b": 2}),
    ((1, (2, 3)), (1, 2)),
    ((None,), (1,)),
    (Point(1, 2), (1, 2)),
    (Box(1, 2, "x"), Box(1, 2, "y")),
    ([{"a": [1, 2]}], [{"a": [1, 2, 3]}]),
    (collections.OrderedDict(a=1, b=2), collections.OrderedDict(b=2, a=1)),
    ({"a": 1}, DictSub(a=1)),
]


@pytest.mark.parametrize("a,b", MISMATCHES)
def test_tree_map_mismatch_raises(a, b):
    with pytest.raises(ValueError):
        jtu.tree_map(lambda x, y: x, a, b)
    with pytest.raises(ValueError) as info:
        mtu.tree_map(lambda x, y: x, a, b)
    msg = str(info.value)
    assert repr(mtu.tree_structure(a)) in msg
    assert repr(mtu.tree_structure(b)) in msg


def test_mismatch_message_has_key_path():
    with pytest.raises(ValueError, match=r"tree\[0\]\['a'\]"):
        mtu.tree_map(lambda x, y: x, [{"a": [1, 2]}], [{"a": [1, 2, 3]}])
    with pytest.raises(ValueError, match=r"tree #2"):
        mtu.tree_map(lambda x, y, z: x, (1, 2), (1, 2), [1, 2])


def test_flatten_up_to():
    td = mtu.tree_structure((1, {"a": 2}))
    assert td.flatten_up_to(([1], {"a": (2, 3)})) == [[1], (2, 3)]
    with pytest.raises(ValueError):
        td.flatten_up_to([1, {"a": 2}])


def test_keypaths_and_keystr():
    paths = mtu.tree_flatten_with_path((1, {"a": 2, "b": [3]}, Point(4, 5)))[0]
    assert [mtu.keystr(p) for p, _ in paths] == ["[0]", "[1]['a']", "[1]['b'][0]", "[2].x", "[2].y"]
    assert paths[1][0] == (mtu.SequenceKey(1), mtu.DictKey("a"))
    assert repr(mtu.SequenceKey(0)) == "SequenceKey(idx=0)"
    assert repr(mtu.DictKey("a")) == "DictKey(key='a')"
    assert repr(mtu.GetAttrKey("x")) == "GetAttrKey(name='x')"
    keys = (mtu.GetAttrKey("x"), mtu.FlattenedIndexKey(2), mtu.DictKey(1), mtu.SequenceKey(0))
    jkeys = (jtu.GetAttrKey("x"), jtu.FlattenedIndexKey(2), jtu.DictKey(1), jtu.SequenceKey(0))
    assert mtu.keystr(keys) == jtu.keystr(jkeys)
    assert mtu.keystr(keys, simple=True, separator="/") == jtu.keystr(jkeys, simple=True,
                                                                       separator="/")
    assert mtu.tree_leaves_with_path([7]) == [((mtu.SequenceKey(0),), 7)]


def test_tree_map_with_path_multiple():
    a, b = {"x": 1, "y": [2]}, {"x": 10, "y": [20]}
    f = lambda p, x, y: (jtu.keystr(p), x + y)  # noqa: E731
    assert mtu.tree_map_with_path(f, a, b) == jtu.tree_map_with_path(f, a, b)


def test_reduce_all_transpose():
    assert mtu.tree_reduce(operator.add, [1, (2, 3)]) == 6
    assert mtu.tree_reduce(operator.add, [1, (2, 3)], 10) == 16
    assert mtu.tree_reduce(operator.add, [], 0) == 0
    with pytest.raises(TypeError):
        mtu.tree_reduce(operator.add, [])
    assert mtu.tree_all([1, (True, 2)]) and not mtu.tree_all([1, 0])
    assert mtu.tree_all([]) and mtu.tree_all(None)
    tree = [(1, 2), (3, 4), (5, 6)]
    out = mtu.tree_transpose(mtu.tree_structure([0, 0, 0]), mtu.tree_structure((0, 0)), tree)
    jout = jtu.tree_transpose(jtu.tree_structure([0, 0, 0]), jtu.tree_structure((0, 0)), tree)
    assert out == jout == ([1, 3, 5], [2, 4, 6])
    tree = {"a": {"p": 1, "q": 2}, "b": {"p": 3, "q": 4}}
    out = mtu.tree_transpose(mtu.tree_structure({"a": 0, "b": 0}),
                             mtu.tree_structure({"p": 0, "q": 0}), tree)
    assert out == {"p": {"a": 1, "b": 3}, "q": {"a": 2, "b": 4}}


def test_treedef_helpers():
    td = mtu.tree_structure(((1,), (2, 3)))
    assert [repr(c) for c in mtu.treedef_children(td)] == ["PyTreeDef((*,))", "PyTreeDef((*, *))"]
    assert mtu.treedef_tuple(td.children()) == td
    assert mtu.tree_structure(1).children() == []
    assert mtu.treedef_is_leaf(mtu.tree_structure(1))
    assert mtu.treedef_is_leaf(mtu.tree_structure(None))
    assert not mtu.treedef_is_leaf(mtu.tree_structure((1,)))
    assert mtu.tree_structure({"a": 1}).node_data() == (dict, ["a"])
    assert mtu.all_leaves([1, "a", ARR]) and not mtu.all_leaves([1, (2,)])
    assert not mtu.all_leaves([None])


def test_custom_registration():
    class Foo:
        def __init__(self, a, b):
            self.a, self.b = a, b

    mtu.register_pytree_node(Foo, lambda f: ((f.a, f.b), "aux"), lambda aux, c: Foo(*c))
    with pytest.raises(ValueError, match="Duplicate"):
        mtu.register_pytree_node(Foo, lambda f: ((), None), lambda aux, c: Foo(1, 2))
    with pytest.raises(ValueError, match="Duplicate"):
        mtu.register_pytree_node(tuple, lambda f: ((), None), lambda aux, c: ())
    leaves, td = mtu.tree_flatten([Foo(1, (2, 3))])
    assert leaves == [1, 2, 3]
    assert repr(td) == "PyTreeDef([CustomNode(Foo[aux], [*, (*, *)])])"
    out = mtu.tree_map(lambda x: -x, [Foo(1, (2, 3))])[0]
    assert type(out) is Foo and out.a == -1 and out.b == (-2, -3)
    paths = mtu.tree_flatten_with_path(Foo(1, 2))[0]
    assert [mtu.keystr(p) for p, _ in paths] == ["[<flat index 0>]", "[<flat index 1>]"]


def test_register_pytree_with_keys_class():
    @mtu.register_pytree_with_keys_class
    class KC:
        def __init__(self, a):
            self.a = a

        def tree_flatten_with_keys(self):
            return [(mtu.GetAttrKey("a"), self.a)], None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    paths, _ = mtu.tree_flatten_with_path({"k": KC([1])})
    assert [mtu.keystr(p) for p, _ in paths] == ["['k'].a[0]"]
    assert mtu.tree_map(lambda x: x + 1, KC(1)).a == 2


def test_partial():
    p = mtu.Partial(max, 1, key=abs)
    assert p(-5) == -5
    leaves, td = mtu.tree_flatten(p)
    jleaves, jtd = jtu.tree_flatten(jtu.Partial(max, 1, key=abs))
    assert leaves == jleaves == [1, abs]
    assert repr(td) == repr(jtd)
    q = mtu.tree_map(lambda x: x, p)
    assert isinstance(q, mtu.Partial) and q.func is max and q(-5) == -5
    assert mtu.tree_structure(mtu.Partial(max, 3, key=abs)) == td
    # Arrays as args are children, so they can be mapped over.
    r = mtu.tree_map(lambda x: x * 2, mtu.Partial(np.add, np.ones(2)))
    np.testing.assert_array_equal(r(np.zeros(2)), [2.0, 2.0])
    # Wrapping a partial keeps it opaque (no argument merging).
    inner = mtu.Partial(functools.partial(operator.sub, 10), 3)
    assert inner() == 7 and mtu.tree_leaves(inner) == [3]
    nested = mtu.Partial(mtu.Partial(operator.sub, 10), 3)
    assert nested() == 7 and mtu.tree_leaves(nested) == [3]
    assert pickle.loads(pickle.dumps(mtu.tree_structure(mtu.Partial(max, 1)))) == \
        mtu.tree_structure(mtu.Partial(max, 2))


def test_register_dataclass_inferred():
    @dataclasses.dataclass
    class Params:
        w: object
        b: object
        act: str = dataclasses.field(default="relu", metadata={"static": True})

    mtu.register_dataclass(Params)
    leaves, td = mtu.tree_flatten(Params(1, 2))
    assert leaves == [1, 2]
    out = td.unflatten([3, 4])
    assert out == Params(3, 4, "relu")
    assert [mtu.keystr(p) for p, _ in mtu.tree_leaves_with_path(Params(1, 2))] == [".w", ".b"]
    assert td != mtu.tree_structure(Params(1, 2, "gelu"))


def test_public_module_matches_private():
    """The public functions are the private ones, except those that flatten: they also treat typed key arrays as
    leaves (tests/test_typed_keys.py), and otherwise agree."""
    from meshax._src.tree import tree_util as private
    flattening = {"tree_flatten", "tree_leaves", "tree_structure", "tree_map", "tree_flatten_with_path",
                  "tree_leaves_with_path", "tree_map_with_path", "tree_reduce", "tree_all", "all_leaves"}
    tree = {"a": [1, (2, None)], "b": Point(3, 4)}
    for name in mtu.__all__:
        if name not in flattening:
            assert getattr(mtu, name) is getattr(private, name)
    assert mtu.tree_flatten(tree) == private.tree_flatten(tree)
    assert mtu.tree_leaves_with_path(tree) == private.tree_leaves_with_path(tree)
    assert mtu.tree_map(lambda x: x * 2, tree) == private.tree_map(lambda x: x * 2, tree)


# ---------------------------------------------------------------------------
# Hypothesis: random nested pytrees
# ---------------------------------------------------------------------------

leaf_st = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=False, width=32),
    st.text(max_size=3),
    st.none(),
    st.booleans(),
    st.builds(lambda n: np.arange(float(n)), st.integers(0, 3)),
)
str_keys = st.text(alphabet="abcdef", min_size=1, max_size=3)


def _extend(children):
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(str_keys, children, max_size=4),
        st.dictionaries(st.integers(-3, 3), children, max_size=3),
        st.lists(st.tuples(str_keys, children), max_size=3).map(collections.OrderedDict),
        st.dictionaries(str_keys, children, max_size=3).map(
            lambda d: collections.defaultdict(list, d)),
        st.builds(Point, children, children),
        st.builds(Box, children, children, st.sampled_from(["p", "q"])),
        st.builds(Keyed, children, children),
        st.builds(Pair, children, children),
        st.builds(DC, children, children),
    )


pytrees = st.recursive(leaf_st, _extend, max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(pytrees, st.sampled_from([None, *sorted(IS_LEAF_FNS)]))
def test_hypothesis_matches_jax(tree, is_leaf_name):
    is_leaf = None if is_leaf_name is None else IS_LEAF_FNS[is_leaf_name]
    check_against_jax(tree, is_leaf=is_leaf)


@settings(max_examples=100, deadline=None)
@given(pytrees, pytrees)
def test_hypothesis_structure_equality_and_mismatch(a, b):
    ta, tb = mtu.tree_structure(a), mtu.tree_structure(b)
    same = ta == tb
    assert same == (jtu.tree_structure(a) == jtu.tree_structure(b))
    if same:
        assert hash(ta) == hash(tb)
    # tree_map succeeds exactly when JAX's does (prefix semantics included).
    try:
        jout = jtu.tree_map(lambda x, y: (id(x), id(y)), a, b)
    except ValueError:
        with pytest.raises(ValueError):
            mtu.tree_map(lambda x, y: (id(x), id(y)), a, b)
    else:
        assert_same_tree(mtu.tree_map(lambda x, y: (id(x), id(y)), a, b), jout)


def test_flattened_structures_are_shared_and_keep_their_keys_types():
    """Flattening the same structure twice gives the same PyTreeDef (meshax shares them); dict keys that are equal
    but of other types (1, 1.0, True) and namedtuples of other types with the same fields stay apart, as in JAX."""
    import jax

    A = collections.namedtuple("A", "x y")
    B = collections.namedtuple("B", "x y")
    trees = [{1: "a"}, {1.0: "a"}, {True: "a"}, A(1, 2), B(1, 2), ({"w": 1, "b": 2}, [3, (4,)])]
    for tree in trees:
        leaves, structure = mtu.tree_flatten(tree)
        assert mtu.tree_flatten(tree)[1] is structure
        rebuilt = mtu.tree_unflatten(structure, leaves)
        assert type(rebuilt) is type(tree) and rebuilt == tree
        if isinstance(tree, dict):
            assert [type(k) for k in rebuilt] == [type(k) for k in tree]
        assert str(structure) == str(jax.tree_util.tree_flatten(tree)[1])
    assert mtu.tree_flatten(A(1, 2))[1] != mtu.tree_flatten(B(1, 2))[1]
