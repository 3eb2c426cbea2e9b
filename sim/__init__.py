"""lossless.sim: the per-hop fabric simulator and the ``lossless`` command line."""
