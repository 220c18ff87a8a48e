"""First-order optimizers on pytrees (as jax.example_libraries.optimizers).

Every optimizer is a function of its hyperparameters that returns an `Optimizer` triple
`(init_fn, update_fn, params_fn)`:

* `init_fn(params)` makes an `OptimizerState` from a pytree of arrays;
* `update_fn(step, grads, opt_state)` returns the next state, given the step index and a
  pytree of gradients with the same structure as the parameters;
* `params_fn(opt_state)` returns the current parameters as that pytree.

`step_size` arguments take a number or a schedule (a function of the step index); the
schedules below make common ones. The arithmetic uses only meshax.numpy, so the functions run
eagerly or under `meshax.jit`, and the states of process-spanning arrays keep their shardings.
New optimizers are written for one array at a time and lifted to pytrees with `@optimizer`.
"""
from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any, Callable

import meshax.numpy as jnp
from meshax import tree_util

__all__ = [
    "JoinPoint", "Optimizer", "OptimizerState", "Schedule", "adagrad", "adam", "adamax", "clip_grads", "constant",
    "exponential_decay", "inverse_time_decay", "l2_norm", "make_schedule", "momentum", "nesterov", "optimizer",
    "pack_optimizer_state", "piecewise_constant", "polynomial_decay", "rmsprop", "rmsprop_momentum", "sgd", "sm3",
    "unpack_optimizer_state",
]

Step = int
Schedule = Callable[[Step], Any]

OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
OptimizerState.__doc__ = """An optimizer's state for a parameter pytree: `packed_state` holds, per parameter leaf, the
leaves of that parameter's own state; `tree_def` is the parameters' structure and `subtree_defs` the structure of each
parameter's state. Only `packed_state` holds pytree children (arrays); the two structures are static."""
tree_util.register_pytree_node(
    OptimizerState,
    lambda state: ((state.packed_state,), (state.tree_def, state.subtree_defs)),
    lambda structures, children: OptimizerState(children[0], *structures),
)

Optimizer = namedtuple("Optimizer", ["init_fn", "update_fn", "params_fn"])
Optimizer.__doc__ = "The functions of an optimizer: `init_fn(params)`, `update_fn(step, grads, state)`, " \
                    "`params_fn(state)`."


def _flatten_each(trees: Any) -> tuple[tuple[list, ...], tuple[Any, ...]]:
    """Flatten every tree of `trees`: (the tuple of leaf lists, the tuple of structures)."""
    flat = [tree_util.tree_flatten(tree) for tree in trees]
    return tuple(leaves for leaves, _ in flat), tuple(structure for _, structure in flat)


def _unflatten_each(structures: Any, leaf_lists: Any) -> list:
    return [tree_util.tree_unflatten(structure, leaves) for structure, leaves in zip(structures, leaf_lists)]


def optimizer(opt_maker: Callable[..., tuple[Callable, Callable, Callable]]) -> Callable[..., Optimizer]:
    """Lift an optimizer written for single arrays to pytrees of arrays.

    `opt_maker(*hyperparameters)` returns `(init, update, get_params)` where `init(x)` gives the state
    (any pytree) of one parameter array, `update(step, g, state)` its next state and `get_params(state)`
    the array. The decorated function returns the `Optimizer` whose functions work on whole pytrees.
    """
    @functools.wraps(opt_maker)
    def make(*args: Any, **kwargs: Any) -> Optimizer:
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def init_fn(params: Any) -> OptimizerState:
            leaves, tree_def = tree_util.tree_flatten(params)
            packed, subtree_defs = _flatten_each([init(leaf) for leaf in leaves])
            return OptimizerState(packed, tree_def, subtree_defs)

        @functools.wraps(update)
        def update_fn(step: Step, grads: Any, opt_state: OptimizerState) -> OptimizerState:
            packed, tree_def, subtree_defs = opt_state
            grad_leaves, grad_def = tree_util.tree_flatten(grads)
            if grad_def != tree_def:
                raise TypeError(f"The gradient tree {grad_def} does not match the parameter tree {tree_def} the "
                                "optimizer state was made for; pass gradients with the parameters' structure.")
            states = _unflatten_each(subtree_defs, packed)
            new_packed, new_defs = _flatten_each([update(step, g, s) for g, s in zip(grad_leaves, states)])
            for before, after in zip(subtree_defs, new_defs):
                if before != after:
                    raise TypeError(f"The optimizer's update turned a state of structure {before} into one of "
                                    f"structure {after}; its update must return the structure it is given.")
            return OptimizerState(new_packed, tree_def, subtree_defs)

        @functools.wraps(get_params)
        def params_fn(opt_state: OptimizerState) -> Any:
            packed, tree_def, subtree_defs = opt_state
            return tree_util.tree_unflatten(tree_def, [get_params(s) for s in _unflatten_each(subtree_defs, packed)])

        return Optimizer(init_fn, update_fn, params_fn)

    return make


