"""The core: abstract values, primitives, the trace stack and the one generic Tracer.

Every operation on arrays is a Primitive applied with `bind`, which hands it to the
current trace. Each trace (eager evaluation, staging into a jaxpr, forward-mode AD,
per-device evaluation inside shard_map...) has a parent: the trace that was current
when it was made. A trace processes a primitive by looking up its own rule for it and,
where that rule computes with plain values, binding primitives in its parent. A value
that is not one of the trace's own tracers (an array, a scalar, a tracer of an
enclosing trace) is a constant to it; a tracer of a trace that is no longer active is an
error ("escaped"). Rules live in per-interpreter tables keyed by primitive
(`impl_rules`, `abstract_eval_rules`, `sharding_rules` here; jvp and transpose rules in
interpreters/ad.py, per-device rules in interpreters/shard_map.py).

The named-axis environment (the manual mesh axes of enclosing shard_maps) lives here too,
so collectives see it under any nesting of interpreters.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

# ---- abstract values ------------------------------------------------------------------------------------------


class HasShape:
    """`ndim` and `size` of anything with a `shape`."""

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


# How a type's layout reads (`typeof(x).sharding`, `typeof(x).manual_axis_type`): installed by the sharding layer
# (sharding/aval_sharding.py), which knows meshes; the core does not.
layout_views: dict[str, Callable[[Any], Any]] = {}


@dataclass(frozen=True)
class ShapedArray(HasShape):
    """What tracing knows of a value: shape, dtype, weak type, (inside shard_map) the manual mesh axes it varies
    over (`vma`), and, on meshes with Explicit axes, the axes splitting each dimension (sharding in types)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    weak_type: bool = False
    vma: frozenset = field(default=frozenset())
    explicit: tuple = ()  # per dimension: the Explicit mesh axes that split it (empty: none does)
    mesh: Any = field(default=None, compare=False)  # the mesh of those axes (set when the mesh has Explicit axes)
    unreduced: frozenset = field(default=frozenset())  # mesh axes over which devices hold partial sums
    reduced: frozenset = field(default=frozenset())  # mesh axes it is replicated over, its cotangents unreduced

    def _dims(self) -> str:
        if not self.explicit:
            return ",".join(map(str, self.shape))
        return ",".join(f"{n}@{axes[0] if len(axes) == 1 else '(' + ','.join(axes) + ')'}" if axes else str(n)
                        for n, axes in zip(self.shape, self.explicit))

    def _varying(self) -> str:
        """The varying manual axes, unreduced and reduced axes as JAX prints them: {V:x}, {V:(x,y), U:z, R:w}."""
        if not (self.vma or self.unreduced or self.reduced):
            return ""
        order = list(getattr(self.mesh, "axis_names", ()))
        parts = []
        for letter, axes in (("V", self.vma), ("U", self.unreduced), ("R", self.reduced)):
            if axes:
                names = sorted(axes, key=lambda a: (order.index(a) if a in order else len(order), a))
                parts.append(f"{letter}:{names[0]}" if len(names) == 1 else f"{letter}:({','.join(names)})")
        return "{" + ", ".join(parts) + "}"

    def str_short(self) -> str:
        """As jaxprs print types: f32[8,4]{V:x}."""
        return f"{_short_dtype(self.dtype)}[{self._dims()}]{self._varying()}"

    def __str__(self) -> str:
        return f"{'~' if self.weak_type else ''}{_dtype_name(self.dtype)}[{self._dims()}]{self._varying()}"

    def __repr__(self) -> str:
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({_dtype_name(self.dtype)}[{self._dims()}]{weak})"

    @property
    def sharding(self) -> Any:
        """The sharding this type carries (JAX's `typeof(x).sharding`): Explicit axes, on the abstract mesh."""
        return layout_views["sharding"](self)

    @property
    def manual_axis_type(self) -> Any:
        """The manual mesh axes the value varies over (inside shard_map)."""
        return layout_views["manual_axis_type"](self)

    def update(self, **changes: Any) -> "ShapedArray":
        """A copy with some fields changed (without dataclasses.replace's checks: this runs on every operation in
        shard_map, and the fields are already valid)."""
        if not changes.keys() <= self.__dict__.keys():
            raise TypeError(f"ShapedArray has no fields {sorted(changes.keys() - self.__dict__.keys())}")
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__, **changes)
        return copy


