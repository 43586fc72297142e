# cython: language_level=3
# Compiler directives are set in setup.py (so SPTOOL_CYTHON_DEBUG=1 can turn checks back on).
"""Compiled row copies between memory-mapped arrays and buffers for ``sptool apply``'s journal:
arrays in, arrays out, the GIL released (so that the arrays of one update are copied by
threads side by side).

Rows are bytes here, (N, w) uint8 views of (N, m) arrays, so one loop serves every dtype.  The
row ids are sorted, so the copy walks each map forwards; every ``release`` bytes it has passed
it gives back the pages behind it (madvise MADV_DONTNEED; 0: never).  A page of a shared file
map read or written stays in the process's RSS until given back (a read maps its neighbours
too: Linux's fault-around), and dirty pages of a shared file map stay dirty in the page cache
when dropped, so the map's pages in RSS stay within about ``release`` plus a fault-around.
Done in the loop rather than between Python calls of a few rows each: 1,500 calls of 64 rows
took about 0.1 s of a 100k-row update more than one call (measured).
tests/references/journal.py holds the NumPy equivalents, the test oracle.
"""

from libc.stdint cimport int64_t, uintptr_t
from libc.string cimport memcpy
from posix.mman cimport MADV_DONTNEED, madvise
from posix.unistd cimport sysconf, _SC_PAGESIZE


cdef int _check(Py_ssize_t height, Py_ssize_t width, const int64_t[::1] rows, Py_ssize_t n,
                Py_ssize_t other_width, Py_ssize_t release) except -1:
    cdef Py_ssize_t i
    if rows.shape[0] != n or other_width != width:
        raise ValueError("the buffer must be (len(rows), w) with the map's w")
    if release < 0:
        raise ValueError(f"release {release} is negative")
    for i in range(n):
        if rows[i] < 0 or rows[i] >= height:
            raise ValueError(f"row id {rows[i]} outside [0, {height})")
        if i and rows[i] < rows[i - 1]:
            raise ValueError("row ids must be sorted")
    return 0


cdef inline void _release(const unsigned char *lo, const unsigned char *hi, const unsigned char *first,
                          const unsigned char *end, uintptr_t page) noexcept nogil:
    # [lo, hi): page-aligned, hi <= the page of a row still to be copied.  Only whole pages of the
    # array [first, end) are given back: memory around it (a heap array's neighbours) is never dropped.
    cdef const unsigned char *inside_lo = _page(first + page - 1, page)
    cdef const unsigned char *inside_hi = _page(end, page)
    if lo < inside_lo:
        lo = inside_lo
    if hi > inside_hi:
        hi = inside_hi
    if hi > lo:
        madvise(<void *>lo, <size_t>(hi - lo), MADV_DONTNEED)


cdef inline const unsigned char *_page(const unsigned char *p, uintptr_t page) noexcept nogil:
    return <const unsigned char *>(<uintptr_t>p - (<uintptr_t>p % page))


cdef void _copy(unsigned char *base, Py_ssize_t height, const int64_t[::1] rows, unsigned char *buf, Py_ssize_t w,
                Py_ssize_t release, bint into_map) noexcept nogil:
    """Rows rows[i] of the map at ``base`` (height rows of w bytes) to or from buf[i] (``into_map``)."""
    cdef uintptr_t page = <uintptr_t>sysconf(_SC_PAGESIZE)
    cdef Py_ssize_t i
    cdef const unsigned char *end = base + height * w
    cdef unsigned char *row = base + rows[0] * w
    cdef const unsigned char *mark = _page(row, page)
    for i in range(rows.shape[0]):
        row = base + rows[i] * w
        if release and row - mark >= release:
            _release(mark, _page(row, page), base, end, page)
            mark = _page(row, page)
        if into_map:
            memcpy(row, buf + i * w, w)
        else:
            memcpy(buf + i * w, row, w)
    if release:
        # Up to the end of the last row's page (a map holds whole pages; the array's last
        # partial page stays).
        _release(mark, _page(row + w - 1, page) + page, base, end, page)


def gather_rows(const unsigned char[:, ::1] src, const int64_t[::1] rows, unsigned char[:, ::1] out,
                Py_ssize_t release=0):
    """out[i] = src[rows[i]] (rows sorted), giving back src's pages every ``release`` bytes passed
    (only for an array in a shared file map: other memory's pages would lose their contents)."""
    _check(src.shape[0], src.shape[1], rows, out.shape[0], out.shape[1], release)
    if rows.shape[0] and src.shape[1]:
        with nogil:
            _copy(<unsigned char *>&src[0, 0], src.shape[0], rows, &out[0, 0], src.shape[1], release, False)


def scatter_rows(unsigned char[:, ::1] dst, const int64_t[::1] rows, const unsigned char[:, ::1] src,
                 Py_ssize_t release=0):
    """dst[rows[i]] = src[i] (rows sorted), giving back dst's pages every ``release`` bytes passed
    (as gather_rows)."""
    _check(dst.shape[0], dst.shape[1], rows, src.shape[0], src.shape[1], release)
    if rows.shape[0] and dst.shape[1]:
        with nogil:
            _copy(&dst[0, 0], dst.shape[0], rows, <unsigned char *>&src[0, 0], dst.shape[1], release, True)
