"""Dimension reduction and Gaussian-mixture clustering of node embeddings, as in RAPTOR.

RAPTOR's recipe: reduce the embeddings (UMAP, ``n_neighbors = sqrt(n - 1)``, to ``min(dim, n - 2)``
dimensions), fit Gaussian mixtures of 1 .. min(max_clusters, n) - 1 components and keep the one with
the lowest BIC, give each node to every component whose posterior exceeds a threshold (soft
membership: a node may join several clusters), then cluster each global cluster again locally.
UMAP (``umap-learn``) is the default, as RAPTOR reduces; ``reducer: pca`` (scikit-learn) is the named
alternative, and ``auto`` takes UMAP when it is importable. Under a fixed seed UMAP runs single-threaded and
gives the same embedding every time.

Small inputs are guarded: two or fewer nodes form one cluster without any fitting; the reduced
dimension never drops below 1 or reaches the sample count; mixtures never have more components than
samples; a fit that fails on an ill-defined (singular) covariance is retried with a larger
``reg_covar``. Every node also joins its most probable component, so no node falls out of the tree
(RAPTOR drops a node whose posteriors all sit below the threshold, possible past 1/threshold
components).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import warnings
from dataclasses import asdict, dataclass

import numpy as np
from sklearn.decomposition import PCA
from sklearn.mixture import GaussianMixture
from threadpoolctl import threadpool_limits

log = logging.getLogger(__name__)

REDUCERS = ("auto", "umap", "pca")
COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")


@dataclass(frozen=True)
class ClusteringConfig:
    reduction_dim: int = 10  # RAPTOR's reduction_dimension
    reducer: str = "umap"  # umap (RAPTOR's) | pca | auto (UMAP when importable, else PCA)
    threshold: float = 0.1  # soft-membership posterior threshold
    max_clusters: int = 50  # BIC search bound
    covariance_type: str = "full"
    reg_covar: float = 1e-6  # scikit-learn's default; raised automatically on a singular fit
    local_clustering: bool = True  # RAPTOR's second, within-cluster pass
    local_neighbors: int = 10  # UMAP neighbours of the local pass
    metric: str = "cosine"  # UMAP metric

    def __post_init__(self) -> None:
        if self.reducer not in REDUCERS:
            raise ValueError(f"reducer must be one of {REDUCERS}, got {self.reducer!r}")
        if self.covariance_type not in COVARIANCE_TYPES:
            raise ValueError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {self.covariance_type!r}")
        if self.reduction_dim < 1:
            raise ValueError(f"reduction_dim must be >= 1, got {self.reduction_dim}")
        if not 0.0 <= self.threshold < 1.0:
            raise ValueError(f"threshold must be in [0, 1), got {self.threshold}")
        if self.max_clusters < 1:
            raise ValueError(f"max_clusters must be >= 1, got {self.max_clusters}")
        if self.reg_covar <= 0:
            raise ValueError(f"reg_covar must be > 0, got {self.reg_covar}")
        if self.local_neighbors < 2:
            raise ValueError(f"local_neighbors must be >= 2, got {self.local_neighbors}")
        if self.reducer == "umap" and not umap_available():
            raise ImportError("reducer='umap' needs umap-learn (a dependency: pip install -e .), or set reducer=pca")

    def key(self) -> dict:
        """The settings that change clusters, with ``auto`` resolved (a cache must not mix reducers)."""
        return {**asdict(self), "reducer": resolve_reducer(self.reducer)}


def single_blas_thread(function):
    """Run ``function`` with one BLAS thread: mixtures over a few dozen points in ~10 dimensions are
    many times faster so (thread start-up dominates such small matrices)."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with threadpool_limits(1):
            return function(*args, **kwargs)

    return wrapper


def umap_available() -> bool:
    return importlib.util.find_spec("umap") is not None


# UMAP's modules whose numba kernels a fit compiles. umap-learn declares them without ``cache=True``, so every
# process compiled them again: 11 s before the first tree's first layer, on every harness run that builds one.
UMAP_KERNEL_MODULES = ("umap.umap_", "umap.utils", "umap.layouts", "umap.distances", "umap.sparse", "umap.spectral")


def umap_kernels() -> list:
    """The numba kernels (dispatchers) of ``UMAP_KERNEL_MODULES``."""
    import numba.core.registry

    modules = [importlib.import_module(name) for name in UMAP_KERNEL_MODULES]
    return [k for m in modules for k in vars(m).values() if isinstance(k, numba.core.registry.CPUDispatcher)]


