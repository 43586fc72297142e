"""Plain NumPy versions of the kernels in sptool/_optim.pyx, with the same signatures.

Used only as the test oracle (tests/test_apply.py); the library always runs the compiled
kernels.  Arithmetic is in the table's dtype, the scalars rounded to it once, as there.
"""

from __future__ import annotations

import numpy as np


def sgd_rows(table, rows, grad, old, lr):
    t = table.dtype.type
    table[rows] = old - t(lr) * grad


def adagrad_rows(table, acc, rows, grad, old, old_acc, lr, eps):
    t = table.dtype.type
    s = old_acc + grad * grad
    acc[rows] = s
    table[rows] = old - t(lr) * grad / (np.sqrt(s) + t(eps))


def adam_rows(table, m1, m2, rows, grad, old, old_m1, old_m2, step_size, beta1, beta2, eps):
    t = table.dtype.type
    u = t(beta1) * old_m1 + t(1.0 - beta1) * grad
    v = t(beta2) * old_m2 + t(1.0 - beta2) * grad * grad
    m1[rows] = u
    m2[rows] = v
    table[rows] = old - t(step_size) * u / (np.sqrt(v) + t(eps))
