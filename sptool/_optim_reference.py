"""Plain NumPy versions of the kernels in sptool/_optim.pyx, with the same signatures.

Used only as the test oracle (tests/test_apply.py); the library always runs the compiled
kernels.  Arithmetic is in the table's dtype, the scalars rounded to it once, as there.
"""

from __future__ import annotations

import numpy as np


def sgd_rows(table, rows, grad, lr):
    t = table.dtype.type
    table[rows] = table[rows] - t(lr) * grad


def adagrad_rows(table, acc, rows, grad, lr, eps):
    t = table.dtype.type
    s = acc[rows] + grad * grad
    acc[rows] = s
    table[rows] = table[rows] - t(lr) * grad / (np.sqrt(s) + t(eps))


def adam_rows(table, m1, m2, rows, grad, step_size, beta1, beta2, eps):
    t = table.dtype.type
    u = t(beta1) * m1[rows] + t(1.0 - beta1) * grad
    v = t(beta2) * m2[rows] + t(1.0 - beta2) * grad * grad
    m1[rows] = u
    m2[rows] = v
    table[rows] = table[rows] - t(step_size) * u / (np.sqrt(v) + t(eps))
