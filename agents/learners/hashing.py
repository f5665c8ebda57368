"""Candidate rows hashed by scikit-learn's ``FeatureHasher``, each distinct group of features once.

A candidate row's features are a few groups (``profiles.profile_parts`` and the row's extra features), and
the same groups recur across rows: a fit's argument rows run to a million and more, built from far fewer
distinct groups. ``FeatureHasher.transform`` of the rows would hash every feature of every row again;
``hashed_rows`` hands it each distinct group once, in one batch (``G``: a group per row), and composes the
rows as the product ``R @ G``, ``R`` counting which groups each row holds. The learner's hasher has
``alternate_sign=False``, so a row's hashed vector is its features' counts, and the counts of a row add up
over its groups: the product holds each row's columns with ``FeatureHasher``'s counts, and with its columns
sorted (as ``FeatureHasher`` leaves them) it is the matrix ``FeatureHasher.transform`` makes of the rows'
concatenated features, ``indptr``, ``indices`` and ``data`` equal (tests/agents/test_learners_hashing.py).
"""
from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import methodcaller

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction import FeatureHasher

Known = dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]]  # group -> its hashed row's (indices, data)
MAX_KNOWN = 1 << 17  # remembered hashed groups (a few dozen features each); cleared when full


def hashed_rows(hasher: FeatureHasher, rows: Sequence[Sequence[tuple[str, ...]]],
                index: Sequence[int] | None = None, known: Known | None = None) -> sp.csr_matrix:
    """``hasher.transform`` of rows given as their groups of features (a row's features are its groups
    concatenated); with ``index``, of the rows ``rows[i] for i in index`` (a row may recur), without building
    the distinct rows' matrix first. ``known``: the hashed groups of earlier calls with this hasher, read and
    added to (a decision's candidates share most of their groups with earlier decisions')."""
    # Every group is alive (held by ``rows``) meanwhile, so its id names it; empty groups add no feature. The
    # loops run in C (chain, filter, map) and numpy: a row is a handful of groups, and there are millions.
    present = list(filter(None, chain.from_iterable(rows)))
    ids = np.fromiter(map(id, present), dtype=np.int64, count=len(present))
    # the distinct groups are the rows of G, by id: any arrangement gives X's entries, exact counts
    _, first, flat = np.unique(ids, return_index=True, return_inverse=True)
    groups = [present[i] for i in first.tolist()]
    sizes = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    sizes -= np.fromiter(map(methodcaller("count", ()), rows), dtype=np.int64, count=len(rows))
    R = sp.csr_matrix((np.ones(len(flat)), flat.reshape(-1), _indptr(sizes)), shape=(len(rows), len(groups)))
    if index is not None:
        R = R[np.asarray(index, dtype=np.int64)]
    if known is None:
        G = hasher.transform(groups) if groups else sp.csr_matrix((0, hasher.n_features))
    else:
        G = _groups(hasher, groups, known)
    X = (R @ G).tocsr()
    X.sort_indices()  # FeatureHasher's rows hold their columns sorted
    return X


def _groups(hasher: FeatureHasher, groups: list[tuple[str, ...]], known: Known) -> sp.csr_matrix:
    """``hasher.transform(groups)``, hashing only the groups ``known`` lacks (in one call) and adding them."""
    new = list(dict.fromkeys(g for g in groups if g not in known))
    if new and len(known) + len(new) > MAX_KNOWN:  # full: start afresh with this call's groups
        known.clear()
        new = list(dict.fromkeys(groups))
    if new:
        H = hasher.transform(new)
        for g, start, end in zip(new, H.indptr[:-1].tolist(), H.indptr[1:].tolist()):
            known[g] = (H.indices[start:end], H.data[start:end])
    parts = [known[g] for g in groups]
    sizes = np.fromiter((len(i) for i, _ in parts), dtype=np.int64, count=len(parts))
    indices = np.concatenate([i for i, _ in parts]) if parts else np.zeros(0, dtype=np.int32)
    data = np.concatenate([d for _, d in parts]) if parts else np.zeros(0)
    return sp.csr_matrix((data, indices, _indptr(sizes)), shape=(len(groups), hasher.n_features))


def _indptr(sizes: np.ndarray) -> np.ndarray:
    """CSR ``indptr`` of rows of these sizes."""
    out = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return out
