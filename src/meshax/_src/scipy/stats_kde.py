"""Gaussian kernel density estimation (jax.scipy.stats.gaussian_kde): a pytree holding the data, its weights and
the kernel's covariance, with SciPy's methods (evaluate, logpdf, integrate_*, resample)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .. import numpy as jnp
from .. import random
from ..lax.linalg import triangular_solve
from ..nn.functions import logsumexp
from ..numpy import linalg
from ..tree.registry import register_pytree_node_class
from .stats_common import ndtr

_FIELDS = ("neff", "dataset", "weights", "covariance", "inv_cov")


def _is_arraylike(x: Any) -> bool:
    return hasattr(x, "dtype") or isinstance(x, (bool, int, float, complex, np.generic))


def _require_arraylike(name: str, *args: Any) -> None:
    for arg in args:
        if not _is_arraylike(arg):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(arg).__name__}; wrap it with "
                            f"jnp.asarray.")


def _bandwidth_factor(kde: "gaussian_kde", bw_method: Any, d: int) -> Any:
    """The factor the data covariance is scaled by: Scott's or Silverman's rule, a scalar, or bw_method(kde)."""
    if bw_method is None or (isinstance(bw_method, str) and bw_method == "scott"):
        return jnp.power(kde.neff, -1.0 / (d + 4))
    if isinstance(bw_method, str) and bw_method == "silverman":
        return jnp.power(kde.neff * (d + 2) / 4.0, -1.0 / (d + 4))
    if jnp.isscalar(bw_method) and not isinstance(bw_method, str):
        return bw_method
    if callable(bw_method):
        return bw_method(kde)
    raise ValueError("`bw_method` should be 'scott', 'silverman', a scalar, or a callable.")


def _weighted_covariance(data: Any, weights: Any) -> Any:
    """The unbiased covariance of the rows of `data` (d x n) with reliability weights (numpy.cov's aweights)."""
    total = jnp.sum(weights)
    centered = data - jnp.sum(data * weights, axis=1, keepdims=True) / total
    correction = total - jnp.sum(weights * weights) / total
    return jnp.atleast_2d(jnp.dot(centered * weights, centered.T) / correction)


def _cholesky_solve(lower: Any, b: Any) -> Any:
    """(L L^T)^-1 b for the lower Cholesky factor L."""
    y = triangular_solve(lower, b, left_side=True, lower=True)
    return triangular_solve(lower, y, left_side=True, lower=True, transpose_a=True)


@register_pytree_node_class
@dataclass(frozen=True, init=False, slots=True)
class gaussian_kde:  # noqa: N801 - SciPy's and JAX's name
    """A Gaussian kernel density estimate of `dataset` (d dimensions x n points), optionally weighted."""
    neff: Any
    dataset: Any
    weights: Any
    covariance: Any
    inv_cov: Any

    def __init__(self, dataset: Any, bw_method: None | str | Any | Callable[[Any], Any] = None,
                 weights: Any = None) -> None:
        _require_arraylike("gaussian_kde", dataset)
        dataset = jnp.atleast_2d(dataset)
        if np.issubdtype(dataset.dtype, np.complexfloating):
            raise NotImplementedError("gaussian_kde does not support complex data")
        if not dataset.size > 1:
            raise ValueError("`dataset` input should have multiple elements.")
        d, n = dataset.shape
        if weights is None:
            (dataset,) = jnp._promote_inexact(dataset)
            weights = jnp.full(n, 1.0 / n, dtype=dataset.dtype)
        else:
            _require_arraylike("gaussian_kde", weights)
            dataset, weights = jnp._promote_inexact(dataset, weights)
            weights = jnp.atleast_1d(weights)
            weights = weights / jnp.sum(weights)
            if weights.ndim != 1:
                raise ValueError("`weights` input should be one-dimensional.")
            if len(weights) != n:
                raise ValueError("`weights` input should be of length n")
        self._setattr("dataset", jnp.asarray(dataset))
        self._setattr("weights", weights)
        self._setattr("neff", 1 / jnp.sum(weights ** 2))
        factor = _bandwidth_factor(self, bw_method, d)
        data_covariance = _weighted_covariance(dataset, weights)
        self._setattr("covariance", data_covariance * factor ** 2)
        self._setattr("inv_cov", linalg.inv(data_covariance) / factor ** 2)

    def _setattr(self, name: str, value: Any) -> Any:
        object.__setattr__(self, name, value)
        return value

    def tree_flatten(self) -> tuple[tuple[Any, ...], None]:
        return tuple(getattr(self, name) for name in _FIELDS), None

    @classmethod
    def tree_unflatten(cls, aux_data: Any, children: Any) -> "gaussian_kde":
        del aux_data
        kde = cls.__new__(cls)
        for name, value in zip(_FIELDS, children):
            kde._setattr(name, value)
        return kde

    @property
    def d(self) -> int:
        return self.dataset.shape[0]

    @property
    def n(self) -> int:
        return self.dataset.shape[1]

    def evaluate(self, points: Any) -> Any:
        """The estimated density at each column of `points` (d x m)."""
        _require_arraylike("evaluate", points)
        return _kernel_sums(False, self.dataset.T, self.weights, self._reshape_points(points).T, self.inv_cov)

    def __call__(self, points: Any) -> Any:
        return self.evaluate(points)

    def pdf(self, x: Any) -> Any:
        return self.evaluate(x)

    def logpdf(self, x: Any) -> Any:
        """The log of the estimated density at each column of `x`."""
        _require_arraylike("logpdf", x)
        return _kernel_sums(True, self.dataset.T, self.weights, self._reshape_points(x).T, self.inv_cov)

    def integrate_gaussian(self, mean: Any, cov: Any) -> Any:
        """The integral of the estimate times the Gaussian N(mean, cov)."""
        mean = jnp.atleast_1d(jnp.squeeze(mean))
        cov = jnp.atleast_2d(cov)
        if mean.shape != (self.d,):
            raise ValueError(f"mean does not have dimension {self.d}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"covariance does not have dimension {self.d}")
        lower, norm = self._convolution(cov)
        return _convolve(lower, norm, self.dataset, self.weights, mean)

    def integrate_box_1d(self, low: Any, high: Any) -> Any:
        """The estimate's mass between the scalars low and high (one-dimensional data only)."""
        if self.d != 1:
            raise ValueError("integrate_box_1d() only handles 1D pdfs")
        if np.ndim(low) != 0 or np.ndim(high) != 0:
            raise ValueError("the limits of integration in integrate_box_1d must be scalars")
        sigma = jnp.squeeze(jnp.sqrt(self.covariance))
        low = jnp.squeeze((low - self.dataset) / sigma)
        high = jnp.squeeze((high - self.dataset) / sigma)
        return jnp.sum(self.weights * (ndtr(high) - ndtr(low)))

    def integrate_kde(self, other: "gaussian_kde") -> Any:
        """The integral of the product of this estimate and `other`."""
        if other.d != self.d:
            raise ValueError("KDEs are not the same dimensionality")
        lower, norm = self._convolution(other.covariance)
        small, large = (self, other) if self.n < other.n else (other, self)
        diffs = large.dataset[None, :, :] - small.dataset.T[:, :, None]
        per_point = _convolve_many(lower, norm, diffs, large.weights)
        return jnp.sum(per_point * small.weights)

    def resample(self, key: Any, shape: tuple[int, ...] = ()) -> Any:
        """`shape` draws from the estimate: data points picked by weight plus kernel noise; (d, *shape)."""
        index_key, noise_key = random.split(key)
        index = random.choice(index_key, self.n, shape=shape, p=self.weights)
        noise = random.multivariate_normal(noise_key, jnp.zeros(self.d, self.covariance.dtype), self.covariance,
                                           shape=shape, dtype=self.dataset.dtype).T
        return self.dataset[:, index] + noise

    def integrate_box(self, low_bounds: Any, high_bounds: Any, maxpts: Any = None) -> Any:
        del low_bounds, high_bounds, maxpts
        raise NotImplementedError("only 1D box integrations are supported; use `integrate_box_1d`")

    def set_bandwidth(self, bw_method: Any = None) -> Any:
        del bw_method
        raise NotImplementedError("dynamically changing the bandwidth method is not supported")

    def _convolution(self, cov: Any) -> tuple[Any, Any]:
        """The lower Cholesky factor of covariance + cov and the Gaussian normalizer 1 / sqrt(det(2 pi (.)))."""
        lower = linalg.cholesky(self.covariance + cov)
        norm = 1.0 / (math.sqrt(2 * math.pi) ** self.d * jnp.prod(jnp.diagonal(lower)))
        return lower, norm

    def _reshape_points(self, points: Any) -> Any:
        """Points as a d x m matrix (a single point may come as a row of d values)."""
        points = jnp.atleast_2d(points)
        if np.issubdtype(points.dtype, np.complexfloating):
            raise NotImplementedError("gaussian_kde does not support complex coordinates")
        d, m = points.shape
        if d != self.d:
            if d == 1 and m == self.d:
                return jnp.reshape(points, (self.d, 1))
            raise ValueError(f"points have dimension {d}, dataset has dimension {self.d}")
        return points


def _convolve(lower: Any, norm: Any, target: Any, weights: Any, mean: Any) -> Any:
    """norm * sum_j w_j exp(-(t_j - mean)^T S^-1 (t_j - mean) / 2) with S = lower lower^T."""
    diff = target - mean[:, None]
    arg = 0.5 * jnp.sum(diff * _cholesky_solve(lower, diff), axis=0)
    return norm * jnp.sum(jnp.exp(-arg) * weights)


def _convolve_many(lower: Any, norm: Any, diffs: Any, weights: Any) -> Any:
    """_convolve for many means at once: diffs[i] = target - mean_i (m x d x n)."""
    m, d, n = diffs.shape
    columns = jnp.reshape(jnp.moveaxis(diffs, 0, 1), (d, m * n))
    solved = jnp.moveaxis(jnp.reshape(_cholesky_solve(lower, columns), (d, m, n)), 0, 1)
    arg = 0.5 * jnp.sum(diffs * solved, axis=1)
    return norm * jnp.sum(jnp.exp(-arg) * weights, axis=1)


def _kernel_sums(in_log: bool, points: Any, weights: Any, xi: Any, precision: Any) -> Any:
    """sum_j w_j N(xi_i; points_j, precision^-1) for each row xi_i (its log with `in_log`)."""
    points, weights, xi, precision = jnp._promote_inexact(points, weights, xi, precision)
    d = points.shape[1]
    if xi.shape[1] != d:
        raise ValueError("points and xi must have same trailing dim")
    if precision.shape != (d, d):
        raise ValueError("precision matrix must match data dims")
    whitening = linalg.cholesky(precision)
    points, xi = jnp.dot(points, whitening), jnp.dot(xi, whitening)
    log_norm = jnp.sum(jnp.log(jnp.diagonal(whitening))) - 0.5 * d * math.log(2 * math.pi)
    distances = jnp.sum(jnp.square(points[None, :, :] - xi[:, None, :]), axis=-1)
    arg = log_norm - 0.5 * distances
    if in_log:
        return logsumexp(jnp.log(weights)[None, :] + arg, axis=1)
    return jnp.sum(weights[None, :] * jnp.exp(arg), axis=1)
