# sim/cc/dcqcn.py in the compiled core (issue 19): compiled by Cython from the .py as it is.
# Dcqcn stays a Python class (it subclasses sim.cc.base.RateControl, an ABC, and an extension
# type cannot have a Python base), so this file declares nothing; its per-packet hooks and
# rate updates are compiled all the same.