@functools.cache
def umap_with_cached_kernels():
    """The ``umap`` module, its numba kernels set to write and load numba's on-disk cache (beside umap's
    sources, or numba's user-wide cache folder where those are read-only). A kernel is looked up by its
    source file's time stamp, its argument types and this CPU, so a changed umap or another CPU compiles again."""
    import numba.core.caching
    import umap  # pyright: ignore[reportMissingImports]

    for kernel in umap_kernels():
        if isinstance(kernel._cache, numba.core.caching.NullCache):
            kernel.enable_caching()
    return umap


def compile_umap_kernels(seed: int = 0) -> int:
    """Compile UMAP's kernels into numba's on-disk cache now (``make setup`` does, once per install): a tree's
    first fit in a fresh environment otherwise stalls on compiling them, 15 s on a quiet 2-core machine and
    29 s beside other work. A fit and a transform of float32 rows, as a tree's layer does, compile what trees
    use. Returns the number of kernels compiled or loaded (0 without umap-learn)."""
    if not umap_available():
        return 0
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(24, 16)).astype(np.float32)
    _, reducer = fit_reducer(rows, 4, "umap", seed, 4)
    reducer.transform(rows[:2])
    return sum(len(kernel.overloads) for kernel in umap_kernels())


def resolve_reducer(kind: str) -> str:
    if kind == "auto":
        return "umap" if umap_available() else "pca"
    return kind


def reduced_dimension(n_samples: int, n_features: int, dim: int) -> int:
    """RAPTOR's ``min(dim, n - 2)``, kept within [1, n_features]."""
    return max(1, min(dim, n_samples - 2, n_features))