def _dtype_name(dtype: Any) -> str:
    """A dtype's name; an extended dtype (a typed key's key<fry>) names itself."""
    return str(dtype) if getattr(dtype, "_meshax_extended", False) else np.dtype(dtype).name


def _short_dtype(dtype: np.dtype) -> str:
    names = {"float": "f", "int": "i", "uint": "u", "complex": "c", "bool": "bool", "bfloat": "bf"}
    name = np.dtype(dtype).name
    for long, short in names.items():
        if name.startswith(long) and name[len(long):].isdigit():
            return short + name[len(long):]
    return name


def aval_of(x: Any) -> ShapedArray:
    """The abstract value of an Array, a Tracer, a NumPy value or a Python scalar."""
    aval = getattr(x, "aval", None)
    if isinstance(aval, ShapedArray):
        return aval
    if hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (np.ndarray, np.generic)):
        return ShapedArray(tuple(x.shape), np.dtype(x.dtype), bool(getattr(x, "weak_type", False)))
    from .dtypes import dtype_of, x64_enabled

    if type(x) in _PYTHON_SCALARS or isinstance(x, (np.number, np.bool_)):  # a jaxpr's literals: by type alone
        key = (type(x), x64_enabled())
        aval = _scalar_avals.get(key)
        if aval is None:
            aval = _scalar_avals[key] = ShapedArray((), *dtype_of(x))
        return aval
    dtype, weak = dtype_of(x)
    return ShapedArray(tuple(np.shape(x)), dtype, weak)


_PYTHON_SCALARS = (bool, int, float, complex)
_scalar_avals: dict[tuple[type, bool], ShapedArray] = {}  # (scalar type, x64 enabled) -> its aval


# ---- primitives and their rule tables -------------------------------------------------------------------------


class Primitive:
    """An operation, known by name; what binding it means is up to the current trace and its rule tables.

    The flags describe how the eager and per-device interpreters call its implementation:
    `needs_local_shape` (the impl gets `local_shapes=`, its outputs' shard shapes), `needs_local_box` (the impl
    gets `local_box=`, its first input's block on the device) and `parallel_devices` (a heavy kernel whose
    per-device calls run side by side)."""

    def __init__(self, name: str, multiple_results: bool = False, *, needs_local_shape: bool = False,
                 needs_local_box: bool = False, parallel_devices: bool = False) -> None:
        self.name = name
        self.multiple_results = multiple_results
        self.needs_local_shape = needs_local_shape
        self.needs_local_box = needs_local_box
        self.parallel_devices = parallel_devices

    def bind(self, *args: Any, **params: Any) -> Any:
        if self not in vma_rules and len(args) > 1 and _axis_env.frames:
            args = insert_pvary(args)
        return current_trace().process(self, args, params)

    def __repr__(self) -> str:
        return self.name


impl_rules: dict[Primitive, Callable[..., Any]] = {}  # NumPy implementation on one device's blocks
abstract_eval_rules: dict[Primitive, Callable[..., Any]] = {}  # avals in, aval(s) out
sharding_rules: dict[Primitive, Callable[..., Any]] = {}  # where eager inputs must be (rules.Layout)
vma_rules: dict[Primitive, Callable[..., Any]] = {}  # varying axes of a collective's result (None: keep avals')
# the Explicit-axes types of a primitive's outputs (installed by explicit_types): (primitive, avals, outs, params)
explicit_typing: list[Callable[..., list[ShapedArray]]] = []


def abstract_eval(primitive: Primitive, avals: Sequence[ShapedArray], params: dict[str, Any]) -> list[ShapedArray]:
    """The output avals of `primitive` on `avals`, with their varying manual axes."""
    try:
        rule = abstract_eval_rules[primitive]
    except KeyError:
        raise NotImplementedError(f"the primitive {primitive.name} has no abstract evaluation rule.") from None
    out = rule(*avals, **params)
    outs = list(out) if primitive.multiple_results else [out]
    if explicit_typing and (any(a.mesh is not None for a in avals) or params.get("out_sharding") is not None
                            or params.get("sharding") is not None):
        outs = explicit_typing[0](primitive, avals, outs, params)
    vma_rule = vma_rules.get(primitive)
    vma = frozenset().union(*(a.vma for a in avals)) if vma_rule is None else vma_rule(*avals, **params)
    if vma is None:  # the rule's own avals say (call-like primitives)
        return outs
    return [o if o.vma == vma else o.update(vma=vma) for o in outs]


