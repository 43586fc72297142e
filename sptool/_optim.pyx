# cython: language_level=3
# Compiler directives are set in setup.py (so SPTOOL_CYTHON_DEBUG=1 can turn checks back on).
"""Compiled sparse optimizer steps for ``sptool apply``: arrays in, arrays out, the GIL released.

Each step updates the rows ``rows`` of a parameter table (and of the optimizer's state, arrays
of the table's shape) in place, from ``grad``, the (n, m) gradient block of those rows, one row
per id, duplicates already summed.  The tables are (N, m) views, typically of memory-mapped
.npy files, so only the touched rows are read and written.  Arithmetic is in the table's type
(float or double), as PyTorch, TensorFlow and Paddle compute in the parameter's type; the
scalars (lr, the bias-corrected step size) arrive as doubles and are rounded to it once.
sptool/_optim_reference.py holds the NumPy equivalent of each function, the test oracle.
"""

from libc.math cimport sqrt, sqrtf
from libc.stdint cimport int64_t

ctypedef fused float_t:
    float
    double


cdef inline float_t _sqrt(float_t x) noexcept nogil:
    if float_t is float:
        return sqrtf(x)
    else:
        return sqrt(x)


cdef int _check(Py_ssize_t table_rows, Py_ssize_t table_m, const int64_t[::1] rows, Py_ssize_t grad_n,
                Py_ssize_t grad_m) except -1:
    cdef Py_ssize_t i
    if grad_n != rows.shape[0] or grad_m != table_m:
        raise ValueError("grad must be (len(rows), m) with the table's m")
    for i in range(rows.shape[0]):
        if rows[i] < 0 or rows[i] >= table_rows:
            raise ValueError(f"row id {rows[i]} outside [0, {table_rows})")
    return 0


def sgd_rows(float_t[:, ::1] table, const int64_t[::1] rows, const float_t[:, ::1] grad, double lr):
    """table[rows] -= lr * grad."""
    _check(table.shape[0], table.shape[1], rows, grad.shape[0], grad.shape[1])
    cdef Py_ssize_t i, j, r, m = table.shape[1]
    cdef float_t a = <float_t>lr
    with nogil:
        for i in range(rows.shape[0]):
            r = rows[i]
            for j in range(m):
                table[r, j] = table[r, j] - a * grad[i, j]


def adagrad_rows(float_t[:, ::1] table, float_t[:, ::1] acc, const int64_t[::1] rows,
                 const float_t[:, ::1] grad, double lr, double eps):
    """acc[rows] += grad^2; table[rows] -= lr * grad / (sqrt(acc[rows]) + eps)."""
    _check(table.shape[0], table.shape[1], rows, grad.shape[0], grad.shape[1])
    if acc.shape[0] != table.shape[0] or acc.shape[1] != table.shape[1]:
        raise ValueError("the accumulator must have the table's shape")
    cdef Py_ssize_t i, j, r, m = table.shape[1]
    cdef float_t a = <float_t>lr, e = <float_t>eps, g, s
    with nogil:
        for i in range(rows.shape[0]):
            r = rows[i]
            for j in range(m):
                g = grad[i, j]
                s = acc[r, j] + g * g
                acc[r, j] = s
                table[r, j] = table[r, j] - a * g / (_sqrt(s) + e)


def adam_rows(float_t[:, ::1] table, float_t[:, ::1] m1, float_t[:, ::1] m2, const int64_t[::1] rows,
              const float_t[:, ::1] grad, double step_size, double beta1, double beta2, double eps):
    """Lazy Adam on the touched rows: m1 = b1 m1 + (1 - b1) g; m2 = b2 m2 + (1 - b2) g^2;
    table -= step_size * m1 / (sqrt(m2) + eps), where step_size = lr sqrt(1 - b2^t) / (1 - b1^t)."""
    _check(table.shape[0], table.shape[1], rows, grad.shape[0], grad.shape[1])
    if m1.shape[0] != table.shape[0] or m1.shape[1] != table.shape[1] or \
            m2.shape[0] != table.shape[0] or m2.shape[1] != table.shape[1]:
        raise ValueError("the moments must have the table's shape")
    cdef Py_ssize_t i, j, r, m = table.shape[1]
    cdef float_t a = <float_t>step_size, b1 = <float_t>beta1, b2 = <float_t>beta2, e = <float_t>eps
    cdef float_t c1 = <float_t>(1.0 - beta1), c2 = <float_t>(1.0 - beta2), g, u, v
    with nogil:
        for i in range(rows.shape[0]):
            r = rows[i]
            for j in range(m):
                g = grad[i, j]
                u = b1 * m1[r, j] + c1 * g
                v = b2 * m2[r, j] + c2 * g * g
                m1[r, j] = u
                m2[r, j] = v
                table[r, j] = table[r, j] - a * u / (_sqrt(v) + e)
