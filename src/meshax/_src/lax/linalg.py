"""Linear-algebra primitives (the level of jax.lax.linalg), computed by NumPy on whole matrices.

Each primitive works on the trailing matrix dimensions of its operands; leading dimensions
are a batch that all operands share (meshax.numpy.linalg broadcasts them first). Under a
mesh the batch dimensions keep their split and the matrix dimensions are gathered whole on
each device (`batch_split`). Derivatives follow the usual matrix-calculus identities; the
tangent maps are written with other primitives (matmul, solves) so that they transpose.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..runtime import compute_pool as device_pool
from ..sharding import placement_rules as rules
from ..core.core import ShapedArray, aval_of, define_primitive
from ..interpreters.ad import Zero, instantiate, is_undefined, jvp_rules, tangent_aval, transpose_rules
from ..interpreters.batching import batching_rules
from ..primitives.batch_dims import move_to_front
from ..core.dtypes import issubdtype

# ---- shared machinery ------------------------------------------------------------------------------------------


def batch_split(core_ndim: int | Callable[..., int]):
    """A sharding rule for ops on the trailing `core_ndim` dimensions of the first operand: the leading batch
    dimensions keep the split the operands agree on, the core dimensions are whole on each device."""

    def rule(specs: Sequence[rules.Spec], avals: Sequence[ShapedArray], *, out_ndims: Sequence[int] = (),
             **params: Any) -> rules.Layout:
        core = core_ndim(**params) if callable(core_ndim) else core_ndim
        nbatch = max(avals[0].ndim - core, 0)
        batch = rules.agreed_spec([tuple(s[:nbatch]) for s in specs]) if nbatch else ()
        ins = [tuple(batch) + rules.replicated(a.ndim - nbatch) for a in avals]
        outs = [tuple(batch) + rules.replicated(n - nbatch) for n in out_ndims]
        return rules.Layout(ins, outs)

    return rule


def _batched(primitive: Any):
    """vmap: every operand gets the batch dimension first (broadcast where it has none); so do the outputs."""

    def rule(values: list[Any], dims: list[Any], **params: Any) -> tuple[Any, Any]:
        size = next(aval_of(v).shape[d] for v, d in zip(values, dims) if d is not None)
        out = primitive.bind(*[move_to_front(v, d, size) for v, d in zip(values, dims)], **params)
        return out, ([0] * len(out) if primitive.multiple_results else 0)

    batching_rules[primitive] = rule
    return primitive


def _define(name: str, impl: Callable[..., Any], aval: Callable[..., Any], core: Any = 2,
            multiple_results: bool = False) -> Any:
    def within_budget(*args: Any, **params: Any) -> Any:
        device_pool.hold_budget()  # LAPACK's BLAS threads: this controller's share of the cores
        return impl(*args, **params)

    return _batched(define_primitive(name, within_budget, aval, batch_split(core), multiple_results,
                                     parallel_devices=True))


def _real_dtype(dtype: np.dtype) -> np.dtype:
    return np.empty((), dtype).real.dtype


def _finite_or_nan(function: Callable[[np.ndarray], Any], a: np.ndarray, n_out: int) -> Any:
    """`function` over the batch, with NaN results for the matrices where LAPACK reports failure (as JAX)."""
    try:
        return function(a)
    except np.linalg.LinAlgError:
        flat = a.reshape((-1,) + a.shape[-2:])
        results = []
        for m in flat:
            try:
                results.append(function(m))
            except np.linalg.LinAlgError:
                out = function(np.eye(m.shape[-1], dtype=m.dtype))
                results.append(tuple(np.full_like(o, np.nan) for o in out) if n_out > 1 else np.full_like(out, np.nan))
        if n_out > 1:
            return tuple(np.stack([r[i] for r in results]).reshape(a.shape[:-2] + results[0][i].shape)
                         for i in range(n_out))
        return np.stack(results).reshape(a.shape[:-2] + results[0].shape)


def _jnp() -> Any:
    from .. import numpy as jnp

    return jnp


def _mT(x: Any) -> Any:
    return _jnp().swapaxes(x, -1, -2)


def _H(x: Any) -> Any:
    jnp = _jnp()
    return jnp.conj(_mT(x)) if issubdtype(aval_of(x).dtype, np.complexfloating) else _mT(x)


def _mm(a: Any, b: Any) -> Any:
    return _jnp().matmul(a, b)


def _trace(x: Any) -> Any:
    return _jnp().trace(x, axis1=-2, axis2=-1)


def _diag(x: Any) -> Any:
    return _jnp().diagonal(x, axis1=-2, axis2=-1)


def _eye_like(x: Any) -> Any:
    n = aval_of(x).shape[-1]
    return _jnp().eye(n, dtype=aval_of(x).dtype)


def _cast(x: Any, dtype: Any) -> Any:
    return _jnp().astype(x, dtype)


def _zero_tangent(ans: Any) -> Zero:
    return Zero(tangent_aval(aval_of(ans)))


# ---- triangular solve ------------------------------------------------------------------------------------------


def _op(a: np.ndarray, transpose_a: bool, conjugate_a: bool) -> np.ndarray:
    if conjugate_a:
        a = np.conj(a)
    return np.swapaxes(a, -1, -2) if transpose_a else a


def _triangle(a: np.ndarray, lower: bool, unit_diagonal: bool) -> np.ndarray:
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        t = t - np.tril(np.triu(t)) + np.eye(a.shape[-1], dtype=a.dtype)
    return t


def _triangular_solve_impl(a: np.ndarray, b: np.ndarray, *, left_side: bool, lower: bool, transpose_a: bool,
                           conjugate_a: bool, unit_diagonal: bool) -> np.ndarray:
    t = _op(_triangle(a, lower, unit_diagonal), transpose_a, conjugate_a)
    if left_side:
        x = np.linalg.solve(t, b)
    else:  # x t = b  <=>  t^T x^T = b^T
        x = np.swapaxes(np.linalg.solve(np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    return x.astype(b.dtype, copy=False)


triangular_solve_p = _define("triangular_solve", _triangular_solve_impl, lambda a, b, **_: b)


def triangular_solve(a: Any, b: Any, *, left_side: bool = False, lower: bool = False, transpose_a: bool = False,
                     conjugate_a: bool = False, unit_diagonal: bool = False) -> Any:
    """Solves op(a) x = b (left_side) or x op(a) = b for triangular `a` (as jax.lax.linalg.triangular_solve)."""
    return triangular_solve_p.bind(a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
                                   conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)


def _triangular_solve_jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[Any, Any]:
    jnp = _jnp()
    a, b = primals
    da, db = tangents
    x = triangular_solve_p.bind(a, b, **params)
    out = _zero_tangent(x) if isinstance(db, Zero) else triangular_solve_p.bind(a, db, **params)
    if not isinstance(da, Zero):
        t = jnp.tril(da) if params["lower"] else jnp.triu(da)
        if params["unit_diagonal"]:
            t = t * (1 - _eye_like(da))
        if params["conjugate_a"]:
            t = jnp.conj(t)
        if params["transpose_a"]:
            t = _mT(t)
        rhs = _mm(t, x) if params["left_side"] else _mm(x, t)
        term = triangular_solve_p.bind(a, -rhs, **params)
        out = term if isinstance(out, Zero) else out + term
    return x, out


def _triangular_solve_transpose(ct: Any, a: Any, b: Any, **params: Any) -> list[Any]:
    assert not is_undefined(a), "triangular_solve is linear in b only"
    if isinstance(ct, Zero):
        return [None, None]
    return [None, triangular_solve_p.bind(a, ct, **{**params, "transpose_a": not params["transpose_a"]})]


jvp_rules[triangular_solve_p] = _triangular_solve_jvp
transpose_rules[triangular_solve_p] = _triangular_solve_transpose

# ---- general solve -----------------------------------------------------------------------------------------------


def _solve_impl(a: np.ndarray, b: np.ndarray, *, transpose_a: bool = False) -> np.ndarray:
    a = np.swapaxes(a, -1, -2) if transpose_a else a
    try:
        return np.linalg.solve(a, b).astype(b.dtype, copy=False)
    except np.linalg.LinAlgError:  # NaNs for the singular matrices of the batch, as JAX
        out = np.empty(b.shape, b.dtype)
        for index in np.ndindex(*a.shape[:-2]):
            try:
                out[index] = np.linalg.solve(a[index], b[index])
            except np.linalg.LinAlgError:
                out[index] = np.nan
        return out


solve_p = _define("solve", _solve_impl, lambda a, b, **_: b)


def _solve_jvp(primals: list[Any], tangents: list[Any], *, transpose_a: bool = False) -> tuple[Any, Any]:
    a, b = primals
    da, db = tangents
    x = solve_p.bind(a, b, transpose_a=transpose_a)
    out = _zero_tangent(x) if isinstance(db, Zero) else solve_p.bind(a, db, transpose_a=transpose_a)
    if not isinstance(da, Zero):
        term = solve_p.bind(a, -_mm(_mT(da) if transpose_a else da, x), transpose_a=transpose_a)
        out = term if isinstance(out, Zero) else out + term
    return x, out


def _solve_transpose(ct: Any, a: Any, b: Any, *, transpose_a: bool = False) -> list[Any]:
    assert not is_undefined(a), "solve is linear in b only"
    return [None, None if isinstance(ct, Zero) else solve_p.bind(a, ct, transpose_a=not transpose_a)]


jvp_rules[solve_p] = _solve_jvp
transpose_rules[solve_p] = _solve_transpose

# ---- cholesky ------------------------------------------------------------------------------------------------------


def _cholesky_impl(a: np.ndarray) -> np.ndarray:
    return np.tril(_finite_or_nan(np.linalg.cholesky, a, 1)).astype(a.dtype, copy=False)  # NaNs below, as JAX


cholesky_p = _define("cholesky", _cholesky_impl, lambda a: a)


def _cholesky_jvp(primals: list[Any], tangents: list[Any]) -> tuple[Any, Any]:
    """dL = L phi(L^-1 dA L^-H), phi taking the lower triangle with its diagonal halved."""
    jnp = _jnp()
    (a,), (da,) = primals, tangents
    l = cholesky_p.bind(a)
    left = triangular_solve(l, instantiate(da), left_side=True, lower=True)
    middle = triangular_solve(l, left, left_side=False, lower=True, transpose_a=True,
                              conjugate_a=issubdtype(aval_of(a).dtype, np.complexfloating))
    phi = jnp.tril(middle) - 0.5 * middle * _eye_like(middle)
    return l, _mm(l, phi)


jvp_rules[cholesky_p] = _cholesky_jvp

# ---- determinants ------------------------------------------------------------------------------------------------


def _det_aval(a: ShapedArray) -> ShapedArray:
    return ShapedArray(a.shape[:-2], a.dtype)


det_p = _define("det", lambda a: np.asarray(np.linalg.det(a)).astype(a.dtype), _det_aval)


def _det_jvp(primals: list[Any], tangents: list[Any]) -> tuple[Any, Any]:
    (a,), (da,) = primals, tangents
    ans = det_p.bind(a)
    return ans, ans * _trace(solve_p.bind(a, instantiate(da)))


jvp_rules[det_p] = _det_jvp


def _slogdet_impl(a: np.ndarray) -> list[np.ndarray]:
    sign, logabs = np.linalg.slogdet(a)
    return [np.asarray(sign).astype(a.dtype), np.asarray(logabs).astype(_real_dtype(a.dtype))]


slogdet_p = _define("slogdet", _slogdet_impl, lambda a: [
    ShapedArray(a.shape[:-2], a.dtype), ShapedArray(a.shape[:-2], _real_dtype(a.dtype))], multiple_results=True)


def _slogdet_jvp(primals: list[Any], tangents: list[Any]) -> tuple[Any, Any]:
    jnp = _jnp()
    (a,), (da,) = primals, tangents
    sign, logabs = slogdet_p.bind(a)
    tr = _trace(solve_p.bind(a, instantiate(da)))
    if issubdtype(aval_of(a).dtype, np.complexfloating):
        return [sign, logabs], [sign * _cast(1j * jnp.imag(tr), aval_of(a).dtype), jnp.real(tr)]
    return [sign, logabs], [_zero_tangent(sign), tr]


jvp_rules[slogdet_p] = _slogdet_jvp

# ---- eigendecompositions ----------------------------------------------------------------------------------------


def _eigh_impl(a: np.ndarray, *, lower: bool = True) -> list[np.ndarray]:
    w, v = np.linalg.eigh(a, UPLO="L" if lower else "U")
    return [v.astype(a.dtype, copy=False), w.astype(_real_dtype(a.dtype), copy=False)]


eigh_p = _define("eigh", _eigh_impl, lambda a, **_: [a, ShapedArray(a.shape[:-1], _real_dtype(a.dtype))],
                 multiple_results=True)


def _eigh_jvp(primals: list[Any], tangents: list[Any], *, lower: bool = True) -> tuple[Any, Any]:
    """dw = diag(V^H dA V); dV = V (F o V^H dA V), F_ij = 1 / (w_j - w_i) off the diagonal."""
    jnp = _jnp()
    (a,), (da,) = primals, tangents
    v, w = eigh_p.bind(a, lower=lower)
    vdv = _mm(_H(v), _mm(instantiate(da), v))
    gaps = w[..., None, :] - w[..., :, None]
    eye = _eye_like(gaps)
    f = (1 - eye) / (gaps + eye)
    dv = _mm(v, vdv * _cast(f, aval_of(v).dtype))
    return [v, w], [dv, jnp.real(_diag(vdv))]


jvp_rules[eigh_p] = _eigh_jvp


def _eig_impl(a: np.ndarray, *, compute_vectors: bool = True) -> list[np.ndarray]:
    complex_dtype = np.result_type(a.dtype, np.complex64)
    w, v = _finite_or_nan(np.linalg.eig, a, 2)  # NaNs for matrices with infinities or NaNs, as JAX
    out = [_complex_nans(w.astype(complex_dtype))]
    return out + [_complex_nans(v.astype(complex_dtype))] if compute_vectors else out


def _complex_nans(values: np.ndarray) -> np.ndarray:
    """`values` with each NaN entry NaN in both parts (a failed real decomposition's NaNs have zero imaginary parts)."""
    lost = np.isnan(values)
    return np.where(lost, complex(np.nan, np.nan), values).astype(values.dtype) if lost.any() else values


def _eig_aval(a: ShapedArray, *, compute_vectors: bool = True) -> list[ShapedArray]:
    complex_dtype = np.result_type(a.dtype, np.complex64)
    out = [ShapedArray(a.shape[:-1], complex_dtype)]
    return out + [ShapedArray(a.shape, complex_dtype)] if compute_vectors else out


eig_p = _define("eig", _eig_impl, _eig_aval, multiple_results=True)


def _eig_jvp(primals: list[Any], tangents: list[Any], *, compute_vectors: bool = True) -> tuple[Any, Any]:
    """Eigenvalues only: dw_i = (V^-1 dA V)_ii."""
    if compute_vectors:
        raise NotImplementedError("The derivative of eig's eigenvectors is not implemented; use eigvals or eigh.")
    (a,), (da,) = primals, tangents
    w, v = eig_p.bind(a, compute_vectors=True)
    dtype = aval_of(w).dtype
    da = _cast(instantiate(da), dtype)
    return [w], [_diag(solve_p.bind(v, _mm(da, v)))]


jvp_rules[eig_p] = _eig_jvp

# ---- singular value and QR decompositions -------------------------------------------------------------------


def _svd_impl(a: np.ndarray, *, full_matrices: bool, compute_uv: bool) -> list[np.ndarray]:
    real = _real_dtype(a.dtype)
    if not compute_uv:
        return [np.linalg.svd(a, compute_uv=False).astype(real, copy=False)]
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return [s.astype(real, copy=False), u.astype(a.dtype, copy=False), vh.astype(a.dtype, copy=False)]


def _svd_aval(a: ShapedArray, *, full_matrices: bool, compute_uv: bool) -> list[ShapedArray]:
    *batch, m, n = a.shape
    k = min(m, n)
    s = ShapedArray(tuple(batch) + (k,), _real_dtype(a.dtype))
    if not compute_uv:
        return [s]
    um, vn = (m, n) if full_matrices else (k, k)
    return [s, ShapedArray(tuple(batch) + (m, um), a.dtype), ShapedArray(tuple(batch) + (vn, n), a.dtype)]


svd_p = _define("svd", _svd_impl, _svd_aval, multiple_results=True)


def _svd_jvp(primals: list[Any], tangents: list[Any], *, full_matrices: bool, compute_uv: bool
             ) -> tuple[Any, Any]:
    """ds = Re diag(U^H dA V); for the vectors (reduced, real) the standard formulas with
    F_ij = 1 / (s_j^2 - s_i^2) off the diagonal."""
    jnp = _jnp()
    (a,), (da,) = primals, tangents
    m, n = aval_of(a).shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError("Singular value decomposition JVP not implemented for full matrices")
    s, u, vh = svd_p.bind(a, full_matrices=False, compute_uv=True)
    da = instantiate(da)
    dtype = aval_of(a).dtype
    v = _H(vh)
    dp = _mm(_H(u), _mm(da, v))
    ds = jnp.real(_diag(dp))
    if not compute_uv:
        return [s], [ds]
    s_c = _cast(s, dtype)
    s_sq = s[..., None, :] ** 2 - s[..., :, None] ** 2
    eye = _eye_like(s_sq)
    f = _cast((1 - eye) / (s_sq + eye), dtype)
    dp_s = dp * s_c[..., None, :]
    s_dp = s_c[..., :, None] * dp
    du = _mm(u, f * (dp_s + _H(dp_s)))
    dv = _mm(v, f * (s_dp + _H(s_dp)))
    if issubdtype(dtype, np.complexfloating):  # the phase freedom, fixed as JAX does
        du = du + _mm(u, _cast(1j * jnp.imag(_diag(dp)) / (2 * s_c), dtype)[..., None, :] * _eye_like(dp))
    if m > n:
        du = du + (_mm(da, v) - _mm(u, _mm(_H(u), _mm(da, v)))) / s_c[..., None, :]
    if n > m:
        dah_u = _mm(_H(da), u)
        dv = dv + (dah_u - _mm(v, _mm(vh, dah_u))) / s_c[..., None, :]
    return [s, u, vh], [ds, du, _H(dv)]


jvp_rules[svd_p] = _svd_jvp


def _qr_impl(a: np.ndarray, *, full_matrices: bool) -> list[np.ndarray]:
    q, r = np.linalg.qr(a, mode="complete" if full_matrices else "reduced")
    return [q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)]


