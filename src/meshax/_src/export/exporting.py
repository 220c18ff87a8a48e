"""export(jit(f))(*args): trace the jitted function for the arguments' types into an Exported."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..core.jaxpr import ClosedJaxpr, Jaxpr, eval_jaxpr
from ..sharding.mesh import Mesh
from ..sharding.shardings import NamedSharding
from ..transforms.autodiff import vjp as vjp_of
from ..transforms.jit import Jitted, jit
from ..transforms.shape_eval import ShapeDtypeStruct
from ..tree.tree_util import tree_flatten
from .exported import CALLING_CONVENTION_VERSION, DisabledSafetyCheck, Exported
from .shape_poly import has_symbolic_dims
from .shardings import device_count, input_shardings, output_shardings

_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")


def default_export_platform() -> str:
    """The platform `export` targets by default: meshax runs on CPUs."""
    return "cpu"


def export(fun_jit: Any, *, platforms: Sequence[str] | None = None,
           disabled_checks: Sequence[DisabledSafetyCheck] = (),
           _override_lowering_rules: Sequence[tuple[Any, Any]] | None = None) -> Callable[..., Exported]:
    """A function that traces `fun_jit` (a `jit`-wrapped function) for its arguments (arrays or
    ShapeDtypeStructs) and returns the Exported program."""
    if not isinstance(fun_jit, Jitted):
        raise ValueError(f"Function to be exported must be the result of `jit` but is: {fun_jit!r}")
    chosen = tuple(platforms) if platforms is not None else (default_export_platform(),)
    unknown = [p for p in chosen if p not in _PLATFORMS]
    if unknown:
        raise ValueError(f"Unsupported platforms {unknown} for export; choose among {list(_PLATFORMS)}.")

    def do_export(*args: Any, **kwargs: Any) -> Exported:
        return _export(fun_jit, chosen, tuple(disabled_checks), args, kwargs)

    return do_export


def _export(fun_jit: Jitted, platforms: tuple[str, ...], disabled: tuple, args: tuple, kwargs: dict) -> Exported:
    dynamic_args, dynamic_kwargs, static_positional, static_named = fun_jit._split(args, kwargs)
    leaves, in_tree = tree_flatten((dynamic_args, dynamic_kwargs))
    if any(has_symbolic_dims(getattr(x, "shape", ())) for x in leaves):
        raise NotImplementedError(
            "export with symbolic dimensions (shape polymorphism) is not supported by meshax: meshax traces a "
            "program for concrete shapes and can't re-specialize a serialized one; export once per concrete shape "
            "(ShapeDtypeStruct with integer dimensions).")
    program, consts, out_tree = fun_jit._trace(in_tree, leaves, static_positional, static_named)
    count = len(consts)
    in_avals = tuple(program.in_avals[count:])
    out_avals = tuple(program.out_avals)
    if len(out_avals) != out_tree.num_leaves:
        raise NotImplementedError(f"export: {fun_jit.__name__} takes array Refs, which meshax can't export; pass "
                                  "their values and return the new ones.")
    in_named = input_shardings(fun_jit.in_shardings, dynamic_args, leaves, in_avals)
    out_named = output_shardings(fun_jit.out_shardings, out_tree, out_avals)
    text = str(Jaxpr(program.invars[:count], program.invars[count:], program.equations, program.outvars, consts))
    devices = max(device_count(in_named + out_named), _program_devices(program))
    return Exported(
        fun_name=getattr(fun_jit.fun, "__name__", "fun"), in_tree=in_tree, in_avals=in_avals, out_tree=out_tree,
        out_avals=out_avals, _in_named_shardings=in_named, _out_named_shardings=out_named,
        in_shardings_hlo=(None,) * len(in_avals), out_shardings_hlo=(None,) * len(out_avals),
        nr_devices=devices, platforms=platforms, ordered_effects=(), unordered_effects=(),
        disabled_safety_checks=disabled, mlir_module_serialized=text.encode(),
        calling_convention_version=CALLING_CONVENTION_VERSION, module_kept_var_idx=tuple(range(len(in_avals))),
        uses_global_constants=False, _get_vjp=_vjp_getter(), _program=program, _consts=tuple(consts))


def _program_devices(jaxpr: Jaxpr) -> int:
    """The most devices a mesh in the program's parameters spans (shard_map, sharding constraints), at least 1."""
    def devices(value: Any) -> int:
        if isinstance(value, Mesh):
            return value.devices.size
        if isinstance(value, NamedSharding):
            return value.mesh.devices.size
        if isinstance(value, Jaxpr):
            return _program_devices(value)
        if isinstance(value, ClosedJaxpr):
            return _program_devices(value.jaxpr)
        if isinstance(value, (tuple, list)):
            return max(map(devices, value), default=1)
        return 1

    return max((devices(v) for eq in jaxpr.equations for v in eq.params.values()), default=1)


def _vjp_getter() -> Callable[[Exported], Exported]:
    """Exported.vjp of one exported function: exported on first use, then kept."""
    kept: list[Exported] = []

    def get(primal: Exported) -> Exported:
        if not kept:
            kept.append(_exported_vjp(primal))
        return kept[0]

    return get


def _exported_vjp(primal: Exported) -> Exported:
    """The VJP of an exported program, exported: a function of (*primal inputs, *output cotangents) to the input
    cotangents, traced through the primal program's own differentiation rules (custom_jvp and custom_vjp too)."""
    count = len(primal.in_avals)

    def run_primal(*inputs: Any) -> list[Any]:
        return eval_jaxpr(primal._program, (), [*primal._consts, *inputs])

    def vjp_fun(*flat: Any) -> tuple[Any, ...]:
        primals, cotangents = flat[:count], flat[count:]
        _, pullback = vjp_of(lambda *xs: run_primal(*xs), *primals)
        return tuple(c if np.issubdtype(a.dtype, np.inexact) else np.zeros(a.shape, a.dtype)  # JAX: float0
                     for c, a in zip(pullback(list(cotangents)), primal.in_avals))

    vjp_fun.__name__ = "fun_vjp_jax"  # JAX's name for every exported VJP
    specs = [ShapeDtypeStruct(a.shape, a.dtype, sharding=s, weak_type=a.weak_type)
             for a, s in zip(primal.in_avals, primal._in_named_shardings)]
    specs += [ShapeDtypeStruct(a.shape, a.dtype, sharding=s)
              for a, s in zip(primal.out_avals, primal._out_named_shardings)]
    return _export(jit(vjp_fun), primal.platforms, tuple(primal.disabled_safety_checks), tuple(specs), {})

