"""Running and recording: run_scenario (summary.json, timeseries.npz, events.jsonl, pcaps),
plots, labels, parameter sweeps and the SUE study.

May import everything below it (the kernel up to sim.scenarios) and wire; not sim.cli.
"""
