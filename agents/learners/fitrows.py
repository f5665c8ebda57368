"""What one fit of the embedded learner reads of its trajectories (``EmbeddedLearner._fit``), decision by decision."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class FitRows:
    """What a fit reads of its trajectories, decision by decision; the candidate rows of the argument and report
    models are kept hashed (``*_blocks``: consecutive rows), the last chunk's as Python rows until ``flush``."""

    states: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    write_states: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    asked_states: list[str] = field(default_factory=list)
    asked_tools: list[str] = field(default_factory=list)
    arg_feats: list[tuple] = field(default_factory=list)
    arg_labels: list[int] = field(default_factory=list)
    arg_blocks: list = field(default_factory=list)
    report_feats: list[tuple] = field(default_factory=list)
    report_labels: list[int] = field(default_factory=list)
    report_blocks: list = field(default_factory=list)
    styles: Counter = field(default_factory=Counter)  # how the told numbers were written: as they are, or x.xx

    def flush(self, hashed) -> None:
        """The pending candidate rows hashed (``hashed``: rows -> their sparse matrix) into their blocks."""
        for feats, blocks in ((self.arg_feats, self.arg_blocks), (self.report_feats, self.report_blocks)):
            if feats:
                blocks.append(hashed(feats))
                feats.clear()
