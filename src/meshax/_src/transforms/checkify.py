"""checkify: runtime checks of traced values, returned as an Error value instead of raised inside transforms.

`check(pred, msg, *fmt)` binds `check_p`. Inside `checkify(f)` a CheckifyTrace (an interpreter of the one trace
mechanism) is current: it turns each check into updates of an error state kept as values of its parent trace (a
failed flag, the code of the first failed check, each check's payload), so the state works eagerly and under an
enclosing jit alike; it also adds the automatic checks asked for (NaNs produced, integer division by zero).
Without checkify, a check evaluated on concrete values raises JaxRuntimeError at once, and staging one (jit)
is an error, as in JAX.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from ..core.core import (Primitive, Trace, Tracer, abstract_eval_rules, aval_of, current_trace, set_current_trace)
from ..core.dtypes import issubdtype
from ..interpreters.ad import jvp_rules
from ..interpreters.batching import batching_rules
from ..interpreters.staging import inline_rules
from ..tree.tree_util import register_pytree_node, tree_flatten, tree_unflatten


class JaxRuntimeError(ValueError):
    """A failed check (raised by `Error.throw()`, or by a check run outside checkify)."""


class FailedCheckError:
    """The category of errors from user `check`s."""


class NaNError:
    """The category of NaNs produced by an operation."""


class DivisionByZeroError:
    """The category of integer divisions by zero."""


class OOBError:
    """The category of out-of-bounds indexing (meshax does not check it yet; asking for it is refused)."""


ErrorCategory = type
user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
div_checks = frozenset({DivisionByZeroError})
index_checks = frozenset({OOBError})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks

check_p = Primitive("check", multiple_results=True)


def _format(msg: str, payload_tree: Any, payload: Sequence[Any]) -> str:
    args, kwargs = tree_unflatten(payload_tree, [np.asarray(p) for p in payload])
    return msg.format(*args, **kwargs)


def _under_checkify() -> bool:
    return any(isinstance(t, CheckifyTrace) for t in current_trace().ancestors())


def _check_abstract_eval(pred: Any, *payload: Any, msg: str, payload_tree: Any) -> list[Any]:
    if not _under_checkify():
        raise ValueError("Cannot abstractly evaluate a checkify.check which was not functionalized. This probably "
                         "means you tried to stage (jit/scan/pmap/...) a `check` without functionalizing it through "
                         "`checkify.checkify`.")
    return []


def _check_now(pred: Any, *payload: Any, msg: str, payload_tree: Any) -> list[Any]:
    """A check on concrete values outside checkify: raise at once if it fails."""
    if not bool(np.asarray(pred)):
        raise JaxRuntimeError(_format(msg, payload_tree, payload) + " (`check` failed)")
    return []


def _check_batched(values: list[Any], dims: list[Any], *, msg: str, payload_tree: Any) -> tuple[list[Any], list[Any]]:
    """Over a batch, the check fails if any element fails; the payload is that of the first failing element."""
    from .. import numpy as jnp

    pred, payload = values[0], values[1:]
    pred = jnp.moveaxis(pred, dims[0], 0) if dims[0] is not None else pred
    first = jnp.argmin(pred) if dims[0] is not None else 0
    chosen = [p if d is None else jnp.take(p, first, axis=d) for p, d in zip(payload, dims[1:])]
    check_p.bind(jnp.all(pred), *chosen, msg=msg, payload_tree=payload_tree)
    return [], []


abstract_eval_rules[check_p] = _check_abstract_eval
inline_rules[check_p] = _check_now
jvp_rules[check_p] = lambda primals, tangents, **params: (check_p.bind(*primals, **params), [])
batching_rules[check_p] = _check_batched


class Error:
    """The outcome of a checkified function: whether a check failed, which one first, and its message."""

    def __init__(self, failed: Any, code: Any, payloads: tuple, messages: tuple) -> None:
        self._failed = failed
        self._code = code
        self._payloads = payloads  # per message: its payload leaves
        self._messages = messages  # per message: (format string, payload tree, suffix)

    def get(self) -> str | None:
        """The message of the first failed check, or None when all passed."""
        if not bool(np.asarray(self._failed)):
            return None
        code = int(np.asarray(self._code))
        msg, tree, suffix = self._messages[code]
        return _format(msg, tree, self._payloads[code]) + suffix

    def get_exception(self) -> JaxRuntimeError | None:
        message = self.get()
        return None if message is None else JaxRuntimeError(message)

    def throw(self) -> None:
        """Raise JaxRuntimeError if a check failed."""
        error = self.get_exception()
        if error is not None:
            raise error

    def __repr__(self) -> str:
        if isinstance(self._failed, Tracer):
            return "Error(<traced>)"
        return f"Error({self.get()!r})"

    __str__ = lambda self: self.get() or "no error"  # noqa: E731


def _flatten_error(error: Error) -> tuple[list[Any], tuple]:
    leaves = [error._failed, error._code, *(p for payload in error._payloads for p in payload)]
    return leaves, (tuple(len(p) for p in error._payloads), error._messages)


def _unflatten_error(aux: tuple, leaves: Sequence[Any]) -> Error:
    sizes, messages = aux
    leaves = list(leaves)
    payloads, start = [], 2
    for size in sizes:
        payloads.append(tuple(leaves[start:start + size]))
        start += size
    return Error(leaves[0], leaves[1], tuple(payloads), messages)


register_pytree_node(Error, _flatten_error, _unflatten_error)


def init_error() -> Error:
    """An Error in which nothing failed."""
    return Error(np.bool_(False), np.int32(0), (), ())


class CheckifyTrace(Trace):
    """Runs primitives in its parent, turning checks into an error state held as the parent's values."""

    def __init__(self, parent: Trace | None, enabled: frozenset) -> None:
        super().__init__(parent)
        self.enabled = enabled
        self.failed: Any = np.bool_(False)
        self.code: Any = np.int32(0)
        self.payloads: list[tuple] = []
        self.messages: list[tuple] = []

    def record(self, failed: Any, msg: str, payload_tree: Any, payload: Sequence[Any], suffix: str) -> None:
        """Note a check whose failure flag is `failed` (only the first failure is reported)."""
        from .. import numpy as jnp

        with set_current_trace(self.parent):
            index = np.int32(len(self.messages))
            self.code = jnp.where(jnp.logical_or(self.failed, jnp.logical_not(failed)), self.code, index)
            self.failed = jnp.logical_or(self.failed, failed)
        self.payloads.append(tuple(payload))
        self.messages.append((msg, payload_tree, suffix))

    def process(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        if primitive is check_p:
            if FailedCheckError in self.enabled:
                from .. import numpy as jnp

                with set_current_trace(self.parent):
                    failed = jnp.logical_not(args[0])
                self.record(failed, params["msg"], params["payload_tree"], args[1:], " (`check` failed)")
            return []
        if primitive.name in ("jit", "checkpoint"):  # look inside: the checks of a jitted function count too
            with set_current_trace(self):
                return inline_rules[primitive](*args, **params)
        with set_current_trace(self.parent):
            out = primitive.bind(*args, **params)
        self._automatic(primitive, args, out)
        return out

    def _automatic(self, primitive: Primitive, args: Sequence[Any], out: Any) -> None:
        from .. import numpy as jnp

        if DivisionByZeroError in self.enabled and primitive.name in ("div", "rem", "floor_divide") and \
                np.issubdtype(aval_of(args[1]).dtype, np.integer):
            with set_current_trace(self.parent):
                failed = jnp.any(jnp.equal(args[1], 0))
            self.record(failed, "division by zero", tree_flatten(((), {}))[1], (), "")
        if NaNError in self.enabled:
            outs = out if primitive.multiple_results else [out]
            floats = [o for o in outs if issubdtype(aval_of(o).dtype, np.inexact)]
            if not floats:
                return
            with set_current_trace(self.parent):
                made = functools.reduce(jnp.logical_or, [jnp.any(jnp.isnan(o)) for o in floats])
                had = [jnp.any(jnp.isnan(a)) for a in args if issubdtype(aval_of(a).dtype, np.inexact)]
                if had:
                    made = jnp.logical_and(made, jnp.logical_not(functools.reduce(jnp.logical_or, had)))
            self.record(made, f"nan generated by primitive: {primitive.name}.", tree_flatten(((), {}))[1], (), "")

    def error(self) -> Error:
        return Error(self.failed, self.code, tuple(self.payloads), tuple(self.messages))


def check(pred: Any, msg: str, *fmt_args: Any, **fmt_kwargs: Any) -> None:
    """Check that `pred` holds; if not, the error `msg.format(*fmt_args, **fmt_kwargs)` is reported (by checkify's
    Error, or raised at once outside checkify). Formatting arguments must be arrays."""
    if not isinstance(msg, str):
        raise TypeError(f"Expected a string for the checkify.check message, got {type(msg).__name__}: {msg!r}.")
    aval = aval_of(pred)
    if aval.shape != ():
        raise TypeError(f"check takes a scalar pred as argument, got shape {aval.shape}")
    if aval.dtype != np.bool_:
        raise TypeError(f"check takes a boolean pred as argument, got dtype {aval.dtype}")
    leaves, tree = tree_flatten((fmt_args, fmt_kwargs))
    for leaf in leaves:
        if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
            raise TypeError(f"Formatting arguments to checkify.check need to be PyTrees of arrays, but got {leaf!r} "
                            f"of type {type(leaf)}.")
    check_p.bind(pred, *leaves, msg=msg, payload_tree=tree)


def checkify(f: Callable[..., Any], errors: frozenset = user_checks) -> Callable[..., tuple[Error, Any]]:
    """`f` returning (error, output): checks that fail inside it (and the automatic `errors` asked for) are
    reported in `error` instead of raised, eagerly and under jit alike."""
    unsupported = set(errors) - set(all_checks)
    if unsupported:
        raise ValueError(f"checkify errors must be among all_checks; got {sorted(map(str, unsupported))}")
    if OOBError in errors:
        raise NotImplementedError("checkify index_checks (out-of-bounds indexing) are not implemented in meshax "
                                  "yet; use user_checks, nan_checks, div_checks or float_checks.")

    @functools.wraps(f)
    def checked(*args: Any, **kwargs: Any) -> tuple[Error, Any]:
        trace = CheckifyTrace(current_trace(), frozenset(errors))
        with set_current_trace(trace, finish=True):
            out = f(*args, **kwargs)
        return trace.error(), out

    return checked


def check_error(error: Error) -> None:
    """Raise (eagerly) or keep checking (inside checkify) the failure recorded in `error`."""
    if not isinstance(error, Error):
        raise TypeError(f"check_error takes an Error, got {type(error).__name__}")
    trace = next((t for t in current_trace().ancestors() if isinstance(t, CheckifyTrace)), None)
    if trace is None:
        error.throw()
        return
    for code, (payload, (msg, tree, suffix)) in enumerate(zip(error._payloads, error._messages)):
        from .. import numpy as jnp

        with set_current_trace(trace.parent):
            failed = jnp.logical_and(error._failed, jnp.equal(error._code, code))
        trace.record(failed, msg, tree, payload, suffix)


def debug_check(pred: Any, msg: str, *fmt_args: Any, **fmt_kwargs: Any) -> None:
    """A check that is skipped where it cannot be functionalized (under jit without checkify)."""
    if _under_checkify() or not isinstance(pred, Tracer):
        check(pred, msg, *fmt_args, **fmt_kwargs)
