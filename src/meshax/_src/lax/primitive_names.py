"""jax.lax's `*_p` names for meshax primitives that take the same operands and parameters as JAX's (elementwise,
cumulative, arg-reductions, transpose, special functions), so code that inspects jaxpr equations (`eqn.primitive is
lax.add_p`) or binds them works. Primitives whose parameters differ from JAX's are not exported under its names."""
from __future__ import annotations

from typing import Any

from ..primitives import array_primitives as P
from ..primitives.random_bits import erf_inv_p
from . import special

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
    return {name: primitive for name, primitive in table.items() if name in jax_names}
