"""What one fit of the embedded learner reads of its trajectories (``EmbeddedLearner._fit``), decision by decision."""
from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp


class Rows:
    """Consecutive sparse rows (CSR blocks of one width) appended into one growing CSR matrix.

    The blocks' entries are copied into ``array.array`` buffers as each block arrives, so a block can be dropped
    at once, and ``matrix()`` hands the buffers to SciPy without a copy (as scikit-learn's ``FeatureHasher`` does
    with its own buffers): the fit holds its candidate rows once. Stacking the kept blocks with
    ``scipy.sparse.vstack`` held them twice at its end (the blocks and their copy: 1.4 GB of 2.8 at the paper's
    scale, docs/research). A large buffer grows in place (``realloc``), so growing does not copy it either.
    """

    def __init__(self) -> None:
        self.data, self.indices, self.indptr = array("d"), array("i"), array("q", [0])
        self.width: int | None = None

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def append(self, block: sp.csr_matrix) -> None:
        if self.width is None:
            self.width = block.shape[1]
        if block.shape[1] != self.width:
            raise ValueError(f"a block of {block.shape[1]} columns after blocks of {self.width}")
        self.data.frombytes(_raw(block.data, np.float64))
        self.indices.frombytes(_raw(block.indices, np.int32))
        self.indptr.frombytes(_raw(block.indptr[1:] + self.indptr[-1], np.int64))

    def matrix(self) -> sp.csr_matrix:
        """The rows so far as one CSR matrix over these buffers (append no more once it is taken)."""
        indptr = np.frombuffer(self.indptr, dtype=np.int64)
        if len(self.data) < np.iinfo(np.int32).max:  # scikit-learn's SGD takes 32-bit indices only
            indptr = indptr.astype(np.int32)
        return sp.csr_matrix((np.frombuffer(self.data, dtype=np.float64), np.frombuffer(self.indices, dtype=np.int32),
                              indptr), shape=(len(self), self.width or 0), copy=False)


def _raw(values: np.ndarray, dtype) -> memoryview:
    """``values`` as ``dtype``, as the bytes ``array.frombytes`` reads (no copy when already of that type)."""
    return memoryview(np.ascontiguousarray(values, dtype=dtype)).cast("B")


@dataclass
class FitRows:
    """What a fit reads of its trajectories, decision by decision; the candidate rows of the argument and report
    models are kept hashed (``*_rows``), the last chunk's as Python rows until ``flush``."""

    states: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    write_states: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    asked_states: list[str] = field(default_factory=list)
    asked_tools: list[str] = field(default_factory=list)
    arg_feats: list[tuple] = field(default_factory=list)
    arg_labels: list[int] = field(default_factory=list)
    arg_rows: Rows = field(default_factory=Rows)
    report_feats: list[tuple] = field(default_factory=list)
    report_labels: list[int] = field(default_factory=list)
    report_rows: Rows = field(default_factory=Rows)
    styles: Counter = field(default_factory=Counter)  # how the told numbers were written: as they are, or x.xx

    def flush(self, hashed) -> None:
        """The pending candidate rows hashed (``hashed``: rows -> their sparse matrix) onto the hashed rows."""
        for feats, rows in ((self.arg_feats, self.arg_rows), (self.report_feats, self.report_rows)):
            if feats:
                rows.append(hashed(feats))
                feats.clear()
