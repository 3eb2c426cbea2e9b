"""Speed benchmarks for the simulator (``python -m bench``; see bench/README.md)."""