def _qr_aval(a: ShapedArray, *, full_matrices: bool) -> list[ShapedArray]:
    *batch, m, n = a.shape
    k = m if full_matrices else min(m, n)
    return [ShapedArray(tuple(batch) + (m, k), a.dtype), ShapedArray(tuple(batch) + (k, n), a.dtype)]


qr_p = _define("qr", _qr_impl, _qr_aval, multiple_results=True)


def _qr_jvp(primals: list[Any], tangents: list[Any], *, full_matrices: bool) -> tuple[Any, Any]:
    """With C = Q^H dA R^-1 and the skew part S = tril(C, -1) - tril(C, -1)^H (plus C's imaginary diagonal):
    dQ = Q (S - C) + dA R^-1 and dR = (C - S) R."""
    jnp = _jnp()
    (a,), (da,) = primals, tangents
    m, n = aval_of(a).shape[-2:]
    if m < n or (full_matrices and m != n):
        raise NotImplementedError("Unimplemented case of QR decomposition derivative")
    q, r = qr_p.bind(a, full_matrices=full_matrices)
    dx_rinv = triangular_solve(r, instantiate(da), left_side=False, lower=False)
    c = _mm(_H(q), dx_rinv)
    low = jnp.tril(c, -1)
    skew = low - _H(low)
    if issubdtype(aval_of(a).dtype, np.complexfloating):
        skew = skew + _eye_like(c) * (c - jnp.real(c))
    return [q, r], [_mm(q, skew - c) + dx_rinv, _mm(c - skew, r)]


jvp_rules[qr_p] = _qr_jvp

__all__ = ["triangular_solve", "triangular_solve_p", "solve_p", "cholesky_p", "det_p", "slogdet_p", "eigh_p",
           "eig_p", "svd_p", "qr_p", "batch_split"]
