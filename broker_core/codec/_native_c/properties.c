/* broker_core.codec._native, message properties (twins in codec/message.py): decode_properties and
 * encode_properties (pairs name\x01value\x02), and what the record, batch and header loops share about them: a
 * strict UTF-8 check, the lookup of one property in the bytes, the string cache and the bytes-to-dict split. */
#include "_native.h"

/* ------------------------------------------------------------------ properties */
/* decode_properties(raw: bytes-like | str) -> dict[str, str] */
PyObject *bc_py_decode_properties(PyObject *self, PyObject *arg) {
    PyObject *text;
    if (PyUnicode_Check(arg)) {
        text = Py_NewRef(arg);
    } else {
        Py_buffer view;
        if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
        text = PyUnicode_DecodeUTF8((const char *)view.buf, view.len, NULL);
        PyBuffer_Release(&view);
        if (text == NULL) return NULL;
    }
    PyObject *out = PyDict_New();
    if (out == NULL) { Py_DECREF(text); return NULL; }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), start = 0;
    while (n > 0 && start <= n) {
        Py_ssize_t sep = PyUnicode_FindChar(text, 0x02, start, n, 1);
        if (sep == -2) goto fail;
        Py_ssize_t stop = sep < 0 ? n : sep;
        Py_ssize_t eq = stop > start ? PyUnicode_FindChar(text, 0x01, start, stop, 1) : -1;
        if (eq == -2) goto fail;
        if (eq >= 0) {
            PyObject *name = PyUnicode_Substring(text, start, eq);
            PyObject *value = name ? PyUnicode_Substring(text, eq + 1, stop) : NULL;
            int rc = value ? PyDict_SetItem(out, name, value) : -1;
            Py_XDECREF(name);
            Py_XDECREF(value);
            if (rc < 0) goto fail;
        }
        if (sep < 0) break;
        start = sep + 1;
    }
    Py_DECREF(text);
    return out;
fail:
    Py_DECREF(text);
    Py_DECREF(out);
    return NULL;
}

/* encode_properties(properties: dict | None) -> bytes: name\x01value\x02 ... (UTF-8) */
PyObject *bc_py_encode_properties(PyObject *self, PyObject *arg) {
    if (arg == Py_None || (PyDict_Check(arg) && PyDict_GET_SIZE(arg) == 0)) return PyBytes_FromStringAndSize("", 0);
    if (!PyDict_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "properties must be a dict");
        return NULL;
    }
    Py_ssize_t pos = 0, total = 0;
    PyObject *k, *v;
    /* two passes: sizes, then bytes; str() of non-str names and values, as the f-string does */
    Py_ssize_t n = PyDict_GET_SIZE(arg);
    PyObject *parts = PyList_New(0);
    if (parts == NULL) return NULL;
    while (PyDict_Next(arg, &pos, &k, &v)) {
        PyObject *ks = PyObject_Str(k), *vs = ks ? PyObject_Str(v) : NULL;
        if (vs == NULL) { Py_XDECREF(ks); Py_DECREF(parts); return NULL; }
        int rc = PyList_Append(parts, ks) < 0 || PyList_Append(parts, vs) < 0 ? -1 : 0;
        Py_DECREF(ks);
        Py_DECREF(vs);
        if (rc < 0) { Py_DECREF(parts); return NULL; }
    }
    (void)n;
    Py_ssize_t m = PyList_GET_SIZE(parts);
    const char **ptrs = PyMem_Malloc(sizeof(char *) * (size_t)(m ? m : 1));
    Py_ssize_t *lens = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(m ? m : 1));
    if (ptrs == NULL || lens == NULL) { PyMem_Free(ptrs); PyMem_Free(lens); Py_DECREF(parts); return PyErr_NoMemory(); }
    for (Py_ssize_t i = 0; i < m; i++) {
        ptrs[i] = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(parts, i), &lens[i]);
        if (ptrs[i] == NULL) { PyMem_Free(ptrs); PyMem_Free(lens); Py_DECREF(parts); return NULL; }
        total += lens[i] + 1;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out != NULL) {
        char *w = PyBytes_AS_STRING(out);
        for (Py_ssize_t i = 0; i < m; i++) {
            memcpy(w, ptrs[i], (size_t)lens[i]);
            w += lens[i];
            *w++ = (i & 1) ? 0x02 : 0x01;
        }
    }
    PyMem_Free(ptrs);
    PyMem_Free(lens);
    Py_DECREF(parts);
    return out;
}

