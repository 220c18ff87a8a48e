"""jax_debug_nans / jax_debug_infs: every operation's floating results are checked for NaNs (infinities).

Turning a check on installs a root trace that evaluates like the eager one, then looks at the
local buffers of each floating result and raises FloatingPointError naming the operation, as JAX
does. Jitted programs then run unfused, equation by equation (JAX's de-optimized rerun), so the
error names the operation that made the NaN inside them too. Turning both checks off puts the plain eager trace back: no cost.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

import numpy as np

from ..arrays.array import Array
from ..core.core import Primitive, eager_trace, set_eager_trace
from .eager import EagerTrace
from .staging import inline_rules
from ..core.jaxpr import Jaxpr

_plain = eager_trace()  # the root trace installed by interpreters.eager


class _CheckingEagerTrace(EagerTrace):
    """Eager evaluation followed by a check of each floating result."""

    def __init__(self, nans: bool, infs: bool) -> None:
        super().__init__()
        self.nans, self.infs = nans, infs

    def process(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        if primitive in inline_rules and isinstance(params.get("jaxpr"), Jaxpr):
            return inline_rules[primitive](*args, **params)  # a program (jit): unfused, each operation checked
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # the check below reports them
            outputs = super().process(primitive, args, params)
        for output in (outputs if primitive.multiple_results else [outputs]):
            if isinstance(output, Array) and np.issubdtype(output.dtype, np.inexact):
                self._check(primitive, output)
        return outputs

    def _check(self, primitive: Primitive, output: Array) -> None:
        for buffer in {id(b): b for b in output.local_buffers().values()}.values():
            if self.nans and np.isnan(buffer).any():
                raise FloatingPointError(f"invalid value (nan) encountered in {primitive.name}")
            if self.infs and np.isinf(buffer).any():
                raise FloatingPointError(f"invalid value (inf) encountered in {primitive.name}")


def check_floats(nans: bool, infs: bool) -> None:
    """Check every operation's results for NaNs and/or infinities from now on (both False: stop checking)."""
    set_eager_trace(_CheckingEagerTrace(nans, infs) if nans or infs else _plain)


@contextlib.contextmanager
def debug_nans(new_val: bool = True) -> Iterator[None]:
    """Within the block, operations producing NaNs raise FloatingPointError (jax.debug_nans)."""
    yield from _with_option("jax_debug_nans", new_val)


@contextlib.contextmanager
def debug_infs(new_val: bool = True) -> Iterator[None]:
    """Within the block, operations producing infinities raise FloatingPointError (jax.debug_infs)."""
    yield from _with_option("jax_debug_infs", new_val)


def _with_option(name: str, value: bool) -> Iterator[None]:
    from ..config import config

    previous = config.read(name)
    config.update(name, bool(value))
    try:
        yield
    finally:
        config.update(name, previous)
