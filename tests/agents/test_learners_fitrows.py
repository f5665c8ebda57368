"""The fit's hashed rows: blocks appended into one CSR matrix, the matrix ``scipy.sparse.vstack`` makes of them."""
import numpy as np
import pytest
import scipy.sparse as sp

from evosyn.agents.learners.fitrows import Rows


def test_appended_blocks_are_the_stacked_matrix():
    rng = np.random.default_rng(0)
    blocks = [sp.random(n, 64, density=0.2, format="csr", random_state=rng) for n in (5, 0, 1, 17)]
    blocks.append(sp.csr_matrix((3, 64)))  # rows without an entry
    rows = Rows()
    for block in blocks:
        rows.append(block)
    X, want = rows.matrix(), sp.vstack(blocks, format="csr")
    assert X.shape == want.shape == (26, 64) and len(rows) == 26
    assert X.indices.dtype == X.indptr.dtype == np.int32  # what scikit-learn's SGD takes
    for a, b in ((X.data, want.data), (X.indices, want.indices), (X.indptr, want.indptr)):
        assert np.array_equal(a, b)
    assert np.shares_memory(X.data, np.frombuffer(rows.data))  # the buffers, not a copy


def test_a_block_of_another_width_is_refused():
    rows = Rows()
    rows.append(sp.csr_matrix((2, 8)))
    with pytest.raises(ValueError, match="a block of 9 columns after blocks of 8"):
        rows.append(sp.csr_matrix((1, 9)))
