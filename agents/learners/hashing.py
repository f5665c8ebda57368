"""Hashed rows without hashing a feature twice: the matrices scikit-learn's hashers make, built from parts.

A candidate row's features are a few groups (``profiles.profile_parts`` and the row's extra features), and
the same groups recur across rows; ``FeatureHasher`` re-hashes every feature string of every row in Python.
``Hashing`` hashes each distinct feature once (as ``FeatureHasher`` does: ``Columns``) and remembers its
column; ``rows`` composes the rows as a product, ``R @ G``, with ``R`` counting which groups each row holds
and ``G`` the groups' columns. Each row then holds the same columns with the same counts as
``FeatureHasher`` gives it, and with its columns sorted it is the same CSR matrix (``indices``, ``indptr``
and ``data`` equal), so a model's scores of it are the same numbers bit for bit
(tests/agents/test_learners_hashing.py). Decision states are tokens: ``Hashing.states`` remembers each
token's column and L2-normalizes the rows with the routine ``HashingVectorizer(norm="l2")`` calls
(``normalize`` without its input checks).
"""
from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import methodcaller

import numpy as np
import scipy.sparse as sp
from sklearn.utils import murmurhash3_32
from sklearn.utils.sparsefuncs_fast import inplace_csr_row_normalize_l2

MAX_COLUMNS = 1 << 20  # remembered columns of single features (strings of a few dozen bytes); cleared when full


class Columns(dict):
    """Feature -> its column: what ``FeatureHasher(alternate_sign=False)`` computes for a string feature
    (``_hashing_fast``: scikit-learn's signed 32-bit murmurhash of its UTF-8 bytes, seed 0, as a column),
    one feature at a time and remembered, where ``FeatureHasher`` takes a Python call per batch and per
    feature of every row. tests/agents/test_learners_hashing.py checks it against ``FeatureHasher``."""

    def __init__(self, n_features: int):
        super().__init__()
        self.n_features = n_features

    def __missing__(self, feature: str) -> int:
        h = murmurhash3_32(feature, seed=0)
        column = (2147483647 - (self.n_features - 1)) % self.n_features if h == -2147483648 else \
            abs(h) % self.n_features
        if len(self) >= MAX_COLUMNS:
            self.clear()
        self[feature] = column
        return column


class Hashing:
    def __init__(self, n_features: int):
        self.n_features = n_features
        self.known = Columns(n_features)  # feature -> its column

    def rows(self, rows: Sequence[Sequence[tuple[str, ...]]], index: Sequence[int] | None = None
             ) -> sp.csr_matrix:
        """``FeatureHasher.transform`` of rows given as their groups of features (a row's features are its
        groups concatenated); with ``index``, of the rows ``rows[i] for i in index`` (a row may recur), without
        building the distinct rows' matrix first."""
        # Every group is alive (held by ``rows``) meanwhile, so its id names it; empty groups add no feature. The
        # loops run in C (chain, filter, map) and numpy: a row is a handful of groups, and there are millions.
        present = list(filter(None, chain.from_iterable(rows)))
        ids = np.fromiter(map(id, present), dtype=np.int64, count=len(present))
        # the distinct groups are the rows of G, by id: any arrangement gives X's entries, exact counts
        _, first, flat = np.unique(ids, return_index=True, return_inverse=True)
        groups = [present[i] for i in first.tolist()]
        sizes = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        sizes -= np.fromiter(map(methodcaller("count", ()), rows), dtype=np.int64, count=len(rows))
        R = sp.csr_matrix((np.ones(len(flat)), flat, _indptr(sizes)), shape=(len(rows), len(groups)))
        if index is not None:
            R = R[np.asarray(index, dtype=np.int64)]
        cols = self.columns(list(chain.from_iterable(groups)))
        G = sp.csr_matrix((np.ones(len(cols)), cols, _offsets(groups)), shape=(len(groups), self.n_features))
        X = (R @ G).tocsr()
        X.sort_indices()  # FeatureHasher's rows hold their columns sorted
        return X

    def columns(self, features: Sequence[str]) -> np.ndarray:
        """The column ``FeatureHasher`` hashes each feature to."""
        return np.fromiter(map(self.known.__getitem__, features), dtype=np.int32, count=len(features))

    def states(self, docs: Sequence[list[str]]) -> sp.csr_matrix:
        """L2-normalized rows of tokens: ``HashingVectorizer(norm="l2").transform`` of the token lists' texts."""
        indices = self.columns([t for d in docs for t in d])
        X = sp.csr_matrix((np.ones(len(indices)), indices, _offsets(docs)), shape=(len(docs), self.n_features))
        X.sum_duplicates()  # sorts each row's columns and adds the counts of repeated tokens, as FeatureHasher does
        inplace_csr_row_normalize_l2(X)
        return X


def _offsets(parts: Sequence[Sequence]) -> np.ndarray:
    """CSR ``indptr`` of rows of these lengths."""
    return _indptr(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)))


def _indptr(sizes: np.ndarray) -> np.ndarray:
    """CSR ``indptr`` of rows of these sizes."""
    out = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return out
