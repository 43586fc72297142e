"""The streaming engine: batch -> batch pieces shared by the ops, none of which opens a path.

Ordering (order.py over the external sort in sort.py), duplicate policies and summing
(duplicates.py), bounds checks (bounds.py), axes (axes.py), grouping (group.py), the merge join
of two sorted operands (binary.py), dense scatter (dense.py), kernel value layouts (values.py)
and the --where language (where.py).  It sits between the ops above and sptool.io below.
"""
