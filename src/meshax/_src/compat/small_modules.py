"""Names of JAX's smaller modules built on meshax's machinery: jax.debug (log, breakpoint,
inspect_array_sharding, its effects), jax.sharding (AbstractDevice, ManualAxisType, UnreducedKind,
make_single_device_sharding), jax.ad_checkpoint (policy results), jax.stages (Wrapped, CompilerOptions),
jax.random (Key, random_gamma_p), jax.custom_derivatives (linear_call and helpers) and
jax.experimental.multihost_utils (reached_preemption_sync_point; live_devices is runtime/live.py).
"""
from __future__ import annotations

import dataclasses
import logging
import math
import sys
import typing
from typing import Any, Callable, NamedTuple, Protocol

import numpy as np

from ..arrays.array import Array
from ..core.core import Primitive, aval_of
from ..sharding.shardings import NamedSharding, SingleDeviceSharding
from ..transforms.debugging import callback
from ..transforms.remat import checkpoint_name
from ..tree.tree_util import tree_flatten, tree_map

# ---- jax.debug -------------------------------------------------------------------------------------------------


class DebugEffect:
    """The effect of an unordered debug callback (jax.debug.callback, print)."""

    def __repr__(self) -> str:
        return "Debug"


class OrderedDebugEffect:
    """The effect of an ordered debug callback (`ordered=True`): calls keep the program's order."""

    def __repr__(self) -> str:
        return "OrderedDebug"


_debug_logger = logging.getLogger("meshax.debug")


def log(fmt: str | None = None, *args: Any, ordered: bool = False, partitioned: bool = False,
        skip_format_check: bool = False, **kwargs: Any) -> Callable[..., None] | None:
    """Log `fmt.format(*args, **kwargs)` at INFO level (logger 'meshax.debug') with the runtime values of traced
    arrays, when the program runs (as jax.debug.print, through logging). Without `fmt`: the options' logging
    function, called as `log(ordered=True)("x={x}", x=x)`."""
    if fmt is None:
        return lambda fmt, *args, **kwargs: log(fmt, *args, ordered=ordered, partitioned=partitioned,
                                                skip_format_check=skip_format_check, **kwargs)
    if not isinstance(fmt, str):
        raise TypeError(f"jax.debug.log's first argument must be a format string, got {fmt!r}")

    def write(*values: Any, **named: Any) -> None:
        shown = lambda v: (np.asarray(v)[()] if np.ndim(v) == 0 else np.asarray(v)) if isinstance(v, Array) else v
        _debug_logger.info(fmt.format(*[shown(v) for v in values], **{k: shown(v) for k, v in named.items()}))

    callback(write, *args, ordered=ordered, **kwargs)
    return None


def breakpoint(*, backend: str | None = None, filter_frames: bool = True, num_frames: int | None = None,  # noqa: A001
               ordered: bool = False, token: Any = None, **kwargs: Any) -> Any:
    """Enter Python's debugger (sys.breakpointhook: pdb, or what PYTHONBREAKPOINT names) when the program reaches
    this point: at once eagerly, each time the compiled function runs under jit."""
    callback(lambda: sys.breakpointhook(), ordered=ordered)
    return token


def inspect_array_sharding(value: Any, *, callback: Callable[[Any], None]) -> None:  # noqa: F811
    """Call `callback` with the sharding of each array in `value`: at once for Arrays, else the sharding its type
    says (Explicit axes of the mesh in use; a value without one, replicated on the mesh)."""
    from ..sharding.mesh import current_mesh
    from ..sharding.shardings import PartitionSpec

    for leaf in tree_flatten(value)[0]:
        if isinstance(leaf, Array):
            callback(leaf.sharding)
            continue
        aval, mesh = aval_of(leaf), current_mesh()
        if mesh is None:
            from ..runtime.devices import local_devices

            callback(SingleDeviceSharding(local_devices()[0]))
        else:
            spec = PartitionSpec.from_entries(aval.explicit) if any(aval.explicit) else PartitionSpec()
            callback(NamedSharding(mesh, spec))


# ---- jax.sharding -------------------------------------------------------------------------------------------------


