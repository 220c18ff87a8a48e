"""jax.lax's `*_p` names. Most are meshax's own primitives, so code inspecting jaxpr equations (`eqn.primitive is
lax.add_p`) finds them: elementwise, cumulative, arg-reductions, transpose, special functions and the newer ones of
lax_more_*.py take JAX's operands and parameters; the structural ones of `_structural` take meshax's own parameters
and raise on JAX's (where the two sets differ). The others are `JaxParamsPrimitive`s (jax_primitives*.py): binding
them with JAX's parameters calls meshax's lax functions (operations meshax composes, and round/conj/fft/rem/
shift_right_arithmetic, whose meshax primitives would misread JAX's parameters or operands)."""
from __future__ import annotations

from typing import Any

from ..arrays.placement import sharding_constraint
from ..primitives import array_primitives as P
from ..primitives.random_bits import erf_inv_p
from . import control_flow, parallel, special
from .jax_primitives import jax_primitives
from .lax_more_elementwise import igamma_grad_a_p, one_minus_square_p, polynomial_p, random_gamma_grad_p
from .lax_more_random import rng_bit_generator_p, rng_uniform_p
from .lax_more_solves import linear_solve_p

_RENAMED = {"isfinite": "is_finite", "not": "not", "shift_left": "shift_left"}
_SKIPPED = {"round", "conj", "trunc", "isnan", "isinf", "signbit", "log2", "log10", "floor_divide", "fmod", "hypot",
            "copysign", "logaddexp", "shift_right"}


def primitive_names(jax_names: frozenset) -> dict[str, Any]:
    """JAX's name -> meshax's primitive, for the names JAX's lax has."""
    table: dict[str, Any] = {}
    for name, primitive in {**P.UNARY, **P.BINARY, **P.CUMULATIVE}.items():
        if name not in _SKIPPED:
            table[f"{_RENAMED.get(name, name)}_p"] = primitive
    table.update({"argmax_p": P.argmax, "argmin_p": P.argmin, "transpose_p": P.transpose, "erf_inv_p": erf_inv_p,
                  "erfc_p": special.erfc_p, "lgamma_p": special.lgamma_p, "digamma_p": special.digamma_p,
                  "polygamma_p": special.polygamma_p, "igamma_p": special.igamma_p, "igammac_p": special.igammac_p,
                  "zeta_p": special.zeta_p, "bessel_i0e_p": special.bessel_i0e_p,
                  "bessel_i1e_p": special.bessel_i1e_p, "population_count_p": special.population_count_p,
                  "clz_p": special.clz_p, "reduce_precision_p": special.reduce_precision_p,
                  "regularized_incomplete_beta_p": special.betainc_p, "mulhi_p": special.mulhi_p,
                  "bitcast_convert_type_p": special.bitcast_convert_type_p})
    table.update({"igamma_grad_a_p": igamma_grad_a_p, "one_minus_square_p": one_minus_square_p,
                  "polynomial_p": polynomial_p, "random_gamma_grad_p": random_gamma_grad_p,
                  "rng_bit_generator_p": rng_bit_generator_p, "linear_solve_p": linear_solve_p,
                  "log2_p": P.UNARY["log2"]})
    table.update(_structural())
    table.update(jax_primitives())
    return {name: primitive for name, primitive in table.items() if name in jax_names}


def _structural() -> dict[str, Any]:
    """JAX's name -> meshax's primitive of the same operation whose parameters are meshax's own (the README's
    table "jax.lax primitives" lists the differences)."""
    table = {f"reduce_{kind}_p": P.REDUCE[kind] for kind in ("sum", "prod", "max", "min", "and", "or")}
    table.update({"broadcast_in_dim_p": P.broadcast_in_dim, "concatenate_p": P.concatenate,
                  "convert_element_type_p": P.convert_element_type, "dot_general_p": P.dot_general,
                  "iota_p": P.iota, "reshape_p": P.reshape, "slice_p": P.static_slice, "sort_p": P.sort,
                  "gather_p": P.gather, "scatter_p": P.scatter, "rev_p": P.flip,
                  "cond_p": control_flow.cond_p, "scan_p": control_flow.scan_p,
                  "while_p": control_flow.while_p, "all_gather_p": parallel.all_gather_p,
                  "axis_index_p": parallel.axis_index_p, "ppermute_p": parallel.ppermute_p,
                  "sharding_constraint_p": sharding_constraint, "rng_uniform_p": rng_uniform_p})
    return table
