"""Fusion: chains of elementwise equations of a jaxpr run as one pass, by an executor per device kind.

`executable(jaxpr)` is the program that actually runs for a traced jaxpr (made once, kept on it): the
jaxpr simplified (simplify.py), its collectives grouped (schedule.py), then its eligible equations grouped into clusters, each replaced by one
`fused` equation. A cluster is a tree of elementwise operations, conversions and broadcasts (those
the executor supports) with one output: a value is folded into the operation that uses it when
that is its only use (or when it is cheap to recompute for its few uses), all of them elementwise of the
same shape; a broadcast only ever reads an input of the cluster (it becomes a zero-copy view). Values
read by anything else (a matmul, a reduction, the program's outputs) are computed by their own cluster.

The `fused` primitive runs a cluster on one device's arrays through the executor of the device kind: on
CPU (cpu_executor.py) one loop compiled by numba, or numexpr, where they apply, else NumPy's kernels on
cache-sized blocks over the controller's threads, else the separate NumPy calls it replaces (the same values
in every case). Eagerly over a mesh it is placed by composing its equations' sharding
rules; when they do not compose (an intermediate would have to move), its equations run one by one.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..core.core import ShapedArray, define_primitive, keeps_own_vma, sharding_rules, vma_rules
from ..core.jaxpr import Equation, Jaxpr, Literal, Var
from ..sharding.placement_rules import Layout, Spec, replicated
from .cpu_executor import CpuExecutor
from .schedule import schedule
from .simplify import simplify

# device kind -> the executor of its clusters. An executor has `supports(eq) -> bool` (may `eq` be in a
# cluster), `compile(cluster_jaxpr)` (whatever it keeps per cluster, made once, on first large use) and
# `execute(cluster, inputs, out_shape) -> array` (one device's output from its input blocks).
EXECUTORS = {"cpu": CpuExecutor()}
DEVICE_KIND = "cpu"
MAX_CLUSTER_EQUATIONS = 64
_RECOMPUTED_USES = 3  # a value used this many times or fewer may be recomputed in each use...
_RECOMPUTED_COST = 2  # ...when it costs this many operations or fewer


class Cluster:
    """One fused group: a single-output jaxpr of supported equations, and what its executor compiled for it
    (made on first large use)."""

    def __init__(self, jaxpr: Jaxpr, executor: Any) -> None:
        self.jaxpr = jaxpr
        self.executor = executor
        self._kernel: Any = None
        self._compiled = False
        self.layouts: dict[Any, Layout | None] = {}  # (input specs, mesh shape) -> composed layout

    @property
    def out_aval(self) -> ShapedArray:
        return self.jaxpr.outvars[0].aval

    def kernel(self) -> Any:
        if not self._compiled:
            self._kernel = self.executor.compile(self.jaxpr)
            self._compiled = True
        return self._kernel

    def __repr__(self) -> str:
        return " ".join(eq.primitive.name for eq in self.jaxpr.equations)


def executable(jaxpr: Jaxpr) -> Jaxpr:
    """The program run for `jaxpr`: simplified, its collectives grouped (schedule.py) and fused (made once per
    traced jaxpr)."""
    found = getattr(jaxpr, "_executable", None)
    if found is None:
        found = fuse(schedule(simplify(jaxpr)), EXECUTORS[DEVICE_KIND])
        jaxpr._executable = found
    return found


def fuse(jaxpr: Jaxpr, executor: Any) -> Jaxpr:
    """`jaxpr` with each cluster of equations that `executor` supports replaced by one `fused` equation."""
    uses: dict[int, list[Equation]] = {}
    for eq in jaxpr.equations:
        for x in eq.inputs:
            if isinstance(x, Var):
                uses.setdefault(x.id, []).append(eq)
    outputs = {v.id for v in jaxpr.outvars if isinstance(v, Var)}
    fusible = {id(eq) for eq in jaxpr.equations if executor.supports(eq)}
    folded: dict[int, Equation] = {}  # var id -> its equation, when the value is folded into its users
    cost: dict[int, int] = {}  # equation id -> operations of its tree
    for eq in jaxpr.equations:
        if id(eq) not in fusible:
            continue
        tree = 0 if eq.primitive.name == "broadcast_in_dim" else 1
        cost[id(eq)] = tree + sum(cost[id(folded[x.id])] for x in eq.inputs if isinstance(x, Var) and x.id in folded)
        out = eq.outputs[0]
        if out.id not in outputs and _foldable(eq, uses.get(out.id, []), fusible, cost[id(eq)]):
            folded[out.id] = eq
    position = {id(eq): i for i, eq in enumerate(jaxpr.equations)}
    equations: list[Equation] = []
    for eq in jaxpr.equations:
        if id(eq) not in fusible or eq.outputs[0].id in folded:
            if id(eq) not in fusible:
                equations.append(eq)
            continue
        members = _members(eq, folded, position)
        if all(m.primitive.name == "broadcast_in_dim" for m in members) or len(members) > MAX_CLUSTER_EQUATIONS:
            equations.extend(m for m in members if not any(m is e for e in equations))
            continue
        leaves = _leaves(members)
        cluster = Cluster(Jaxpr([], leaves, members, [eq.outputs[0]]), executor)
        equations.append(Equation(fused_p, list(leaves), [eq.outputs[0]], {"cluster": cluster}))
    return Jaxpr(jaxpr.constvars, jaxpr.invars, equations, jaxpr.outvars, jaxpr.consts)


def _foldable(eq: Equation, users: list[Equation], fusible: set[int], cost: int) -> bool:
    """Whether `eq`'s value can be computed inside each of its users' expressions."""
    shape = eq.outputs[0].aval.shape
    if not users or any(id(u) not in fusible or u.primitive.name == "broadcast_in_dim" or
                        u.outputs[0].aval.shape != shape for u in users):
        return False
    return len(users) == 1 or cost == 0 or (len(users) <= _RECOMPUTED_USES and cost <= _RECOMPUTED_COST)


def _members(root: Equation, folded: dict[int, Equation], position: dict[int, int]) -> list[Equation]:
    """The equations of `root`'s cluster, in program order."""
    found: dict[int, Equation] = {}
    stack = [root]
    while stack:
        eq = stack.pop()
        if id(eq) in found:
            continue
        found[id(eq)] = eq
        stack.extend(folded[x.id] for x in eq.inputs if isinstance(x, Var) and x.id in folded)
    return sorted(found.values(), key=lambda eq: position[id(eq)])


