# sim/nic/host.py in the compiled core (issue 19): compiled by Cython from the .py as it is.
# Host stays a Python class: code and tests patch its methods on the class (e.g.
# tests/test_fault_outputs.py wraps Host.add_flow), which an extension type refuses; so this
# file declares nothing, and the module's functions and methods are compiled all the same.