def _first(state: Any) -> Any:
    """The parameter array of a state tuple whose first entry is it."""
    return state[0]


@optimizer
def sgd(step_size: float | Schedule) -> Optimizer:
    """Stochastic gradient descent: x <- x - step_size(i) * g."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0

    def update(i: Step, g: Any, x: Any) -> Any:
        return x - step_size(i) * g

    def get_params(x: Any) -> Any:
        return x

    return Optimizer(init, update, get_params)


@optimizer
def momentum(step_size: float | Schedule, mass: float) -> tuple[Callable, Callable, Callable]:
    """Heavy-ball momentum: v <- mass * v + g, then x <- x - step_size(i) * v."""
    step_size = make_schedule(step_size)

    def update(i: Step, g: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * velocity, velocity

    return _with_one_accumulator, update, _first


@optimizer
def nesterov(step_size: float | Schedule, mass: float) -> tuple[Callable, Callable, Callable]:
    """Nesterov momentum: v <- mass * v + g, then x <- x - step_size(i) * (mass * v + g)."""
    step_size = make_schedule(step_size)

    def update(i: Step, g: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g), velocity

    return _with_one_accumulator, update, _first


@optimizer
def adagrad(step_size: float | Schedule, momentum: float = 0.9) -> tuple[Callable, Callable, Callable]:
    """Adagrad (Duchi et al., 2011) with momentum on the scaled gradient; state (x, sum of g**2, momentum)."""
    step_size = make_schedule(step_size)

    def update(i: Step, g: Any, state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        inv_root = jnp.where(g_sq > 0, 1. / jnp.sqrt(g_sq), 0.0)
        m = (1. - momentum) * (g * inv_root) + momentum * m
        return x - step_size(i) * m, g_sq, m

    return _with_two_moments, update, _first


@optimizer
def rmsprop(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8) -> tuple[Callable, Callable, Callable]:
    """RMSProp: a decaying average of g**2 scales each step; state (x, average)."""
    step_size = make_schedule(step_size)

    def update(i: Step, g: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
        x, avg_sq = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1. - gamma)
        return x - step_size(i) * g / jnp.sqrt(avg_sq + eps), avg_sq

    return _with_one_accumulator, update, _first


@optimizer
def rmsprop_momentum(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8,
                     momentum: float = 0.9) -> tuple[Callable, Callable, Callable]:
    """RMSProp whose scaled steps accumulate in a momentum term; state (x, average of g**2, momentum)."""
    step_size = make_schedule(step_size)

    def update(i: Step, g: Any, state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        x, avg_sq, mom = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1. - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq + eps)
        return x - mom, avg_sq, mom

    return _with_two_moments, update, _first


def _with_one_accumulator(x0: Any) -> tuple[Any, Any]:
    """The state of optimizers with one accumulator (a velocity, an average of g**2): parameters and a zero."""
    return x0, jnp.zeros_like(x0)


def _with_two_moments(x0: Any) -> tuple[Any, Any, Any]:
    """The state of optimizers with two accumulators (Adam's moments, Adagrad's sums...): parameters, two zeros."""
    return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)


def _first_moment(g: Any, m: Any, b1: float) -> Any:
    return (1 - b1) * g + b1 * m


def _bias_correction(beta: float, dtype: Any, i: Step) -> Any:
    """1 - beta**(i + 1) in the moments' dtype: what Adam's running averages are divided by."""
    return 1 - jnp.asarray(beta, dtype) ** (i + 1)


@optimizer
def adam(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8) -> tuple[Callable, Callable, Callable]:
    """Adam (Kingma and Ba, 2014); state (x, first moment, second moment)."""
    step_size = make_schedule(step_size)

    def update(i: Step, g: Any, state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        x, m, v = state
        m = _first_moment(g, m, b1)
        v = (1 - b2) * jnp.square(g) + b2 * v
        m_hat = m / _bias_correction(b1, m.dtype, i)
        v_hat = v / _bias_correction(b2, m.dtype, i)
        return x - step_size(i) * m_hat / (jnp.sqrt(v_hat) + eps), m, v

    return _with_two_moments, update, _first


@optimizer
def adamax(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999,
           eps: float = 1e-8) -> tuple[Callable, Callable, Callable]:
    """AdaMax, Adam with an infinity norm (Kingma and Ba, 2014); state (x, first moment, weighted max of |g|)."""
    step_size = make_schedule(step_size)

    def update(i: Step, g: Any, state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        x, m, u = state
        m = _first_moment(g, m, b1)
        u = jnp.maximum(b2 * u, jnp.abs(g))
        x = x - (step_size(i) / _bias_correction(b1, m.dtype, i)) * m / (u + eps)
        return x, m, u

    return _with_two_moments, update, _first


def _along(v: Any, axis: int, ndim: int) -> Any:
    """A vector as an `ndim`-dimensional array whose only non-trivial dimension is `axis`."""
    return jnp.reshape(v, tuple(-1 if d == axis else 1 for d in range(ndim)))


@optimizer
def sm3(step_size: float | Schedule, momentum: float = 0.9) -> tuple[Callable, Callable, Callable]:
    """SM3 (Anil et al., 2019): one accumulator vector per dimension instead of one per entry.

    The state is (x at least 1-d, momentum, accumulator vectors, x's original shape); as in JAX, that
    shape's integers are leaves of the state.
    """
    step_size = make_schedule(step_size)

    def init(x0: Any) -> tuple[Any, Any, list, tuple]:
        shape = tuple(x0.shape)
        x0 = jnp.atleast_1d(x0)
        return x0, jnp.zeros_like(x0), [jnp.zeros(n, dtype=x0.dtype) for n in x0.shape], shape

    def update(i: Step, g: Any, state: tuple[Any, Any, list, tuple]) -> tuple[Any, Any, list, tuple]:
        x, m, vs, shape = state
        accum = functools.reduce(jnp.minimum, [_along(v, d, x.ndim) for d, v in enumerate(vs)]) + jnp.square(g)
        inv_root = jnp.where(accum > 0, 1. / jnp.sqrt(accum), 0)
        m = (1. - momentum) * (g * inv_root) + momentum * m
        x = x - step_size(i) * m
        vs = [jnp.max(accum, axis=tuple(a for a in range(x.ndim) if a != d)) for d in range(x.ndim)]
        return x, m, vs, shape

    def get_params(state: tuple[Any, Any, list, tuple]) -> Any:
        x, _, _, shape = state
        return jnp.reshape(x, tuple(int(n) for n in shape))

    return init, update, get_params


# ---- schedules ---------------------------------------------------------------------------------------------------


def constant(step_size: Any) -> Schedule:
    """The schedule that is always `step_size`."""
    def schedule(i: Step) -> Any:
        return step_size
    return schedule


def exponential_decay(step_size: Any, decay_steps: Any, decay_rate: Any) -> Schedule:
    """step_size * decay_rate ** (i / decay_steps)."""
    def schedule(i: Step) -> Any:
        return step_size * decay_rate ** (i / decay_steps)
    return schedule


def inverse_time_decay(step_size: Any, decay_steps: Any, decay_rate: Any, staircase: bool = False) -> Schedule:
    """step_size / (1 + decay_rate * i / decay_steps), with i / decay_steps floored if `staircase`."""
    if staircase:
        def schedule(i: Step) -> Any:
            return step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    else:
        def schedule(i: Step) -> Any:
            return step_size / (1 + decay_rate * i / decay_steps)
    return schedule


def polynomial_decay(step_size: Any, decay_steps: Any, final_step_size: Any, power: float = 1.0) -> Schedule:
    """`step_size` at step 0 falling to `final_step_size` at `decay_steps` (and after) as (1 - i/decay_steps)**power."""
    def schedule(i: Step) -> Any:
        i = jnp.minimum(i, decay_steps)
        fraction = (1 - i / decay_steps) ** power
        return fraction * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries: Any, values: Any) -> Schedule:
    """values[k] for the steps i with boundaries[k-1] < i <= boundaries[k] (values[0] up to boundaries[0])."""
    boundaries = jnp.array(boundaries)
    values = jnp.array(values)
    if boundaries.ndim != 1 or values.ndim != 1:
        raise ValueError(f"piecewise_constant needs 1-d boundaries and values, got shapes {boundaries.shape} and "
                         f"{values.shape}; pass two sequences of numbers.")
    if boundaries.shape[0] != values.shape[0] - 1:
        raise ValueError(f"piecewise_constant got {boundaries.shape[0]} boundaries for {values.shape[0]} values; "
                         "pass one value more than boundaries.")

    def schedule(i: Step) -> Any:
        return values[jnp.sum(i > boundaries)]
    return schedule


def make_schedule(scalar_or_schedule: float | Schedule) -> Schedule:
    """A schedule as it is, or a scalar as the constant schedule."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(f"A step size must be a scalar or a schedule (a function of the step), not a value of shape "
                    f"{jnp.shape(scalar_or_schedule)}; pass a number or a callable.")


