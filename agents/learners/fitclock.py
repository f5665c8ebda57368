"""CPU time per phase of the embedded learner's fit, for `evosyn bench learner` (a measurement, never saved)."""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

FIT_PHASES = ("conventions", "features", "hashing", "sgd")


class FitClock(dict):
    """CPU seconds of this process (``time.process_time``) per phase of one fit, in ``FIT_PHASES``: what the
    data says before fitting (conventions, constants, values), the decision states and candidate rows
    (features), their hashed matrices (hashing), scikit-learn's SGD (sgd). ``models``: per fitted model, the
    size of what its SGD passed over (rows, stored nonzeros, classes) and its SGD's CPU seconds, so that the
    sgd phase can be read model by model. A measurement, never saved."""

    def __init__(self) -> None:
        super().__init__({phase: 0.0 for phase in FIT_PHASES})
        self.models: dict[str, dict[str, float | int]] = {}

    @contextmanager
    def sgd(self, model: str, X, classes: int) -> Iterator[None]:
        """The sgd phase of one model's fit on the hashed matrix ``X``, also recorded under ``models[model]``."""
        before = self["sgd"]
        with self.phase("sgd"):
            yield
        self.models[model] = {"rows": int(X.shape[0]), "nonzeros": int(X.nnz), "classes": classes,
                              "cpu_seconds": self["sgd"] - before}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.process_time()
        try:
            yield
        finally:
            self[name] += time.process_time() - start