def _leaves(members: list[Equation]) -> list[Var]:
    inside = {m.outputs[0].id for m in members}
    leaves: dict[int, Var] = {}
    for eq in members:
        for x in eq.inputs:
            if isinstance(x, Var) and x.id not in inside:
                leaves.setdefault(x.id, x)
    return list(leaves.values())


# ---- the fused primitive ----------------------------------------------------------------------------------


def _fused_impl(*inputs: np.ndarray, cluster: Cluster, local_shapes: list[tuple[int, ...]],
                out: np.ndarray | None = None) -> np.ndarray:
    return cluster.executor.execute(cluster, inputs, tuple(local_shapes[0]), out)


def cluster_layout(specs: Sequence[Spec], avals: Sequence[ShapedArray], *, mesh_shape: dict[str, int],
                   cluster: Cluster, **_: Any) -> Layout | None:
    """The cluster's equations' sharding rules composed: where its inputs must be, where its output lands;
    None when some intermediate value would have to move (or be reduced) between two equations."""
    key = (tuple(map(tuple, specs)), tuple(sorted(mesh_shape.items())))
    if key not in cluster.layouts:
        if len(cluster.layouts) > 64:
            cluster.layouts.clear()
        cluster.layouts[key] = _composed_layout(specs, mesh_shape, cluster)
    return cluster.layouts[key]


def _composed_layout(specs: Sequence[Spec], mesh_shape: dict[str, int], cluster: Cluster) -> Layout | None:
    given = {v.id: tuple(s) for v, s in zip(cluster.jaxpr.invars, specs)}
    for _attempt in range(2):
        wanted: dict[int, Spec] = {}
        spec_of = dict(given)
        for eq in cluster.jaxpr.equations:
            in_specs = [replicated(x.aval.ndim) if isinstance(x, Literal) else spec_of[x.id] for x in eq.inputs]
            layout = sharding_rules[eq.primitive](in_specs, [x.aval for x in eq.inputs], mesh_shape=mesh_shape,
                                                  out_ndims=[eq.outputs[0].aval.ndim], **eq.params)
            if layout.reduce_axes or layout.result_specs is not None:
                return None
            for x, need in zip(eq.inputs, layout.in_specs):
                if isinstance(x, Literal):
                    continue
                if x.id in given:
                    if wanted.setdefault(x.id, tuple(need)) != tuple(need):
                        return None
                elif tuple(need) != spec_of[x.id]:
                    return None
            spec_of[eq.outputs[0].id] = tuple(layout.out_specs[0])
        if all(wanted.get(k, s) == s for k, s in given.items()):
            return Layout([given[v.id] for v in cluster.jaxpr.invars], [spec_of[cluster.jaxpr.outvars[0].id]])
        given.update(wanted)
    return None


class ClusterDoesNotCompose(ValueError):
    """A cluster's equations' sharding rules do not compose for its inputs' layouts (run_eagerly then binds the
    equations one by one)."""


def _fused_sharding_rule(specs: Sequence[Spec], avals: Sequence[ShapedArray], **params: Any) -> Layout:
    layout = cluster_layout(specs, avals, **params)
    if layout is None:
        raise ClusterDoesNotCompose("fused: the cluster's sharding rules do not compose for these inputs")
    return layout


fused_p = define_primitive("fused", _fused_impl, lambda *avals, cluster: cluster.out_aval, _fused_sharding_rule,
                           needs_local_shape=True, parallel_devices=True)
vma_rules[fused_p] = keeps_own_vma