def fit_reducer(embeddings: np.ndarray, dim: int, kind: str, seed: int, n_neighbors: int, metric: str = "cosine"):
    """(reduced embeddings, fitted reducer with ``transform``); needs at least 3 rows."""
    n, d = embeddings.shape
    if n < 3:
        raise ValueError(f"dimension reduction needs at least 3 nodes, got {n}")
    components = reduced_dimension(n, d, dim)
    kind = resolve_reducer(kind)
    if kind == "umap":
        reducer = umap_with_cached_kernels().UMAP(
            n_neighbors=max(2, min(int(n_neighbors), n - 1)),
            n_components=components,
            metric=metric,
            random_state=seed,  # also makes UMAP single-threaded, hence reproducible
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "n_jobs overridden by random_state", spectral-init notes
            reduced = reducer.fit_transform(embeddings)
    else:
        reducer = PCA(n_components=components, svd_solver="full", random_state=seed)
        with warnings.catch_warnings():
            # Identical rows (repeated chunks) have zero variance: the explained-variance ratio divides
            # by zero, harmlessly; the mixture's reg_covar handles the degenerate points.
            warnings.simplefilter("ignore", RuntimeWarning)
            reduced = reducer.fit_transform(embeddings)
    return np.asarray(reduced, dtype=np.float64), reducer


def fit_mixture(
    points: np.ndarray,
    n_components: int,
    config: ClusteringConfig,
    seed: int,
    means_init: np.ndarray | None = None,
) -> GaussianMixture:
    """A fitted GaussianMixture; a singular covariance is retried with reg_covar x10, up to x1000."""
    n = len(points)
    if not 1 <= n_components <= n:
        raise ValueError(f"a mixture over {n} points cannot have {n_components} components")
    reg = config.reg_covar
    for _ in range(4):
        mixture = GaussianMixture(
            n_components=n_components,
            covariance_type=config.covariance_type,
            reg_covar=reg,
            random_state=seed,
            means_init=means_init,
        )
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ConvergenceWarning on tiny clusters is expected
                return mixture.fit(points)
        except ValueError as exc:
            if "covariance" not in str(exc):
                raise
            log.debug("mixture of %d components failed at reg_covar=%g; retrying", n_components, reg)
            reg *= 10
    raise ValueError(f"mixture of {n_components} components over {n} points failed up to reg_covar={reg / 10:g}")


@single_blas_thread
def best_mixture_by_bic(points: np.ndarray, config: ClusteringConfig, seed: int) -> GaussianMixture:
    """The mixture of 1 .. min(max_clusters, n) - 1 components with the lowest BIC (RAPTOR's search)."""
    n = len(points)
    top = max(1, min(config.max_clusters, n) - 1)
    best, best_bic = None, np.inf
    for k in range(1, top + 1):
        try:
            mixture = fit_mixture(points, k, config, seed)
        except ValueError:
            continue  # k components cannot be fitted to these points: not a candidate
        bic = mixture.bic(points)
        if best is None or bic < best_bic:
            best, best_bic = mixture, bic
    if best is None:
        raise ValueError(f"no Gaussian mixture could be fitted to {n} points")
    return best


def soft_memberships(probabilities: np.ndarray, threshold: float) -> list[tuple[int, np.ndarray]]:
    """(component, member indices) for every non-empty component: posterior above ``threshold``,
    plus each point's most probable component."""
    member = probabilities > threshold
    member[np.arange(len(probabilities)), probabilities.argmax(axis=1)] = True
    return [(c, np.flatnonzero(member[:, c])) for c in range(probabilities.shape[1]) if member[:, c].any()]


def mixture_clusters(points: np.ndarray, config: ClusteringConfig, seed: int) -> list[np.ndarray]:
    mixture = best_mixture_by_bic(points, config, seed)
    return [members for _, members in soft_memberships(mixture.predict_proba(points), config.threshold)]


@single_blas_thread
def raptor_clusters(embeddings: np.ndarray, config: ClusteringConfig, seed: int) -> list[np.ndarray]:
    """Clusters (arrays of row indices, ascending) of the embeddings: global pass, then local passes."""
    n = len(embeddings)
    if n <= 2:
        return [np.arange(n)]
    reduced, _ = fit_reducer(embeddings, config.reduction_dim, config.reducer, seed, int((n - 1) ** 0.5), config.metric)
    clusters: list[np.ndarray] = []
    for members in mixture_clusters(reduced, config, seed):
        # RAPTOR leaves a global cluster of at most dim + 1 nodes as it is.
        if not config.local_clustering or len(members) <= config.reduction_dim + 1:
            clusters.append(members)
            continue
        local, _ = fit_reducer(
            embeddings[members], config.reduction_dim, config.reducer, seed, config.local_neighbors, config.metric
        )
        clusters.extend(members[sub] for sub in mixture_clusters(local, config, seed))
    return unique_clusters(clusters)


def unique_clusters(clusters: list[np.ndarray]) -> list[np.ndarray]:
    """Drop repeated member sets (two soft components can claim the same nodes), keeping first order."""
    seen: set[tuple[int, ...]] = set()
    out = []
    for members in clusters:
        key = tuple(int(i) for i in members)
        if key and key not in seen:
            seen.add(key)
            out.append(np.asarray(key, dtype=np.int64))
    return out


@single_blas_thread
def cap_cluster_tokens(
    clusters: list[np.ndarray],
    embeddings: np.ndarray,
    token_counts: np.ndarray,
    max_tokens: int | None,
    config: ClusteringConfig,
    seed: int,
) -> list[np.ndarray]:
    """Re-cluster every cluster whose texts exceed ``max_tokens`` in total (RAPTOR's
    ``max_length_in_cluster``). When re-clustering cannot split it, the cluster is cut into two halves
    in node order, so the recursion always ends."""
    if max_tokens is None:
        return clusters
    out: list[np.ndarray] = []
    pending = list(clusters)
    while pending:
        members = pending.pop(0)
        if len(members) <= 1 or int(token_counts[members].sum()) <= max_tokens:
            out.append(members)
            continue
        parts = [members[sub] for sub in raptor_clusters(embeddings[members], config, seed)]
        if len(parts) <= 1 or any(len(p) == len(members) for p in parts):
            half = len(members) // 2
            parts = [members[:half], members[half:]]
        pending = parts + pending
    return unique_clusters(out)


@dataclass
class SeededFit:
    """The first DTCRS layer's fit, kept for inspection: reducer, mixture and the seeds' reduced means."""

    reducer: object
    mixture: GaussianMixture
    means_init: np.ndarray
    components: list[int]  # mixture component of each returned cluster (= index of its sub-question)


@single_blas_thread
def seeded_clusters(
    embeddings: np.ndarray, seed_embeddings: np.ndarray, config: ClusteringConfig, seed: int
) -> tuple[list[np.ndarray], SeededFit | None]:
    """One mixture component per seed (sub-question), initialised at the seed's embedding after the
    same reducer that was fitted on the nodes. Returns the non-empty clusters and the fit.

    With more seeds than nodes only the first ``n`` seeds are used (a mixture cannot have more
    components than samples); with two or fewer nodes there is nothing to fit and all nodes form one
    cluster.
    """
    n = len(embeddings)
    if len(seed_embeddings) == 0:
        raise ValueError("seeded clustering needs at least one seed embedding")
    if n <= 2:
        return [np.arange(n)], None
    reduced, reducer = fit_reducer(
        embeddings, config.reduction_dim, config.reducer, seed, int((n - 1) ** 0.5), config.metric
    )
    k = min(len(seed_embeddings), n)
    means = np.asarray(reducer.transform(seed_embeddings[:k]), dtype=np.float64)
    mixture = fit_mixture(reduced, k, config, seed, means_init=means)
    found = soft_memberships(mixture.predict_proba(reduced), config.threshold)
    fit = SeededFit(reducer=reducer, mixture=mixture, means_init=means, components=[c for c, _ in found])
    return [members for _, members in found], fit
