# cython: language_level=3
# Compiler directives are set in setup.py (so SPTOOL_CYTHON_DEBUG=1 can turn checks back on).
"""Compiled sparse optimizer steps for ``sptool apply``: arrays in, arrays out, the GIL released.

Each step writes the rows ``rows`` of a parameter table (and of the optimizer's state, arrays
of the table's shape) from ``grad``, the (n, m) gradient block of those rows, one row per id,
duplicates already summed, and ``old``, ``old_*``: the rows' current contents, (n, m) each
(gathered once for the journal).  The tables are (N, m) views, typically of memory-mapped .npy
files, and are only written, never read: a write to an unmapped page of a shared file map
faults in that page alone, where a read maps its neighbours too (Linux's fault-around), and
writing after reading took about three times as long as writing alone (100k rows of 256 bytes,
measured).  Arithmetic is in the table's type
(float or double), as PyTorch, TensorFlow and Paddle compute in the parameter's type; the
scalars (lr, the bias-corrected step size) arrive as doubles and are rounded to it once.
Each element is read (from ``old``, ``old_*``) before it is written, so a block may be updated
in place: ``old`` the same (n, m) array as ``table`` with rows = 0 .. n-1 (sptool apply's
buffers).  tests/references/optim.py holds the NumPy equivalent of each function, the test oracle.
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


cdef int _check(float_t[:, ::1] out, const int64_t[::1] rows, const float_t[:, ::1] grad,
                const float_t[:, ::1] old) except -1:
    cdef Py_ssize_t i, n = rows.shape[0]
    if grad.shape[0] != n or old.shape[0] != n or grad.shape[1] != out.shape[1] or old.shape[1] != out.shape[1]:
        raise ValueError("grad and the old rows must be (len(rows), m) with the table's m")
    for i in range(n):
        if rows[i] < 0 or rows[i] >= out.shape[0]:
            raise ValueError(f"row id {rows[i]} outside [0, {out.shape[0]})")
    return 0


def sgd_rows(float_t[:, ::1] table, const int64_t[::1] rows, const float_t[:, ::1] grad,
             const float_t[:, ::1] old, double lr):
    """table[rows] = old - lr * grad."""
    _check(table, rows, grad, old)
    cdef Py_ssize_t i, j, r, m = table.shape[1]
    cdef float_t a = <float_t>lr
    with nogil:
        for i in range(rows.shape[0]):
            r = rows[i]
            for j in range(m):
                table[r, j] = old[i, j] - a * grad[i, j]


def adagrad_rows(float_t[:, ::1] table, float_t[:, ::1] acc, const int64_t[::1] rows,
                 const float_t[:, ::1] grad, const float_t[:, ::1] old, const float_t[:, ::1] old_acc,
                 double lr, double eps):
    """acc[rows] = old_acc + grad^2; table[rows] = old - lr * grad / (sqrt(acc[rows]) + eps)."""
    _check(table, rows, grad, old)
    _check(acc, rows, grad, old_acc)
    cdef Py_ssize_t i, j, r, m = table.shape[1]
    cdef float_t a = <float_t>lr, e = <float_t>eps, g, s
    with nogil:
        for i in range(rows.shape[0]):
            r = rows[i]
            for j in range(m):
                g = grad[i, j]
                s = old_acc[i, j] + g * g
                acc[r, j] = s
                table[r, j] = old[i, j] - a * g / (_sqrt(s) + e)


def adam_rows(float_t[:, ::1] table, float_t[:, ::1] m1, float_t[:, ::1] m2, const int64_t[::1] rows,
              const float_t[:, ::1] grad, const float_t[:, ::1] old, const float_t[:, ::1] old_m1,
              const float_t[:, ::1] old_m2, double step_size, double beta1, double beta2, double eps):
    """Lazy Adam on the touched rows: m1 = b1 m1 + (1 - b1) g; m2 = b2 m2 + (1 - b2) g^2;
    table = old - step_size * m1 / (sqrt(m2) + eps), where step_size = lr sqrt(1 - b2^t) / (1 - b1^t)."""
    _check(table, rows, grad, old)
    _check(m1, rows, grad, old_m1)
    _check(m2, rows, grad, old_m2)
    cdef Py_ssize_t i, j, r, m = table.shape[1]
    cdef float_t a = <float_t>step_size, b1 = <float_t>beta1, b2 = <float_t>beta2, e = <float_t>eps
    cdef float_t c1 = <float_t>(1.0 - beta1), c2 = <float_t>(1.0 - beta2), g, u, v
    with nogil:
        for i in range(rows.shape[0]):
            r = rows[i]
            for j in range(m):
                g = grad[i, j]
                u = b1 * old_m1[i, j] + c1 * g
                v = b2 * old_m2[i, j] + c2 * g * g
                m1[r, j] = u
                m2[r, j] = v
                table[r, j] = old[i, j] - a * u / (_sqrt(v) + e)
