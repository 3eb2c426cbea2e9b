# sim/net/mmu.py in the compiled core (issue 19): compiled by Cython from the .py as it is.
# Mmu stays a Python class (a dataclass: the decorator writes the class's methods, which an
# extension type's fixed type dict would refuse), so this file declares nothing; its methods
# and helpers are compiled all the same.