/* Whether p[0:n] is UTF-8 as Python's strict decoder accepts it (no overlongs, surrogates or > U+10FFFF). */
int bc_utf8_valid(const unsigned char *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) { i++; continue; }
        int len;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
        else return 0;
        if (i + len > n) return 0;
        for (int k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += len;
    }
    return 1;
}

/* The value of the last `name` pair in UTF-8 properties (pairs name\x01value\x02), or NULL when absent.
 * (The last one wins, as a dict built from the pairs.) */
PyObject *bc_find_property(const unsigned char *p, Py_ssize_t n, const char *name, Py_ssize_t name_len) {
    const unsigned char *found = NULL;
    Py_ssize_t found_len = 0, i = 0;
    while (i < n) {
        Py_ssize_t j = i;
        while (j < n && p[j] != 0x02) j++;
        /* pair [i, j) */
        if (j - i >= name_len + 1 && memcmp(p + i, name, (size_t)name_len) == 0 && p[i + name_len] == 0x01) {
            found = p + i + name_len + 1;
            found_len = j - i - name_len - 1;
        }
        i = j + 1;
    }
    if (found == NULL) return NULL;
    return PyUnicode_DecodeUTF8((const char *)found, found_len, NULL);
}

/* Strings seen again and again in pulled properties (names, and values such as CLUSTER's or WAIT's), kept
 * so that a pull of a thousand records does not build a thousand equal strings: a small direct-mapped cache
 * keyed by the bytes. Entries hold a reference; only exact byte matches are reused (str objects are
 * immutable, so sharing one is invisible to callers). */
#define STR_CACHE_SIZE 64
#define STR_CACHE_MAX_LEN 48
static struct { Py_ssize_t len; char bytes[STR_CACHE_MAX_LEN]; PyObject *str; } str_cache[STR_CACHE_SIZE];

PyObject *bc_cached_utf8(const unsigned char *p, Py_ssize_t n) {
    if (n > STR_CACHE_MAX_LEN) return PyUnicode_DecodeUTF8((const char *)p, n, NULL);
    uint32_t h = (uint32_t)n * 2654435761u;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    unsigned slot = (h >> 7) % STR_CACHE_SIZE;
    if (str_cache[slot].str != NULL && str_cache[slot].len == n && memcmp(str_cache[slot].bytes, p, (size_t)n) == 0)
        return Py_NewRef(str_cache[slot].str);
    PyObject *s = PyUnicode_DecodeUTF8((const char *)p, n, NULL);
    if (s == NULL) return NULL;
    Py_XSETREF(str_cache[slot].str, Py_NewRef(s));
    str_cache[slot].len = n;
    memcpy(str_cache[slot].bytes, p, (size_t)n);
    return s;
}

/* Properties bytes (UTF-8) to a dict, as decode_properties: pairs name\x01value\x02, the last of a name wins,
 * a pair without \x01 skipped. Split on the bytes (0x01 and 0x02 never occur inside a UTF-8 sequence), so
 * valid UTF-8 gives the same dict as decoding first; anything else goes through decode_properties for its
 * error. Values of a UNIQ_KEY (unique per message) are not cached. */
PyObject *bc_properties_dict(const unsigned char *p, Py_ssize_t n) {
    if (n == 0) return PyDict_New();
    if (!bc_utf8_valid(p, n)) {
        PyObject *bytes = PyBytes_FromStringAndSize((const char *)p, n);
        if (bytes == NULL) return NULL;
        PyObject *d = bc_py_decode_properties(NULL, bytes);
        Py_DECREF(bytes);
        return d;
    }
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    Py_ssize_t start = 0;
    while (start <= n) {
        const unsigned char *sepp = memchr(p + start, 0x02, (size_t)(n - start));
        Py_ssize_t stop = sepp ? sepp - p : n;
        const unsigned char *eqp = stop > start ? memchr(p + start, 0x01, (size_t)(stop - start)) : NULL;
        if (eqp != NULL) {
            Py_ssize_t eq = eqp - p;
            PyObject *name = bc_cached_utf8(p + start, eq - start);
            int uniq = (eq - start == 8 && memcmp(p + start, "UNIQ_KEY", 8) == 0);
            PyObject *value = name == NULL ? NULL : uniq
                ? PyUnicode_DecodeUTF8((const char *)p + eq + 1, stop - eq - 1, NULL)
                : bc_cached_utf8(p + eq + 1, stop - eq - 1);
            int rc = value ? PyDict_SetItem(out, name, value) : -1;
            Py_XDECREF(name);
            Py_XDECREF(value);
            if (rc < 0) { Py_DECREF(out); return NULL; }
        }
        if (sepp == NULL) break;
        start = stop + 1;
    }
    return out;
}
