"""How the fitted embedded learner scores: its models' weights kept contiguous, features hashed once.

``Scoring`` is the part of ``EmbeddedLearner`` that turns decision states and candidate rows into the
fitted models' numbers. What it builds from the fitted models to decide fast (contiguous weights, hashed
groups, remembered feature weights) lives in ``_fast``: never saved, rebuilt after a load.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from agents.learners.hashing import Hashing
from agents.learners.linear import Linear
from agents.learners.profiles import profile_parts


class Scoring:
    arg_vec: Any  # FeatureHasher of candidate rows
    state_vec: Any  # HashingVectorizer of decision states

    def _derived(self, name: str, build):
        """What the fitted learner computes from itself to decide fast; never saved (rebuilt after a load)."""
        fast = self.__dict__.setdefault("_fast", {})
        if name not in fast:
            fast[name] = build()
        return fast[name]

    def _hashing(self) -> Hashing:
        """Both hashers' columns (they hash alike: one width, no alternating signs)."""
        assert self.arg_vec.n_features == self.state_vec.n_features
        return self._derived("hashing", lambda: Hashing(self.arg_vec.n_features))

    def _hashed(self, rows: list[tuple]):
        """The hashed matrix of candidate rows ``(tool, arg, profile, extra)``: what ``arg_vec.transform`` makes of
        their features, with each distinct row built once (a row depends on its own features only) from its
        groups of features, each distinct group hashed once (``hashing.Hashing``)."""
        at: dict[tuple, int] = {}
        index = [at.setdefault(r, len(at)) for r in rows]
        parts = profile_parts.__wrapped__  # uncached: a fit's distinct rows would each miss the cache, and evict
        return self._hashing().rows([parts(tool, arg, p) + (extra,) for tool, arg, p, extra in at],
                                    None if len(at) == len(rows) else index)

    def _states(self, states: list[str]):
        """``state_vec.transform(states)``, each token hashed once (``hashing.Hashing``)."""
        analyze = self._derived("analyzer", self.state_vec.build_analyzer)
        return self._hashing().states([analyze(s) for s in states])

    def _linear(self, model: str) -> Linear:
        """The fitted model ``model`` (an attribute name) as a contiguous ``Linear``."""
        return self._derived(model, lambda: Linear(getattr(self, model)))

    def _state_scores(self, model: str, state: str) -> np.ndarray:
        """The model's decision values (1-d) for a decision state, its tokens hashed once (``Hashing.columns``)."""
        analyze = self._derived("analyzer", self.state_vec.build_analyzer)
        return self._linear(model).state_decision(self._hashing().columns(analyze(state)))

    def _predict(self, model: str, constant, state: str) -> str | None:
        if getattr(self, model) is None:
            return constant
        linear, scores = self._linear(model), self._state_scores(model, state)
        return str(linear.classes[int(scores[0] > 0) if len(scores) == 1 else int(np.argmax(scores))])

    def _positive(self, model: str, rows: list[tuple]) -> np.ndarray:
        """``predict_proba(...)[:, 1]`` of the binary model ``model`` for candidate rows ``(tool, arg, profile,
        extra)``, from the weights of their groups of features (``Linear.sums``)."""
        groups = [(profile_parts(tool, arg, p), extra) for tool, arg, p, extra in rows]
        return Linear.positive(self._linear(model).sums(groups, self._hashing()))
