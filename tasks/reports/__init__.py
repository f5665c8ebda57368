"""Reading the store for a person: `evosyn report` (report.py over data.py and html.py), `evosyn compare`
(compare.py), the metric names they share (legend.py), and `evosyn show` / `runs` / `preview` (browse.py)."""
