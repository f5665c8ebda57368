"""The argument and report models' hashed rows, assembled from cached parts.

A candidate's features come in parts (``profiles.profile_parts``) that recur across rows and decisions.
``PartHasher`` asks scikit-learn's ``FeatureHasher`` for the column of each string of a part once, keeps
the part's columns, and builds a row from its parts' columns as ``FeatureHasher.transform`` builds it from
the row's strings (a ``csr_matrix`` of ones, then ``sum_duplicates``): the same matrix, index for index
(tests/agents/test_learners_linear.py compares them on a trained model's rows), without hashing every
string of every row again.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction import FeatureHasher

MAX_PARTS = 1 << 18  # remembered parts; past it the memory starts over (a part's columns never change)


class PartHasher:
    def __init__(self, hasher: FeatureHasher):
        if hasher.alternate_sign or hasher.input_type != "string":
            raise ValueError("PartHasher builds rows of counts: it needs input_type='string', alternate_sign=False")
        self.hasher = hasher
        self.columns: dict[tuple[str, ...], list[int]] = {}

    def rows(self, rows: Sequence[Sequence[tuple[str, ...]]]) -> sp.csr_matrix:
        """``hasher.transform`` of each row's strings, the row given as the parts its strings are the concatenation of."""
        columns = self.columns
        new = list(dict.fromkeys(part for row in rows for part in row if part not in columns))
        if len(columns) + len(new) > MAX_PARTS:
            columns.clear()
            new = list(dict.fromkeys(part for row in rows for part in row))
        strings = list(dict.fromkeys(f for part in new for f in part))
        if strings:
            hashed = self.hasher.transform([f] for f in strings)  # one string a row: its one column, in turn
            column = dict(zip(strings, hashed.indices.tolist()))
            for part in new:
                columns[part] = [column[f] for f in part]
        else:
            columns.update((part, []) for part in new)
        indices: list[int] = []
        indptr = [0]
        for row in rows:
            for part in row:
                indices += columns[part]
            indptr.append(len(indices))
        kind = np.int32 if len(indices) < 2 ** 31 else np.int64
        X = sp.csr_matrix((np.ones(len(indices), dtype=self.hasher.dtype), np.array(indices, dtype=kind),
                           np.array(indptr, dtype=kind)), shape=(len(rows), self.hasher.n_features))
        X.sum_duplicates()  # also sorts each row's indices, as FeatureHasher does
        return X
