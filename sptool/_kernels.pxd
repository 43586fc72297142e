# The column set the column kernels read, shared with sptool/_reduce.pyx (cimport it from here).
from libc.stdint cimport int64_t


cdef class _Columns:
    """Pointers to K int64 columns of equal length n, element i of column k at ptr[k][i * stride]
    (NULL when n is 0); kept alive by holding the arrays."""
    cdef const int64_t** ptr
    cdef Py_ssize_t K, n, stride
    cdef list arrays
