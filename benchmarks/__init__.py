"""Speed and memory benchmarks, run by `evosyn bench …`: each prints a table and writes JSON."""
