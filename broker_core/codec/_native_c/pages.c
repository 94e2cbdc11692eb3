/* broker_core.codec._native, the store's pages (twins in store/pages.py): populate_write (prefaulting a mapping for
 * writing), read_in (reading a file's range in ahead) and sync_range (msync of a mapping's range), each releasing
 * the GIL for its system calls. */
#include "_native.h"
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#if defined(__linux__) && !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23  /* Linux 5.14+; older kernels answer EINVAL */
#endif

/* ------------------------------------------------------------------ page prefaulting and write-back */
/* populate_write(buf, start, length) -> bool: fault in, writable, the pages of a shared writable mapping under
 * buf[start:start+length] (madvise MADV_POPULATE_WRITE, widened to whole pages), with the GIL released. Contents
 * are not changed. False when the kernel (or platform) has no such advice; OSError for other failures. */
#define POPULATE_SLICE ((uintptr_t)128 * 1024)  /* pages.py SLICE */
PyObject *bc_py_populate_write(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, length;
    if (!PyArg_ParseTuple(args, "w*nn", &buf, &start, &length)) return NULL;
    if (start < 0 || length < 0 || start > buf.len || length > buf.len - start) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "populate_write: range outside the buffer");
        return NULL;
    }
    if (length == 0) {
        PyBuffer_Release(&buf);
        Py_RETURN_TRUE;
    }
#ifdef MADV_POPULATE_WRITE
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)buf.buf + (uintptr_t)start) & ~(page - 1);
    uintptr_t hi = ((uintptr_t)buf.buf + (uintptr_t)(start + length) + page - 1) & ~(page - 1);
    int rc = 0, err = 0;
    Py_BEGIN_ALLOW_THREADS
    /* in slices: each call's return to user space lets the scheduler run a woken task on this CPU (one call over
     * megabytes kept a CPU 11-16 ms on this VM, stalling every process's wake-ups: bench.broker's 20k/s tail) */
    for (uintptr_t p = lo; p < hi && rc == 0; p += POPULATE_SLICE) {
        rc = madvise((void *)p, (size_t)(hi - p < POPULATE_SLICE ? hi - p : POPULATE_SLICE), MADV_POPULATE_WRITE);
        if (rc != 0) err = errno;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    if (rc == 0) Py_RETURN_TRUE;
    if (err == EINVAL) Py_RETURN_FALSE;
    errno = err;
    return PyErr_SetFromErrno(PyExc_OSError);
#else
    PyBuffer_Release(&buf);
    Py_RETURN_FALSE;
#endif
}

/* read_in(fd, start, length) -> bool: posix_fadvise(WILLNEED) of [start, start+length) of a file in POPULATE_SLICE
 * steps, the GIL released once for all of them (pages.py read_in is the pure twin, which gives the GIL up and must
 * get it back at each step: behind a busy writer up to a switch interval per 128 KiB, while that writer zeroes the
 * pages not read in yet itself). True when every step was taken; OSError for a refused one (the
 * pure twin's os.posix_fadvise raises it too); ValueError for a negative start or length. */
PyObject *bc_py_read_in(PyObject *self, PyObject *args) {
    int fd;
    long long start, length;
    if (!PyArg_ParseTuple(args, "iLL", &fd, &start, &length)) return NULL;
    if (start < 0 || length < 0) {
        PyErr_SetString(PyExc_ValueError, "read_in: negative start or length");
        return NULL;
    }
#ifdef POSIX_FADV_WILLNEED
    int err = 0;
    long long end = start + length;
    Py_BEGIN_ALLOW_THREADS
    for (long long at = start; at < end && err == 0; at += (long long)POPULATE_SLICE) {
        long long n = end - at < (long long)POPULATE_SLICE ? end - at : (long long)POPULATE_SLICE;
        err = posix_fadvise(fd, (off_t)at, (off_t)n, POSIX_FADV_WILLNEED);  /* returns the error, errno untouched */
    }
    Py_END_ALLOW_THREADS
    if (err == 0) Py_RETURN_TRUE;
    errno = err;
    return PyErr_SetFromErrno(PyExc_OSError);
#else
    Py_RETURN_FALSE;
#endif
}

/* sync_range(buf, start, length): msync(MS_SYNC) of the pages holding [start, start+length) of a shared file
 * mapping, the GIL released: the kernel writes back and waits for only that range of the file (vfs_fsync_range,
 * as fdatasync does for the whole file, device cache flush included). pages.py's pure twin is mmap.flush. */
PyObject *bc_py_sync_range(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, length;
    if (!PyArg_ParseTuple(args, "w*nn", &buf, &start, &length)) return NULL;
    if (start < 0 || length < 0 || start > buf.len || length > buf.len - start) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "sync_range: range outside the buffer");
        return NULL;
    }
    if (length == 0) {
        PyBuffer_Release(&buf);
        Py_RETURN_NONE;
    }
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)buf.buf + (uintptr_t)start) & ~(page - 1);
    uintptr_t hi = (uintptr_t)buf.buf + (uintptr_t)(start + length);
    int rc, err = 0;
    Py_BEGIN_ALLOW_THREADS
    rc = msync((void *)lo, (size_t)(hi - lo), MS_SYNC);
    if (rc != 0) err = errno;
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    if (rc == 0) Py_RETURN_NONE;
    errno = err;
    return PyErr_SetFromErrno(PyExc_OSError);
}