class AbstractDevice:
    """A kind of device, without a particular device (an AbstractMesh's devices)."""

    def __init__(self, device_kind: str, num_cores: int | None, platform: str) -> None:
        self.device_kind, self.num_cores, self.platform = device_kind, num_cores, platform

    def _key(self) -> tuple:
        return (self.device_kind, self.num_cores, self.platform)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AbstractDevice) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"AbstractDevice(device_kind={self.device_kind}, num_cores={self.num_cores}, platform={self.platform})"

def make_single_device_sharding(device: Any, *, memory_kind: str | None = None) -> SingleDeviceSharding:
    """The sharding placing a whole array on `device`."""
    return SingleDeviceSharding(device, memory_kind=memory_kind)


# ---- jax.ad_checkpoint: what a policy may answer -------------------------------------------------------------------


class _PolicyAnswer:
    def __init__(self, name: str, saves: bool) -> None:
        self.name, self.saves = name, saves

    def __bool__(self) -> bool:  # meshax's remat reads a policy's answer as a boolean: saved or not
        return self.saves

    def __repr__(self) -> str:
        return self.name


Recompute = _PolicyAnswer("Recompute", False)
Saveable = _PolicyAnswer("Saveable", True)


class Offloadable(NamedTuple):
    """A policy's answer: save the value, moved from memory `src` to `dst` (meshax saves it in place)."""
    src: str
    dst: str


def checkpoint_name_fwd(x: Any, name: str) -> Any:
    """`x` named `name` for remat policies (as checkpoint_name)."""
    return checkpoint_name(x, name)


# ---- jax.stages -----------------------------------------------------------------------------------------------------

CompilerOptions = dict[str, Any]


