/* broker_core.codec._native, Java's String.hashCode (twins in codec/hashing.py): java_hash_u32, index_key_hash, and
 * bc_java_hash_continue, which the index, dispatch and put loops hash tags and keys with. */
#include "_native.h"

/* ------------------------------------------------------------------ Java String.hashCode */
/* hashCode over the UTF-16 code units of s, continuing from h (so "topic#key" needs no concatenation). */
uint32_t bc_java_hash_continue(uint32_t h, PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *d = (const Py_UCS1 *)data;
        for (Py_ssize_t i = 0; i < n; i++) h = h * 31u + d[i];
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *d = (const Py_UCS2 *)data;
        for (Py_ssize_t i = 0; i < n; i++) h = h * 31u + d[i];
    } else {
        const Py_UCS4 *d = (const Py_UCS4 *)data;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 c = d[i];
            if (c >= 0x10000) {  /* a surrogate pair: two units */
                c -= 0x10000;
                h = h * 31u + (0xD800u + (c >> 10));
                h = h * 31u + (0xDC00u + (c & 0x3FFu));
            } else {
                h = h * 31u + c;
            }
        }
    }
    return h;
}

PyObject *bc_py_java_hash_u32(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "java_hash_u32 needs a str");
        return NULL;
    }
    return PyLong_FromUnsignedLong(bc_java_hash_continue(0, arg));
}

PyObject *bc_py_index_key_hash(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "index_key_hash needs a str");
        return NULL;
    }
    return PyLong_FromUnsignedLong(index_hash_of(bc_java_hash_continue(0, arg)));
}
