# sim/cc/base.py in the compiled core (Cython pure-Python mode: the .py is the source,
# this file only declares).  RateControl is an extension type so that Dcqcn (dcqcn.pxd) can be
# one; Python subclasses (fixed, ibcc, a user's) work as before.

cdef class RateControl:
    pass