# ---- gradient utilities and state (de)serialization --------------------------------------------------------------


def l2_norm(tree: Any) -> Any:
    """The Euclidean norm of all the leaves of `tree` together."""
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in tree_util.tree_leaves(tree)))


def clip_grads(grad_tree: Any, max_norm: Any) -> Any:
    """`grad_tree` scaled down, if its l2_norm exceeds `max_norm`, to norm `max_norm`."""
    norm = l2_norm(grad_tree)
    return tree_util.tree_map(lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)), grad_tree)


class JoinPoint:
    """A leaf of an unpacked optimizer state holding one parameter's own state tree (`subtree`)."""

    __slots__ = ("subtree",)

    def __init__(self, subtree: Any) -> None:
        self.subtree = subtree

    def __iter__(self) -> Any:
        yield self.subtree

    def __repr__(self) -> str:
        return f"JoinPoint({self.subtree!r})"


def unpack_optimizer_state(opt_state: OptimizerState) -> Any:
    """The state as the parameters' pytree with a `JoinPoint` (holding that parameter's state) at each leaf,
    a form made of ordinary containers, for saving."""
    packed, tree_def, subtree_defs = opt_state
    return tree_util.tree_unflatten(tree_def, [JoinPoint(s) for s in _unflatten_each(subtree_defs, packed)])


def pack_optimizer_state(marked_pytree: Any) -> OptimizerState:
    """The inverse of `unpack_optimizer_state`."""
    points, tree_def = tree_util.tree_flatten(marked_pytree)
    for point in points:
        if not isinstance(point, JoinPoint):
            raise TypeError(f"pack_optimizer_state found the leaf {point!r} where a JoinPoint was expected; pass "
                            "what unpack_optimizer_state returned.")
    packed, subtree_defs = _flatten_each([point.subtree for point in points])
    return OptimizerState(packed, tree_def, subtree_defs)
