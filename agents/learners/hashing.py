"""Candidate rows hashed by scikit-learn's ``FeatureHasher`` without hashing the same thing twice.

A candidate row's features are a few groups (``profiles.profile_parts`` and the row's extra features). In a fit
the same groups recur across rows: the argument rows run to a million and more, built from far fewer distinct
groups. ``FeatureHasher.transform`` of the rows would hash every feature of every row again; ``hashed_rows``
hands it each distinct group once, in one batch (``G``: a group per row), and composes the rows as the product
``R @ G``, ``R`` counting which groups each row holds. While the learner decides, each call brings a few rows,
mostly new ones, whose features it has seen many times: ``Columns`` remembers each feature's column (hashed by
``FeatureHasher`` the first time) and composes the rows from them. Both rest on what ``FeatureHasher`` computes
with ``alternate_sign=False`` (the learner's setting): a row's hashed vector is its features' counts, so it is
the sum of its groups' or of its features' vectors; with its columns sorted (as ``FeatureHasher`` leaves them)
either is the matrix ``FeatureHasher.transform`` makes of the rows' features, ``indptr``, ``indices`` and
``data`` equal (tests/agents/test_learners_hashing.py).
"""
from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import methodcaller

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction import FeatureHasher

MAX_COLUMNS = 1 << 20  # remembered columns of single features (strings of a few dozen bytes); cleared when full


class Columns(dict):
    """Feature -> its column, as ``hasher`` hashes it, remembered: a decision's candidates bring rows never seen
    before, made of features seen many times. Each new feature is hashed by ``hasher.transform`` itself (all of
    a call's new features in one call, each as a sample of its own: one column with count 1), and a row of
    features is then the sum of its features' columns, which is what ``FeatureHasher`` computes of a row (with
    ``alternate_sign=False`` every feature adds +1 to its column)."""

    def __init__(self, hasher: FeatureHasher):
        super().__init__()
        self.hasher = hasher

    def rows(self, rows: Sequence[Sequence[tuple[str, ...]]]) -> sp.csr_matrix:
        """``hasher.transform`` of rows given as their groups of features, as ``hashed_rows``."""
        features = list(chain.from_iterable(chain.from_iterable(rows)))
        new = [f for f in dict.fromkeys(features) if f not in self]
        if new and len(self) + len(new) > MAX_COLUMNS:  # full: start afresh with this call's features
            self.clear()
            new = list(dict.fromkeys(features))
        if new:
            self.update(zip(new, self.hasher.transform([f] for f in new).indices.tolist()))
        columns = np.fromiter(map(self.__getitem__, features), dtype=np.int32, count=len(features))
        sizes = np.fromiter((sum(map(len, r)) for r in rows), dtype=np.int64, count=len(rows))
        X = sp.csr_matrix((np.ones(len(columns)), columns, _indptr(sizes)), shape=(len(rows), self.hasher.n_features))
        X.sum_duplicates()  # as FeatureHasher leaves its rows: columns sorted, a repeated feature counted
        return X


def hashed_rows(hasher: FeatureHasher, rows: Sequence[Sequence[tuple[str, ...]]],
                index: Sequence[int] | None = None) -> sp.csr_matrix:
    """``hasher.transform`` of rows given as their groups of features (a row's features are its groups
    concatenated); with ``index``, of the rows ``rows[i] for i in index`` (a row may recur), without building
    the distinct rows' matrix first."""
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
    G = hasher.transform(groups) if groups else sp.csr_matrix((0, hasher.n_features))
    X = (R @ G).tocsr()
    X.sort_indices()  # FeatureHasher's rows hold their columns sorted
    return X


def _indptr(sizes: np.ndarray) -> np.ndarray:
    """CSR ``indptr`` of rows of these sizes."""
    out = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return out