def keeps_own_vma(*avals: Any, **params: Any) -> None:
    """The vma rule of call-like primitives: their outputs' avals already carry their varying axes."""
    return None


# ---- traces -------------------------------------------------------------------------------------------------


class Trace:
    """How binding a primitive is carried out in one context; `parent` is the trace it binds into."""

    def __init__(self, parent: "Trace | None") -> None:
        self.parent = parent
        self.active = True

    def process(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        raise NotImplementedError

    def is_own(self, x: Any) -> bool:
        """Whether `x` is a tracer of this trace; a tracer of an inactive or unrelated trace is an error."""
        if not isinstance(x, Tracer):
            return False
        if x._trace is self:
            return True
        check_not_escaped(x, self)
        return False

    def to_concrete_value(self, tracer: "Tracer") -> Any:
        """The concrete value behind `tracer`, or None when tracing has none (staging)."""
        return None

    def describe(self, tracer: "Tracer") -> str | None:
        """How `tracer` prints, when this trace knows better than its type (per-device values)."""
        return None

    def ancestors(self) -> Iterator["Trace"]:
        trace: Trace | None = self
        while trace is not None:
            yield trace
            trace = trace.parent


def check_not_escaped(x: "Tracer", trace: Trace) -> None:
    """A tracer met by `trace` must belong to it or to one of the traces it binds into."""
    if x._trace.active and any(t is x._trace for t in trace.ancestors()):
        return
    raise UnexpectedTracerError(
        f"Encountered an unexpected tracer: {x!r} belongs to a {type(x._trace).__name__} that is "
        f"{'no longer active' if not x._trace.active else 'not an enclosing transformation'} here. A value "
        "computed inside a transformed function (jit, grad, vmap, shard_map...) escaped it, e.g. through a "
        "global or a list; return it from the function instead."
    )


class JAXTypeError(TypeError):
    """The TypeError base of JAX's typed errors (jax.errors.JAXTypeError)."""


class JAXIndexError(IndexError):
    """The IndexError base of JAX's typed indexing errors (jax.errors.JAXIndexError)."""


class UnexpectedTracerError(JAXTypeError):
    """A tracer was used outside the transformation that made it."""


class ShardingTypeError(TypeError):
    """Shardings in types that an operation cannot combine (JAX's ShardingTypeError, an Exception; a TypeError
    here, as meshax raised for an ambiguous contraction before types carried shardings)."""


class NonConcreteBooleanIndexError(JAXIndexError):
    """A boolean mask index whose values are traced: the result's shape would depend on them."""


class ConcretizationTypeError(JAXTypeError):
    """A traced value was used where Python needs a concrete one."""


class TracerBoolConversionError(ConcretizationTypeError):
    """bool() of a traced value."""


class TracerIntegerConversionError(JAXTypeError):
    """A traced value used as an index."""


class TracerArrayConversionError(JAXTypeError):
    """A traced value converted to a NumPy array."""


class _Context(threading.local):
    def __init__(self) -> None:
        self.trace: Trace | None = None


_context = _Context()
_eager: Trace | None = None


def set_eager_trace(trace: Trace) -> None:
    """Install the root trace (eager evaluation on global arrays)."""
    global _eager
    _eager = trace


def eager_trace() -> Trace:
    assert _eager is not None, "meshax._src.interpreters.eager must be imported before binding primitives"
    return _eager


def current_trace() -> Trace:
    return _context.trace if _context.trace is not None else eager_trace()


def binding_eagerly() -> bool:
    """Whether a primitive bound now goes straight to the eager trace: no trace and no axis frame around it."""
    return _context.trace is None and not _axis_env.frames


class set_current_trace:
    """Context manager making `trace` the current trace (restoring the previous one on exit)."""

    def __init__(self, trace: Trace | None, *, finish: bool = False) -> None:
        self.trace = trace
        self.finish = finish  # mark the trace inactive on exit: its tracers may no longer be used

    def __enter__(self) -> Trace | None:
        self.previous = _context.trace
        _context.trace = self.trace
        return self.trace

    def __exit__(self, *exc: Any) -> None:
        _context.trace = self.previous
        if self.finish and self.trace is not None:
            self.trace.active = False


# ---- the generic tracer ---------------------------------------------------------------------------------------


class Tracer:
    """A value of a trace: its abstract value plus whatever the trace keeps for it (`payload`)."""

    __slots__ = ("_trace", "aval", "payload")
    __array_priority__ = 200

    def __init__(self, trace: Trace, aval: ShapedArray, payload: Any) -> None:
        self._trace = trace
        self.aval = aval
        self.payload = payload

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    @property
    def sharding(self) -> Any:
        value = self.to_concrete_value()
        if value is None or not hasattr(value, "sharding"):
            raise AttributeError(f"a traced value ({self.aval}) has no concrete sharding here.")
        return value.sharding

    def to_concrete_value(self) -> Any:
        return self._trace.to_concrete_value(self)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object (a 0-d traced array)")
        return self.shape[0]

    def _concrete(self, what: str, error: type = ConcretizationTypeError) -> Any:
        value = self.to_concrete_value()
        if value is None:
            raise error(
                f"Abstract tracer value encountered where concrete value is expected: {what} needs a concrete "
                f"value, but this array is traced ({self.aval}) inside jit, shard_map or a traced control-flow "
                "body; use meshax.numpy.where / lax functions instead of Python control flow on traced values, "
                "or mark the argument static (static_argnums)."
            )
        return value

    def __bool__(self) -> bool:
        return bool(self._concrete("bool()", TracerBoolConversionError))

    def __float__(self) -> float:
        return float(self._concrete("float()"))

    def __int__(self) -> int:
        return int(self._concrete("int()"))

    def __complex__(self) -> complex:
        return complex(self._concrete("complex()"))

    def __index__(self) -> int:
        return int(np.asarray(self._concrete("using it as an index", TracerIntegerConversionError)).__index__())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        value = np.asarray(self._concrete("converting to a NumPy array", TracerArrayConversionError))
        return value if dtype is None else value.astype(dtype)

    def __repr__(self) -> str:
        return self._trace.describe(self) or f"Traced<{self.aval}>with<{type(self._trace).__name__}>"


# ---- the named-axis environment --------------------------------------------------------------------------------


@dataclass(frozen=True)
class AxisFrame:
    """Named axes bound by an enclosing map: a shard_map's manual mesh axes (`mesh` set, varying axes typed when
    `check_vma`), or a vmap's axis (`mesh` None, its size in `sizes`)."""

    mesh: Any
    axes: tuple[str, ...]
    check_vma: bool
    sizes: tuple[tuple[str, int], ...] = ()

    def size(self, name: str) -> int:
        return self.mesh.shape[name] if self.mesh is not None else dict(self.sizes)[name]


class _AxisEnv(threading.local):
    def __init__(self) -> None:
        self.frames: list[AxisFrame] = []


_axis_env = _AxisEnv()


class extend_axis_env:
    """Context manager binding a map's named axes for the code run inside it."""

    def __init__(self, frame: AxisFrame) -> None:
        self.frame = frame

    def __enter__(self) -> AxisFrame:
        _axis_env.frames.append(self.frame)
        return self.frame

    def __exit__(self, *exc: Any) -> None:
        _axis_env.frames.pop()


def _mesh_frames() -> list[AxisFrame]:
    return [f for f in _axis_env.frames if f.mesh is not None]


def axis_mesh() -> Any:
    """The mesh of the innermost enclosing shard_map (None outside one)."""
    frames = _mesh_frames()
    return frames[-1].mesh if frames else None


def manual_axes() -> tuple[str, ...]:
    """The manual mesh axes of the enclosing shard_maps."""
    return tuple(a for frame in _mesh_frames() for a in frame.axes)


def axis_size(axes: Sequence[str], what: str) -> int:
    """The product of the sizes of the named `axes` (clear errors outside shard_map/vmap or for unknown names)."""
    if not _axis_env.frames:
        raise NameError(
            f"unbound axis name: {what} over axis {tuple(axes)!r} used outside shard_map: collectives need the "
            "mesh axes of an enclosing meshax.shard_map (or the axis_name of an enclosing vmap)."
        )
    size = 1
    for name in axes:
        frame = next((f for f in reversed(_axis_env.frames) if name in f.axes), None)
        if frame is None:
            bound = tuple(a for f in _axis_env.frames for a in f.axes)
            raise NameError(f"unbound axis name {name!r}: {what} is used inside a shard_map that binds the mesh axes "
                            f"{bound}.")
        size *= frame.size(name)
    return size


def vma_checked() -> bool:
    frames = _mesh_frames()
    return bool(frames) and frames[-1].check_vma


# ---- implicit pvary ----------------------------------------------------------------------------------------------

pvary_p = Primitive("pvary")  # identity on values; its result varies over `axes` too
abstract_eval_rules[pvary_p] = lambda x, *, axes: x
vma_rules[pvary_p] = lambda x, *, axes: x.vma | frozenset(axes)


# a reduced value (replicated over manual axes, its cotangent unreduced) marked varying over them: identity on values
reduced_vary_cast_p = Primitive("reduced_vary_cast_p")


def _reduced_vary_cast_eval(x: ShapedArray, *, axes: tuple[str, ...]) -> ShapedArray:
    if not x.reduced & frozenset(axes):
        raise ValueError(f"reduced_vary_cast is a Reduced->Varying collective. This means that the axis names "
                         f"mentioned in `axes` passed to `reduced_vary_cast` must be present in "
                         f"`jax.typeof(x).mat.reduced`. Got axes={axes} and jax.typeof(x).mat.reduced={x.reduced}")
    return x.update(reduced=x.reduced - frozenset(axes))


abstract_eval_rules[reduced_vary_cast_p] = _reduced_vary_cast_eval
vma_rules[reduced_vary_cast_p] = lambda x, *, axes: x.vma | frozenset(axes)


def mesh_ordered(axes: Iterable[str]) -> tuple[str, ...]:
    """`axes` in the order of the innermost shard_map's mesh (unknown names last, sorted)."""
    order = list(getattr(axis_mesh(), "axis_names", ()))
    return tuple(sorted(axes, key=lambda a: (order.index(a) if a in order else len(order), a)))


def _marked_varying(x: Any, axes: frozenset) -> Any:
    """`x` marked varying over `axes`: reduced ones by `reduced_vary_cast`, the others by `pvary`."""
    reduced = axes & x.aval.reduced
    if reduced:
        x = reduced_vary_cast_p.bind(x, axes=mesh_ordered(reduced))
    rest = axes - reduced
    return pvary_p.bind(x, axes=tuple(sorted(rest))) if rest else x


def insert_pvary(args: Sequence[Any]) -> Sequence[Any]:
    """Operands of one operation must vary over the same manual axes: invariant ones are marked varying
    (`pvary`, or `reduced_vary_cast` where they are reduced), as JAX does under check_vma."""
    if not vma_checked():
        return args
    vmas = [a.aval.vma if isinstance(a, Tracer) else None for a in args]  # constants count as invariant
    union = frozenset().union(*(v for v in vmas if v is not None))
    if not union or all(v is None or v == union for v in vmas):
        return args
    return [a if v is None or v == union else _marked_varying(a, union - v) for a, v in zip(args, vmas)]


def define_primitive(name: str, impl: Callable[..., Any] | None, abstract_eval_rule: Callable[..., Any],
                     sharding_rule: Callable[..., Any] | None, multiple_results: bool = False,
                     **flags: bool) -> Primitive:
    """A primitive with its NumPy implementation, abstract evaluation and sharding rules registered."""
    primitive = Primitive(name, multiple_results, **flags)
    if impl is not None:
        impl_rules[primitive] = impl
    abstract_eval_rules[primitive] = abstract_eval_rule
    if sharding_rule is not None:
        sharding_rules[primitive] = sharding_rule
    return primitive
