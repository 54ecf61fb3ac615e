"""Clustering: BIC-sized mixtures, soft membership, the seeded first layer and small-input guards."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.decomposition import PCA

from harness.tree.clustering import (
    ClusteringConfig,
    best_mixture_by_bic,
    cap_cluster_tokens,
    fit_mixture,
    fit_reducer,
    raptor_clusters,
    reduced_dimension,
    seeded_clusters,
    soft_memberships,
)

PCA_CONFIG = ClusteringConfig(reducer="pca")


def blobs(per_blob=15, dim=32, seed=0, spread=0.05):
    """Three tight, well separated groups of unit vectors."""
    rng = np.random.default_rng(seed)
    centres = np.eye(dim)[:3]
    x = np.vstack([c + spread * rng.normal(size=(per_blob, dim)) for c in centres])
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_bic_finds_three_separated_groups():
    x = blobs()
    # Two reduced dimensions: 15 points per group estimate a full covariance well (in 10 they
    # would not, and BIC would reward fitting noise).
    config = ClusteringConfig(reducer="pca", reduction_dim=2, local_clustering=False)
    clusters = raptor_clusters(x, config, seed=0)
    assert sorted(tuple(c) for c in clusters) == [tuple(range(15)), tuple(range(15, 30)), tuple(range(30, 45))]


def test_local_pass_only_refines_global_clusters():
    x = blobs()
    groups = [set(range(15)), set(range(15, 30)), set(range(30, 45))]
    clusters = raptor_clusters(x, PCA_CONFIG, seed=0)
    # Every local cluster lies inside one global group, and together they cover every node.
    assert all(any(set(c) <= g for g in groups) for c in clusters)
    assert set(np.concatenate(clusters)) == set(range(45))
    # A global cluster of at most reduction_dim + 1 nodes is not re-clustered.
    small = raptor_clusters(x[::4], ClusteringConfig(reducer="pca", reduction_dim=10), seed=0)
    global_only = raptor_clusters(x[::4], ClusteringConfig(reducer="pca", reduction_dim=10, local_clustering=False), 0)
    assert (
        sorted(tuple(c) for c in small)
        == sorted(tuple(c) for c in global_only)
        == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11)]
    )


def test_soft_membership_lets_a_node_join_several_clusters_and_never_drops_one():
    probs = np.array([[0.85, 0.15, 0.0], [0.5, 0.45, 0.05], [0.02, 0.03, 0.95], [0.4, 0.35, 0.25]])
    found = {c: tuple(m) for c, m in soft_memberships(probs, threshold=0.1)}
    assert found == {0: (0, 1, 3), 1: (0, 1, 3), 2: (2, 3)}
    # Past 1/threshold components a node's posteriors can all sit below the threshold: it still joins its best.
    flat = np.full((1, 20), 0.05)
    flat[0, 7] = 0.06
    assert soft_memberships(flat / flat.sum(), threshold=0.1) == [(7, np.array([0]))]


@pytest.mark.parametrize("n", [0, 1, 2])
def test_two_or_fewer_nodes_form_one_cluster_without_fitting(n):
    x = blobs()[:n]
    assert [tuple(c) for c in raptor_clusters(x, PCA_CONFIG, 0)] == [tuple(range(n))]


@pytest.mark.parametrize("n", [3, 4, 5, 12])
def test_small_inputs_cluster_without_error_and_cover_every_node(n):
    x = blobs()[::3][:n]
    clusters = raptor_clusters(x, PCA_CONFIG, 0)
    assert set(np.concatenate(clusters)) == set(range(n))
    assert reduced_dimension(n, x.shape[1], 10) == max(1, min(10, n - 2))


def test_singular_covariance_is_guarded_with_a_larger_reg_covar():
    # Identical points: the empirical covariance is exactly zero; sklearn alone would fail for tiny reg_covar.
    x = np.tile(np.array([[1.0, 0.0, 0.0]]), (6, 1))
    mixture = fit_mixture(x, 2, ClusteringConfig(reducer="pca", reg_covar=1e-12), seed=0)
    assert mixture.converged_ and len(set(mixture.predict(x))) == 1
    assert best_mixture_by_bic(x, ClusteringConfig(reducer="pca", reg_covar=1e-12), 0).n_components == 1
    clusters = raptor_clusters(np.tile(blobs()[:1], (8, 1)), PCA_CONFIG, 0)
    assert set(np.concatenate(clusters)) == set(range(8))


def test_mixture_never_gets_more_components_than_points():
    with pytest.raises(ValueError, match="cannot have 5 components"):
        fit_mixture(np.zeros((4, 2)), 5, PCA_CONFIG, 0)
    assert best_mixture_by_bic(blobs()[:3], PCA_CONFIG, 0).n_components <= 2


def test_fixed_seed_gives_identical_clusters():
    x = blobs(seed=3, spread=0.4)
    first = raptor_clusters(x, PCA_CONFIG, seed=11)
    again = raptor_clusters(x, PCA_CONFIG, seed=11)
    assert [tuple(c) for c in first] == [tuple(c) for c in again]


def test_seeded_layer_uses_one_component_per_seed_with_reduced_seed_means():
    x = blobs()
    seeds = np.eye(32, dtype=np.float32)[[2, 0]]  # near groups 3 and 1, in that order
    clusters, fit = seeded_clusters(x, seeds, ClusteringConfig(reducer="pca", covariance_type="diag"), seed=0)
    _, reducer = fit_reducer(x, 10, "pca", 0, int((len(x) - 1) ** 0.5))
    np.testing.assert_allclose(fit.mixture.means_init, reducer.transform(seeds), atol=1e-6)
    np.testing.assert_allclose(fit.means_init, fit.mixture.means_init)
    assert fit.mixture.n_components == 2 and isinstance(fit.reducer, PCA)
    # Component 0 was seeded at group 3 and keeps it; component 1 at group 1.
    by_component = dict(zip(fit.components, (tuple(c) for c in clusters), strict=False))
    assert set(range(30, 45)) <= set(by_component[0])
    assert set(range(15)) <= set(by_component[1])


def test_seeded_layer_caps_components_at_the_node_count_and_skips_tiny_inputs():
    x = blobs()[:4]
    seeds = blobs(seed=9)[:6]
    clusters, fit = seeded_clusters(x, seeds, PCA_CONFIG, 0)
    assert fit.mixture.n_components == 4
    assert set(np.concatenate(clusters)) == set(range(4))
    clusters, fit = seeded_clusters(x[:2], seeds, PCA_CONFIG, 0)
    assert fit is None and [tuple(c) for c in clusters] == [(0, 1)]


def test_token_cap_splits_long_clusters_until_each_fits():
    x = blobs()
    counts = np.full(len(x), 100)
    capped = cap_cluster_tokens([np.arange(45)], x, counts, 700, PCA_CONFIG, 0)
    assert all(counts[c].sum() <= 700 for c in capped)
    assert set(np.concatenate(capped)) == set(range(45))
    assert cap_cluster_tokens([np.arange(45)], x, counts, None, PCA_CONFIG, 0)[0].tolist() == list(range(45))


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="reducer"):
        ClusteringConfig(reducer="tsne")
    with pytest.raises(ValueError, match="threshold"):
        ClusteringConfig(threshold=1.5)
    with pytest.raises(ValueError, match="covariance_type"):
        ClusteringConfig(covariance_type="banded")


def test_umap_reducer_when_installed():
    pytest.importorskip("umap")
    x = blobs(per_blob=12, spread=0.2)
    config = ClusteringConfig(reducer="umap")
    clusters = raptor_clusters(x, config, seed=4)
    assert set(np.concatenate(clusters)) == set(range(36))
    assert [tuple(c) for c in clusters] == [tuple(c) for c in raptor_clusters(x, config, seed=4)]
    seeds = np.eye(32, dtype=np.float32)[[0, 1, 2]]
    clusters, fit = seeded_clusters(x, seeds, ClusteringConfig(reducer="umap", covariance_type="diag"), seed=4)
    assert fit.mixture.n_components == 3
    np.testing.assert_allclose(fit.mixture.means_init, fit.means_init)
    assert fit.means_init.shape == (3, 10)


@pytest.mark.process
def test_trees_reduce_with_umap_by_default_and_the_same_seed_gives_the_same_clusters_in_another_process():
    import subprocess
    import sys

    from tests.conftest import REPO, compose_cfg

    assert ClusteringConfig().reducer == "umap" and ClusteringConfig().key()["reducer"] == "umap"
    for tree in ("raptor", "dtcrs"):
        assert compose_cfg([f"tree={tree}"]).tree.reducer == "umap"
    script = (
        "from tests.test_tree_clustering import blobs; from harness.tree.clustering import ClusteringConfig, "
        "raptor_clusters; print([list(map(int, c)) for c in raptor_clusters(blobs(per_blob=12, spread=0.2), "
        "ClusteringConfig(), seed=7)])"
    )
    here = [list(map(int, c)) for c in raptor_clusters(blobs(per_blob=12, spread=0.2), ClusteringConfig(), seed=7)]
    other = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
    assert other.stdout.strip() == str(here)


def test_umaps_numba_kernels_write_numbas_disk_cache():
    """umap-learn compiles its kernels without ``cache=True``: 11 s in every process that builds a tree."""
    pytest.importorskip("umap")
    import numba.core.caching

    from harness.tree.clustering import umap_kernels, umap_with_cached_kernels

    umap_with_cached_kernels()
    kernels = umap_kernels()
    assert len(kernels) > 20
    assert all(isinstance(kernel._cache, numba.core.caching.FunctionCache) for kernel in kernels)


@pytest.mark.process
def test_kernels_compiled_once_load_from_disk_in_the_next_process():
    """What `make setup` does (compile_umap_kernels) leaves nothing for a later process to compile but umap's
    random-number helpers, which numba compiles afresh as the cached kernels that call them load."""
    pytest.importorskip("umap")
    import subprocess
    import sys

    from tests.conftest import REPO

    script = (
        "import json; from harness.tree.clustering import compile_umap_kernels, umap_kernels; "
        "n = compile_umap_kernels(); ks = [k for k in umap_kernels() if k.overloads]; "
        "print(json.dumps([n, sorted({k.py_func.__name__ for k in ks if k.stats.cache_misses}), "
        "sum(1 for k in ks if k.stats.cache_hits)]))"
    )
    # The first process compiles whatever no earlier one cached; the second is the one checked.
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
    compiled, missed, loaded = json.loads(done.stdout)
    # Every compile of a kernel whose cache is on counts as a miss; the fit's kernels came from the disk.
    assert compiled > 10 and set(missed) <= {"tau_rand", "tau_rand_int"} and loaded > 5
