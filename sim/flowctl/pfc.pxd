# Types of sim/flowctl/pfc.py for the compiled core (Cython pure-Python mode: the .py
# is the source, this file only declares).  Every PAUSE a switch sends and every one a port
# receives goes through this module; PfcResponder is a cdef class (its two attributes are
# fields; its __slots__ said so), the functions are compiled as they are.

cdef class PfcResponder:
    cdef public object node
    cdef public dict refresh
