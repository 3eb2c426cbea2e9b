# Types of sim/workloads/maxmin.py for the compiled core (Cython pure-Python mode: the .py
# is the source, this file only declares).  The arrays are array.array objects in both cores.
cimport cython

@cython.locals(nflows=Py_ssize_t, nlinks=Py_ssize_t, npaths=Py_ssize_t, p=Py_ssize_t,
               m=Py_ssize_t, i=Py_ssize_t, k=Py_ssize_t, o=Py_ssize_t, hn=Py_ssize_t,
               cap_h=Py_ssize_t, n=cython.longlong, share=cython.double, r=cython.double,
               count=cython.longlong[::1], off=cython.longlong[::1],
               on=cython.longlong[::1], put=cython.longlong[::1],
               residual=cython.double[::1], rate=cython.double[::1],
               frozen=cython.schar[::1], h_share=cython.double[::1],
               h_link=cython.longlong[::1])
cpdef fill(double[::1] cap, long long[::1] starts, long long[::1] links)

@cython.locals(nflows=Py_ssize_t, total=Py_ssize_t, i=Py_ssize_t, p=Py_ssize_t,
               k=Py_ssize_t, g=Py_ssize_t, m=Py_ssize_t, starts=cython.longlong[::1],
               links=cython.longlong[::1], path=cython.longlong[::1],
               scr=cython.longlong[::1])
cpdef fill_flows(dict capacity, list keys, list paths, scratch)

cdef bint _before(double s1, Py_ssize_t l1, double s2, Py_ssize_t l2)

@cython.locals(i=Py_ssize_t, p=Py_ssize_t)
cdef Py_ssize_t _push(double[::1] h_share, long long[::1] h_link, Py_ssize_t hn,
                      double share, Py_ssize_t link)

@cython.locals(i=Py_ssize_t, c=Py_ssize_t, share=cython.double, link=Py_ssize_t)
cdef Py_ssize_t _pop(double[::1] h_share, long long[::1] h_link, Py_ssize_t hn)