@typing.runtime_checkable
class Wrapped(Protocol):
    """A function transformed by jit: callable, and staged with `.trace(...)` / `.lower(...)`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    def trace(self, *args: Any, **kwargs: Any) -> Any: ...

    def lower(self, *args: Any, **kwargs: Any) -> Any: ...


# ---- jax.random -----------------------------------------------------------------------------------------------------

Key = typing.NewType("Key", Array)


def _random_gamma(key: Any, a: Any, *, log_space: bool) -> Any:
    """Gamma(a) samples (or their logs) shaped as `a`: each key of `key` (typed keys whose shape is a prefix of
    `a`'s) split into one key per element of `a` under it, as JAX's random_gamma_p does."""
    from .. import numpy as jnp
    from ..random.gamma import _gamma_flat
    from ..random.prng import key_data, split

    data = key_data(key)
    shape = tuple(aval_of(a).shape)
    n = math.prod(shape)
    if n == 0:
        return jnp.zeros(shape, aval_of(a).dtype)
    keys = split(data, (math.prod(shape[len(aval_of(data).shape) - 1:]),))
    return jnp.reshape(_gamma_flat(jnp.reshape(keys, (n, 2)), jnp.reshape(a, (n,)), log_space), shape)


class _ExpandedPrimitive(Primitive):
    """A primitive of JAX's that meshax expands at once into the operations computing it, in every trace."""

    def __init__(self, name: str, expand: Callable[..., Any]) -> None:
        super().__init__(name)
        self._expand = expand

    def bind(self, *args: Any, **params: Any) -> Any:
        return self._expand(*args, **params)


random_gamma_p = _ExpandedPrimitive("random_gamma", _random_gamma)


# ---- jax.custom_derivatives ----------------------------------------------------------------------------------------

remat_opt_p = Primitive("remat_opt", multiple_results=True)


def custom_vjp_primal_tree_values(tree: Any) -> Any:
    """`tree` with each CustomVJPPrimal record (a symbolic_zeros fwd rule's argument) replaced by its value."""
    from ..transforms.symbolic_zeros import CustomVJPPrimal

    return tree_map(lambda x: x.value if isinstance(x, CustomVJPPrimal) else x, tree,
                    is_leaf=lambda x: isinstance(x, CustomVJPPrimal))


def linear_call(fun: Callable[..., Any], fun_transpose: Callable[..., Any], residual_args: Any,
                linear_args: Any) -> Any:
    """`fun(residual_args, linear_args)`, a function linear in `linear_args`, whose transpose (used by grad, vjp and
    linear_transpose) is `fun_transpose(residual_args, cotangent)` -- itself a linear_call transposed by `fun`."""
    from .. import numpy as jnp
    from ..transforms.custom_derivatives import custom_vjp

    @custom_vjp
    def call(residuals: Any, linear: Any) -> Any:
        return fun(residuals, linear)

    def forward(residuals: Any, linear: Any) -> tuple[Any, Any]:
        return fun(residuals, linear), residuals

    def backward(residuals: Any, cotangent: Any) -> tuple[Any, Any]:
        zero = tree_map(lambda r: jnp.zeros_like(r) if np.issubdtype(jnp.result_type(r), np.inexact) else None,
                        residuals)
        return zero, linear_call(fun_transpose, fun, residuals, cotangent)

    call.defvjp(forward, backward)
    return call(residual_args, linear_args)


# ---- jax.experimental.multihost_utils ---------------------------------------------------------------------------


def reached_preemption_sync_point(step_id: int) -> bool:
    """Whether every process reached the step to checkpoint at before a preemption: meshax has no preemption
    notices, so never (False), as JAX without a preemption service."""
    return False


# ---- jax.nn: block-scaled matrix products --------------------------------------------------------------------------


@dataclasses.dataclass
class BlockScaleConfig:
    """How a block-scaled operand is stored: `mode`, elements per scale, element and scale dtypes."""
    mode: str
    block_size: int
    data_type: Any
    scale_type: Any
    global_scale: Any
    infer_only: bool


def get_scaled_dot_general_config(mode: str, global_scale: Any = None) -> BlockScaleConfig:
    """The block-scale configuration of `mode`: 'mxfp8', 'mxfp4' or 'nvfp4' (with `global_scale`, default 1)."""
    import ml_dtypes

    from .. import numpy as jnp

    if mode == "mxfp8":
        return BlockScaleConfig(mode, 32, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu, None, False)
    if mode == "mxfp4":
        return BlockScaleConfig(mode, 32, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e8m0fnu, None, False)
    if mode == "nvfp4":
        scale = jnp.array([1.0], np.float32) if global_scale is None else global_scale
        return BlockScaleConfig(mode, 16, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3fn, scale, False)
    raise ValueError(f"Unsupported mode: {mode}")


def scaled_matmul(lhs: Any, rhs: Any, lhs_scales: Any, rhs_scales: Any,
                  preferred_element_type: Any = np.float32) -> Any:
    """`einsum('BMK,BNK->BMN')` of `lhs` and `rhs` (B, M, K) / (B, N, K), each scaled by its scales repeated over
    blocks of the contracting dimension K (block size K // scales.shape[-1]), computed in float32."""
    from .. import numpy as jnp

    if not all(aval_of(x).ndim == 3 for x in (lhs, rhs, lhs_scales, rhs_scales)):
        raise ValueError("scaled_matmul requires all inputs to be 3-dimensional arrays")
    a_shape, b_shape = aval_of(lhs_scales).shape, aval_of(rhs_scales).shape
    if a_shape[0] != b_shape[0] or a_shape[2] != b_shape[2]:
        raise ValueError(f"scaled_matmul requires scales to have matching batch (B) and contract (K) dimensions, "
                         f"but got shapes {a_shape} and {b_shape}")

    def scaled(x: Any, scales: Any) -> Any:
        block = aval_of(x).shape[-1] // aval_of(scales).shape[-1]
        return x.astype(np.float32) * jnp.repeat(scales.astype(np.float32), block, axis=-1)

    lhs, rhs = scaled(lhs, lhs_scales).astype(preferred_element_type), scaled(rhs, rhs_scales).astype(
        preferred_element_type)  # the operands rounded to the output's dtype, accumulated in float32
    return jnp.einsum("bmk,bnk->bmn", lhs, rhs, preferred_element_type=np.float32).astype(preferred_element_type)


def scaled_dot_general(lhs: Any, rhs: Any, dimension_numbers: Any, preferred_element_type: Any = np.float32,
                       configs: list | None = None, implementation: str | None = None) -> Any:
    """lax.dot_general of `lhs` and `rhs`; with `configs`, of their block-scaled quantizations (not in meshax
    yet: NotImplementedError)."""
    from ..lax.lax_ops import dot_general

    if configs is not None:
        raise NotImplementedError("scaled_dot_general with configs (quantizing the operands to block-scaled "
                                  "formats) is not implemented in meshax; pass configs=None for lax.dot_general, "
                                  "or quantize yourself and call scaled_matmul.")
    return dot_general(lhs, rhs, dimension_numbers, preferred_element_type=preferred_element_type)
