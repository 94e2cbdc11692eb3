/* broker_core.codec._native: the codec's once-per-message loops in C (CPython API, no other library).
 *
 * Every function here has a pure-Python twin of the same name in broker_core/codec (the reference: the
 * layouts are documented there) and must return equal results and raise the same exception types for the
 * same input; tests/unit/codec/test_native.py checks that with hypothesis. broker_core/codec/native.py
 * decides which one runs (BROKER_CORE_PURE_PYTHON=1 selects the pure ones).
 *
 * Buffers are read through the buffer protocol (bytes, bytearray, memoryview, mmap) and never kept past
 * the call. Integers in the formats are big-endian. Nothing here allocates per byte or releases the GIL:
 * every function is short and runs on the caller's thread. One exception, not a codec loop: populate_write
 * (the store's page prefaulting, store/pages.py) releases the GIL around one madvise call, holding the buffer
 * (an mmap cannot be closed while it is exported). Another: BytesReceiver (the SDK's blocking transport,
 * remoting/receive.py) receives a large frame's parts from a socket straight into new bytes objects, the GIL
 * released while recv waits. put_single (the store's one-message put, codec/message_append.py) is not a loop over
 * bytes either: it reads and writes the CommitLog's attributes by name, takes its lock without waiting, and calls
 * back into Python for the prefault request and the dispatcher's hook, holding the GIL throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <limits.h>
#include <time.h>
#if defined(__linux__) && !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23  /* Linux 5.14+; older kernels answer EINVAL */
#endif

static PyObject *CodecError;   /* broker_core.codec.errors.CodecError(message, source, position) */
static PyObject *crc32_func;   /* isal.isal_zlib.crc32, else zlib.crc32 (the module's CRC32 names which) */
static const char *crc32_name;
static PyObject *empty_str;   /* "" */

/* ------------------------------------------------------------------ big-endian helpers */
static inline int32_t rd_i32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}
static inline uint32_t rd_u32(const unsigned char *p) { return (uint32_t)rd_i32(p); }
static inline int16_t rd_i16(const unsigned char *p) { return (int16_t)(((uint16_t)p[0] << 8) | p[1]); }
static inline uint16_t rd_u16(const unsigned char *p) { return (uint16_t)(((uint16_t)p[0] << 8) | p[1]); }
static inline int64_t rd_i64(const unsigned char *p) {
    return (int64_t)(((uint64_t)rd_u32(p) << 32) | rd_u32(p + 4));
}
static inline void wr_i32(unsigned char *p, int64_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)(u >> 24); p[1] = (unsigned char)(u >> 16); p[2] = (unsigned char)(u >> 8);
    p[3] = (unsigned char)u;
}
static inline void wr_i16(unsigned char *p, int64_t v) {
    uint16_t u = (uint16_t)v;
    p[0] = (unsigned char)(u >> 8); p[1] = (unsigned char)u;
}
static inline void wr_i64(unsigned char *p, int64_t v) {
    wr_i32(p, (int64_t)((uint64_t)v >> 32));
    wr_i32(p + 4, (int64_t)(uint32_t)v);
}

static PyObject *codec_error(const char *source, Py_ssize_t pos, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (msg == NULL) return NULL;
    PyObject *exc;
    if (source == NULL)
        exc = PyObject_CallFunction(CodecError, "OOn", msg, Py_None, pos);
    else
        exc = PyObject_CallFunction(CodecError, "Osn", msg, source, pos);
    Py_DECREF(msg);
    if (exc != NULL) {
        PyErr_SetObject(CodecError, exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* ------------------------------------------------------------------ Java String.hashCode */
/* hashCode over the UTF-16 code units of s, continuing from h (so "topic#key" needs no concatenation). */
static uint32_t java_hash_continue(uint32_t h, PyObject *s) {
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

static inline uint32_t index_hash_of(uint32_t h) {
    /* abs(int) as Java; abs(Integer.MIN_VALUE) is negative and RocketMQ stores 0 for it */
    if (h & 0x80000000u) {
        h = 0u - h;
        if (h == 0x80000000u) return 0;
    }
    return h;
}

static PyObject *py_java_hash_u32(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "java_hash_u32 needs a str");
        return NULL;
    }
    return PyLong_FromUnsignedLong(java_hash_continue(0, arg));
}

static PyObject *py_index_key_hash(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "index_key_hash needs a str");
        return NULL;
    }
    return PyLong_FromUnsignedLong(index_hash_of(java_hash_continue(0, arg)));
}

/* ------------------------------------------------------------------ IndexFile */
#define TRANSACTION_TYPE_MASK (0x3 << 2)
#define TRANSACTION_ROLLBACK_TYPE (0x3 << 2)

static int append_entry(PyObject *out, uint32_t h, PyObject *phy, PyObject *ts) {
    PyObject *hv = PyLong_FromUnsignedLong(h);
    if (hv == NULL) return -1;
    PyObject *t = PyTuple_Pack(3, hv, phy, ts);
    Py_DECREF(hv);
    if (t == NULL) return -1;
    int rc = PyList_Append(out, t);
    Py_DECREF(t);
    return rc;
}

/* index_entries(batch, last_phy) -> (entries, last_phy): see codec/index_file.py */
static PyObject *py_index_entries(PyObject *self, PyObject *args) {
    PyObject *batch;
    long long last;
    if (!PyArg_ParseTuple(args, "OL", &batch, &last)) return NULL;
    PyObject *seq = PySequence_Fast(batch, "batch must be a sequence");
    if (seq == NULL) return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) { Py_DECREF(seq); return NULL; }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = items[i];
        if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) != 10) {
            PyErr_SetString(PyExc_TypeError, "a dispatch entry is a 10-tuple");
            goto fail;
        }
        PyObject *phy_o = PyTuple_GET_ITEM(d, 0), *topic = PyTuple_GET_ITEM(d, 2), *ts = PyTuple_GET_ITEM(d, 6);
        PyObject *keys = PyTuple_GET_ITEM(d, 7), *uniq = PyTuple_GET_ITEM(d, 8);
        long long phy = PyLong_AsLongLong(phy_o);
        long long sys_flag = PyLong_AsLongLong(PyTuple_GET_ITEM(d, 9));
        if (PyErr_Occurred()) goto fail;
        if (phy <= last || (sys_flag & TRANSACTION_TYPE_MASK) == TRANSACTION_ROLLBACK_TYPE) continue;
        if (!PyUnicode_Check(topic)) { PyErr_SetString(PyExc_TypeError, "topic must be a str"); goto fail; }
        uint32_t th = java_hash_continue(0, topic) * 31u + '#';
        if (uniq != Py_None && PyObject_IsTrue(uniq)) {
            if (!PyUnicode_Check(uniq)) { PyErr_SetString(PyExc_TypeError, "uniq key must be a str"); goto fail; }
            if (append_entry(out, index_hash_of(java_hash_continue(th, uniq)), phy_o, ts) < 0) goto fail;
        }
        if (keys != Py_None && PyObject_IsTrue(keys)) {
            if (!PyUnicode_Check(keys)) { PyErr_SetString(PyExc_TypeError, "keys must be a str"); goto fail; }
            Py_ssize_t klen = PyUnicode_GET_LENGTH(keys), start = 0;
            while (start <= klen) {
                Py_ssize_t sp = klen > start ? PyUnicode_FindChar(keys, ' ', start, klen, 1) : -1;
                if (sp == -2) goto fail;
                Py_ssize_t stop = sp < 0 ? klen : sp;
                if (stop > start) {
                    PyObject *key = PyUnicode_Substring(keys, start, stop);
                    if (key == NULL) goto fail;
                    uint32_t h = index_hash_of(java_hash_continue(th, key));
                    Py_DECREF(key);
                    if (append_entry(out, h, phy_o, ts) < 0) goto fail;
                }
                if (sp < 0) break;
                start = sp + 1;
            }
        }
        last = phy;
    }
    Py_DECREF(seq);
    PyObject *res = Py_BuildValue("(NL)", out, last);
    return res;
fail:
    Py_DECREF(seq);
    Py_DECREF(out);
    return NULL;
}

#define INDEX_HEADER_SIZE 40
#define INDEX_ENTRY_SIZE 20
#define INVALID_INDEX 0
#define INT_MAX_32 2147483647LL

/* index_put(buf, slots, index_num, count, used, begin_ts, begin_phy, entries, start)
 *   -> (next, count, used, begin_ts, begin_phy): see codec/index_file.py put_entries */
static PyObject *py_index_put(PyObject *self, PyObject *args) {
    Py_buffer view;
    long long slots, limit, count, used, begin, begin_phy;
    PyObject *entries;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "w*LLLLLLOn", &view, &slots, &limit, &count, &used, &begin, &begin_phy,
                          &entries, &start))
        return NULL;
    PyObject *seq = PySequence_Fast(entries, "entries must be a sequence");
    if (seq == NULL) { PyBuffer_Release(&view); return NULL; }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    unsigned char *buf = (unsigned char *)view.buf;
    long long base = INDEX_HEADER_SIZE + slots * 4;
    Py_ssize_t i = start;
    if (slots <= 0 || view.len < base + limit * INDEX_ENTRY_SIZE) {
        PyErr_SetString(PyExc_ValueError, "index buffer smaller than its slots and entries");
        goto fail;
    }
    while (i < n && count < limit) {
        PyObject *e = items[i];
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 3) {
            PyErr_SetString(PyExc_TypeError, "an index entry is (key_hash, phy_offset, store_timestamp)");
            goto fail;
        }
        long long key_hash = PyLong_AsLongLong(PyTuple_GET_ITEM(e, 0));
        long long phy = PyLong_AsLongLong(PyTuple_GET_ITEM(e, 1));
        long long ts = PyLong_AsLongLong(PyTuple_GET_ITEM(e, 2));
        if (PyErr_Occurred()) goto fail;
        long long slot = key_hash % slots;
        if (slot < 0) slot += slots;  /* Python's modulo */
        unsigned char *slot_p = buf + INDEX_HEADER_SIZE + slot * 4;
        long long prev = rd_i32(slot_p);
        if (prev <= INVALID_INDEX || prev > count) {
            prev = INVALID_INDEX;
            used += 1;
        }
        if (count <= 1) {
            begin_phy = phy;
            begin = ts;
        }
        long long diff = 0;
        if (begin > 0) {
            long long d = ts - begin;
            diff = d >= 0 ? d / 1000 : -((-d + 999) / 1000);  /* floor division, as Python's // */
        }
        if (diff < 0) diff = 0;
        else if (diff > INT_MAX_32) diff = INT_MAX_32;
        unsigned char *ep = buf + base + count * INDEX_ENTRY_SIZE;
        wr_i32(ep, key_hash);
        wr_i64(ep + 4, phy);
        wr_i32(ep + 12, diff);
        wr_i32(ep + 16, prev);
        wr_i32(slot_p, count);
        count += 1;
        i += 1;
    }
    Py_DECREF(seq);
    PyBuffer_Release(&view);
    return Py_BuildValue("(nLLLL)", i, count, used, begin, begin_phy);
fail:
    Py_DECREF(seq);
    PyBuffer_Release(&view);
    return NULL;
}

/* ------------------------------------------------------------------ properties */
/* decode_properties(raw: bytes-like | str) -> dict[str, str] */
static PyObject *py_decode_properties(PyObject *self, PyObject *arg) {
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
static PyObject *py_encode_properties(PyObject *self, PyObject *arg) {
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

/* ------------------------------------------------------------------ message batch */
#define BATCH_ENTRY_HEAD 20
/* decode_batch(buf, max_entries=1<<20) -> list[(flag, body, props)] */
static PyObject *py_decode_batch(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"buf", "max_entries", NULL};
    Py_buffer view;
    Py_ssize_t max_entries = (Py_ssize_t)1 << 20;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|n", kwlist, &view, &max_entries)) return NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len, pos = 0;
    PyObject *out = PyList_New(0);
    if (out == NULL) { PyBuffer_Release(&view); return NULL; }
    while (pos < end) {
        if (end - pos < BATCH_ENTRY_HEAD + 2) { codec_error("batch", pos, "truncated batch entry head"); goto fail; }
        int32_t flag = rd_i32(b + pos + 12), blen = rd_i32(b + pos + 16);
        Py_ssize_t body_at = pos + BATCH_ENTRY_HEAD;
        if (blen < 0 || body_at + blen + 2 > end) {
            codec_error("batch", pos, "bad batch entry: body length %d runs past the batch", (int)blen);
            goto fail;
        }
        int16_t plen = rd_i16(b + body_at + blen);
        Py_ssize_t props_at = body_at + blen + 2;
        if (plen < 0 || props_at + plen > end) {
            codec_error("batch", pos, "bad batch entry: properties length %d runs past the batch", (int)plen);
            goto fail;
        }
        PyObject *t = Py_BuildValue("(iy#y#)", (int)flag, (const char *)b + body_at, (Py_ssize_t)blen,
                                    (const char *)b + props_at, (Py_ssize_t)plen);
        if (t == NULL || PyList_Append(out, t) < 0) { Py_XDECREF(t); goto fail; }
        Py_DECREF(t);
        if (PyList_GET_SIZE(out) > max_entries) {
            codec_error("batch", pos, "batch holds more than %zd messages", max_entries);
            goto fail;
        }
        pos = props_at + plen;
    }
    PyBuffer_Release(&view);
    return out;
fail:
    PyBuffer_Release(&view);
    Py_DECREF(out);
    return NULL;
}

/* ------------------------------------------------------------------ CommitLog records */
#define HEADER_SIZE 88
#define FIXED_OVERHEAD 91
#define MESSAGE_MAGIC_CODE 0xDAA320A7u
#define BLANK_MAGIC_CODE 0xCBD43194u

/* The record at b[pos:end] laid out as a whole: 0 with its total size, body length and topic length, or -1
 * with the CodecError the pure walk raises. */
static int record_layout(const unsigned char *b, Py_ssize_t pos, Py_ssize_t end, const char *source,
                         int32_t *total_out, int32_t *blen_out, Py_ssize_t *tlen_out) {
    const unsigned char *p = b + pos;
    int32_t total = rd_i32(p);
    uint32_t magic = rd_u32(p + 4);
    if (magic != MESSAGE_MAGIC_CODE || total < FIXED_OVERHEAD || pos + total > end) {
        char hex[16];
        snprintf(hex, sizeof hex, "%08X", (unsigned int)magic);
        codec_error(source, pos, "bad record (magic 0x%s, size %d)", hex, (int)total);
        return -1;
    }
    int32_t blen = rd_i32(p + 84);
    if (blen < 0 || HEADER_SIZE + (Py_ssize_t)blen + 3 > total) {
        codec_error(source, pos, "bad record (body length %d, size %d)", (int)blen, (int)total);
        return -1;
    }
    Py_ssize_t tlen = p[HEADER_SIZE + blen];
    if (HEADER_SIZE + blen + 1 + tlen + 2 > total) {
        codec_error(source, pos, "bad record (topic length %zd, size %d)", tlen, (int)total);
        return -1;
    }
    *total_out = total;
    *blen_out = blen;
    *tlen_out = tlen;
    return 0;
}

static PyObject *zlib_decompress;  /* zlib.decompress */
static PyObject *zlib_error;       /* zlib.error */

static int utf8_valid(const unsigned char *p, Py_ssize_t n);

/* Strings seen again and again in pulled properties (names, and values such as CLUSTER's or WAIT's), kept
 * so that a pull of a thousand records does not build a thousand equal strings: a small direct-mapped cache
 * keyed by the bytes. Entries hold a reference; only exact byte matches are reused (str objects are
 * immutable, so sharing one is invisible to callers). */
#define STR_CACHE_SIZE 64
#define STR_CACHE_MAX_LEN 48
static struct { Py_ssize_t len; char bytes[STR_CACHE_MAX_LEN]; PyObject *str; } str_cache[STR_CACHE_SIZE];

static PyObject *cached_utf8(const unsigned char *p, Py_ssize_t n) {
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
static PyObject *properties_dict(const unsigned char *p, Py_ssize_t n) {
    if (n == 0) return PyDict_New();
    if (!utf8_valid(p, n)) {
        PyObject *bytes = PyBytes_FromStringAndSize((const char *)p, n);
        if (bytes == NULL) return NULL;
        PyObject *d = py_decode_properties(NULL, bytes);
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
            PyObject *name = cached_utf8(p + start, eq - start);
            int uniq = (eq - start == 8 && memcmp(p + start, "UNIQ_KEY", 8) == 0);
            PyObject *value = name == NULL ? NULL : uniq
                ? PyUnicode_DecodeUTF8((const char *)p + eq + 1, stop - eq - 1, NULL)
                : cached_utf8(p + eq + 1, stop - eq - 1);
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

/* A factory class may name, in its ``__native_slots__``, the 13 slots the factory's arguments go to (in
 * argument order) followed by the slot given ``properties.get("UNIQ_KEY")`` and any further slots set to
 * None: then decode_pulled allocates the object and fills those slots directly, as its __init__ would
 * (without running it). The class's own tests prove both ways give equal objects. Offsets are looked up once
 * per class (the member descriptors of its __slots__) and kept while that class object lives. */
#define NATIVE_SLOTS_MAX 20
#define SLOTMAP_MAX 24
/* Slot access shared by decode_pulled (filling a factory's slots) and the put loop (reading a message's fields,
 * filling a result's). A SlotMap holds, for one exact class, the offsets of the member descriptors its attribute
 * lookup finds for the names: reading an offset is what that lookup returns (a member descriptor is a data
 * descriptor, so an instance __dict__ of a subclass cannot shadow it). A slot that is unset reads NULL: the caller
 * then asks by name (and gets the AttributeError). A class whose names do not all resolve to writable object slots
 * is mapped as not usable (the caller asks by name, calls the class, or refuses it). */
typedef struct { PyTypeObject *tp; int usable; Py_ssize_t off[SLOTMAP_MAX]; } SlotMap;
/* The map for `tp` (remapped when another class comes): 1 usable, 0 not, -1 error */
static int slot_map_for(SlotMap *m, PyTypeObject *tp, PyObject *const *names, int n) {
    if (m->tp == tp) return m->usable;
    int usable = n <= SLOTMAP_MAX;
    Py_ssize_t off[SLOTMAP_MAX];
    for (int i = 0; i < n && usable; i++) {
        PyObject *descr = PyObject_GetAttr((PyObject *)tp, names[i]);
        if (descr == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear();
            usable = 0;
            break;
        }
        if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            PyMemberDef *def = ((PyMemberDescrObject *)descr)->d_member;
            usable = def->type == T_OBJECT_EX && !(def->flags & READONLY);
            off[i] = def->offset;
        } else {
            usable = 0;
        }
        Py_DECREF(descr);
    }
    Py_XSETREF(m->tp, (PyTypeObject *)Py_NewRef((PyObject *)tp));
    m->usable = usable;
    if (usable) memcpy(m->off, off, sizeof(off[0]) * (size_t)n);
    return usable;
}

static SlotMap pulled_map;  /* decode_pulled's factory: the names of its __native_slots__, in that order */
static Py_ssize_t pulled_count;  /* how many names */
static PyObject *uniq_key_str;
static PyObject *native_slots_str;  /* "__native_slots__" */

/* 1 with the offsets ready for `factory`, 0 when it has no usable __native_slots__ (call it instead), -1 error */
static int native_slots_for(PyObject *factory) {
    if (!PyType_Check(factory)) return 0;
    PyTypeObject *tp = (PyTypeObject *)factory;
    if (tp == pulled_map.tp && pulled_map.usable) return 1;
    PyObject *names = PyDict_GetItemWithError(tp->tp_dict, native_slots_str);  /* borrowed; own dict only */
    if (names == NULL && PyErr_Occurred()) return -1;
    if (names == NULL || !PyTuple_Check(names)) return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    if (n < 14 || n > NATIVE_SLOTS_MAX || tp->tp_alloc == NULL || tp->tp_new == NULL) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i))) return 0;
    }
    int usable = slot_map_for(&pulled_map, tp, &PyTuple_GET_ITEM(names, 0), (int)n);
    pulled_count = n;
    if (usable == 0) {
        PyErr_Format(PyExc_TypeError, "%s.__native_slots__ names a field that is not a writable slot", tp->tp_name);
        return -1;
    }
    return usable;
}

/* A new instance of pulled_map's class with argv[0:13] (new references or borrowed, see `owned`) in its slots. */
static PyObject *fill_slots(PyObject *const *argv, PyObject *props) {
    PyTypeObject *tp = pulled_map.tp;
    PyObject *obj = tp->tp_alloc(tp, 0);
    if (obj == NULL) return NULL;
    char *base = (char *)obj;
    for (int i = 0; i < 13; i++) *(PyObject **)(base + pulled_map.off[i]) = Py_NewRef(argv[i]);
    PyObject *uniq = PyDict_GetItemWithError(props, uniq_key_str);  /* borrowed */
    if (uniq == NULL && PyErr_Occurred()) { Py_DECREF(obj); return NULL; }
    *(PyObject **)(base + pulled_map.off[13]) = Py_NewRef(uniq ? uniq : Py_None);
    for (Py_ssize_t i = 14; i < pulled_count; i++) *(PyObject **)(base + pulled_map.off[i]) = Py_NewRef(Py_None);
    /* Every slot holds an atomic value, a tuple of them or a dict of str: nothing a cycle can run through, so
     * the object is left out of the cycle collector (as CPython does for such tuples and dicts), which
     * otherwise walks every message a consumer keeps, again and again. A cycle a caller builds through one
     * (a message put in its own properties) is not collected. */
    if (PyObject_GC_IsTracked(obj)) PyObject_GC_UnTrack(obj);
    return obj;
}

/* decode_pulled(buf, source, factory, broker_name) -> list: see codec/records.py */
static PyObject *py_decode_pulled(PyObject *self, PyObject *args) {
    Py_buffer view;
    const char *source;
    PyObject *factory, *broker;
    if (!PyArg_ParseTuple(args, "y*sOO", &view, &source, &factory, &broker)) return NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len, pos = 0;
    PyObject *out = PyList_New(0);
    PyObject *last_topic = NULL, *last_store = NULL, *last_born = NULL;  /* reused while unchanged */
    const unsigned char *last_topic_p = NULL, *last_store_p = NULL, *last_born_p = NULL;
    Py_ssize_t last_topic_len = -1;
    if (out == NULL) { PyBuffer_Release(&view); return NULL; }
    /* First the layout and the topics of every record, then the bodies and properties: errors come in the
     * order of the pure twin (a walk over all records, then decoding). */
    while (pos + HEADER_SIZE <= end) {
        const unsigned char *p = b + pos;
        int32_t total, blen;
        Py_ssize_t tlen;
        if (record_layout(b, pos, end, source, &total, &blen, &tlen) < 0) goto fail;
        const unsigned char *tp = p + HEADER_SIZE + blen + 1;
        if (last_topic == NULL || tlen != last_topic_len || memcmp(tp, last_topic_p, (size_t)tlen) != 0) {
            Py_XDECREF(last_topic);
            last_topic = PyUnicode_DecodeUTF8((const char *)tp, tlen, NULL);
            if (last_topic == NULL) goto fail;
            last_topic_p = tp;
            last_topic_len = tlen;
        }
        pos += total;
    }
    Py_ssize_t valid_end = pos;
    pos = 0;
    Py_CLEAR(last_topic);
    int fast = valid_end > 0 ? native_slots_for(factory) : 0;
    if (fast < 0) goto fail;
    while (pos < valid_end) {
        const unsigned char *p = b + pos;
        int32_t total = rd_i32(p);
        int32_t blen = rd_i32(p + 84);
        Py_ssize_t q = HEADER_SIZE + blen;
        Py_ssize_t tlen = p[q];
        int32_t sys_flag = rd_i32(p + 36);
        long long phy = rd_i64(p + 28);
        PyObject *body = PyBytes_FromStringAndSize((const char *)p + HEADER_SIZE, blen);
        if (body == NULL) goto fail;
        if (sys_flag & 0x1) {  /* COMPRESSED_FLAG */
            PyObject *inflated = PyObject_CallOneArg(zlib_decompress, body);
            Py_DECREF(body);
            if (inflated == NULL) {
                if (!PyErr_ExceptionMatches(zlib_error)) goto fail;
                PyObject *et, *ev, *tb;
                PyErr_Fetch(&et, &ev, &tb);
                PyErr_NormalizeException(&et, &ev, &tb);
                PyObject *why = ev ? PyObject_Str(ev) : NULL;
                Py_XDECREF(et); Py_XDECREF(ev); Py_XDECREF(tb);
                if (why == NULL) goto fail;
                codec_error(source, (Py_ssize_t)phy, "compressed body does not inflate: %U", why);
                Py_DECREF(why);
                goto fail;
            }
            body = inflated;
        }
        const unsigned char *tp = p + q + 1;
        if (last_topic == NULL || tlen != last_topic_len || memcmp(tp, last_topic_p, (size_t)tlen) != 0) {
            Py_XDECREF(last_topic);
            last_topic = PyUnicode_DecodeUTF8((const char *)tp, tlen, NULL);
            if (last_topic == NULL) { Py_DECREF(body); goto fail; }
            last_topic_p = tp;
            last_topic_len = tlen;
        }
        if (last_born == NULL || memcmp(p + 48, last_born_p, 8) != 0) {
            Py_XDECREF(last_born);
            last_born = Py_BuildValue("(y#i)", (const char *)p + 48, (Py_ssize_t)4, (int)rd_i32(p + 52));
            if (last_born == NULL) { Py_DECREF(body); goto fail; }
            PyObject_GC_UnTrack(last_born);  /* bytes and int: as the collector would on its first pass */
            last_born_p = p + 48;
        }
        if (last_store == NULL || memcmp(p + 64, last_store_p, 8) != 0) {
            Py_XDECREF(last_store);
            last_store = Py_BuildValue("(y#i)", (const char *)p + 64, (Py_ssize_t)4, (int)rd_i32(p + 68));
            if (last_store == NULL) { Py_DECREF(body); goto fail; }
            PyObject_GC_UnTrack(last_store);
            last_store_p = p + 64;
        }
        Py_ssize_t pstart = q + 3 + tlen;
        PyObject *props = properties_dict(p + pstart, total - pstart);
        if (props == NULL) { Py_DECREF(body); goto fail; }
        PyObject *argv[13];
        argv[0] = last_topic;
        argv[1] = body;
        argv[2] = PyLong_FromLong(rd_i32(p + 12));
        argv[3] = PyLong_FromLongLong(rd_i64(p + 20));
        argv[4] = PyLong_FromLongLong(phy);
        argv[5] = PyLong_FromLongLong(rd_i64(p + 40));
        argv[6] = PyLong_FromLongLong(rd_i64(p + 56));
        argv[7] = last_born;
        argv[8] = last_store;
        argv[9] = PyLong_FromLong(rd_i32(p + 72));
        argv[10] = broker;
        argv[11] = props;
        argv[12] = PyLong_FromLong(sys_flag);
        PyObject *m = NULL;
        if (argv[2] && argv[3] && argv[4] && argv[5] && argv[6] && argv[9] && argv[12])
            m = fast ? fill_slots(argv, props) : PyObject_Vectorcall(factory, argv, 13, NULL);
        Py_DECREF(body);
        Py_DECREF(props);
        Py_XDECREF(argv[2]); Py_XDECREF(argv[3]); Py_XDECREF(argv[4]); Py_XDECREF(argv[5]); Py_XDECREF(argv[6]);
        Py_XDECREF(argv[9]); Py_XDECREF(argv[12]);
        if (m == NULL || PyList_Append(out, m) < 0) { Py_XDECREF(m); goto fail; }
        Py_DECREF(m);
        pos += total;
    }
    Py_XDECREF(last_topic); Py_XDECREF(last_born); Py_XDECREF(last_store);
    PyBuffer_Release(&view);
    return out;
fail:
    Py_XDECREF(last_topic); Py_XDECREF(last_born); Py_XDECREF(last_store);
    PyBuffer_Release(&view);
    Py_DECREF(out);
    return NULL;
}

/* RocketMQ's masked CRC, or the full CRC this product wrote before it matched RocketMQ */
/* zlib's CRC-32 of body[0:blen] into *out (0, or -1 with an exception set). */
static int body_crc32(const unsigned char *body, Py_ssize_t blen, uint32_t *out) {
    PyObject *mv = PyMemoryView_FromMemory((char *)body, blen, PyBUF_READ);
    if (mv == NULL) return -1;
    PyObject *c = PyObject_CallOneArg(crc32_func, mv);
    Py_DECREF(mv);
    if (c == NULL) return -1;
    unsigned long v = PyLong_AsUnsignedLong(c);
    Py_DECREF(c);
    if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
    *out = (uint32_t)v;
    return 0;
}

static int crc_ok(const unsigned char *body, Py_ssize_t blen, uint32_t stored) {
    uint32_t v;
    if (body_crc32(body, blen, &v) < 0) return -1;
    return stored == (v & 0x7FFFFFFFu) || stored == v;
}

/* scan_records(buf, pos, limit, check_crc=True) -> (end, why): see codec/message.py */
static PyObject *py_scan_records(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"buf", "pos", "limit", "check_crc", NULL};
    Py_buffer view;
    Py_ssize_t pos, limit;
    int check_crc = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*nn|p", kwlist, &view, &pos, &limit, &check_crc)) return NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    if (limit > view.len) limit = view.len;  /* the pure twin would raise on reading past the buffer */
    PyObject *res = NULL;
    for (;;) {
        if (pos < 0 || pos + 8 > limit) { res = Py_BuildValue("(ns)", pos, "limit"); break; }
        const unsigned char *p = b + pos;
        int32_t total = rd_i32(p);
        uint32_t magic = rd_u32(p + 4);
        if (magic == MESSAGE_MAGIC_CODE) {
            if (total < FIXED_OVERHEAD || pos + total > limit) {
                res = PyUnicode_FromFormat("truncated record of size %d", (int)total);
                res = res ? Py_BuildValue("(nN)", pos, res) : NULL;
                break;
            }
            int32_t blen = rd_i32(p + 84);
            if (blen < 0 || HEADER_SIZE + (Py_ssize_t)blen + 3 > total) {
                res = PyUnicode_FromFormat("inconsistent body length %d", (int)blen);
                res = res ? Py_BuildValue("(nN)", pos, res) : NULL;
                break;
            }
            Py_ssize_t tp = HEADER_SIZE + blen;
            Py_ssize_t pp = tp + 1 + p[tp];
            if (pp + 2 > total || pp + 2 + rd_u16(p + pp) != total) {
                res = Py_BuildValue("(ns)", pos, "inconsistent topic or properties length");
                break;
            }
            if (check_crc) {
                int ok = crc_ok(p + HEADER_SIZE, blen, rd_u32(p + 8));
                if (ok < 0) break;
                if (!ok) { res = Py_BuildValue("(ns)", pos, "body CRC mismatch"); break; }
            }
            pos += total;
        } else if (magic == BLANK_MAGIC_CODE) {
            res = Py_BuildValue("(ns)", pos, "blank");
            break;
        } else if (total == 0 && magic == 0) {
            res = Py_BuildValue("(ns)", pos, "end of data");
            break;
        } else {
            char hex[16];
            snprintf(hex, sizeof hex, "%08X", (unsigned int)magic);
            res = PyUnicode_FromFormat("bad magic code 0x%s", hex);
            res = res ? Py_BuildValue("(nN)", pos, res) : NULL;
            break;
        }
    }
    PyBuffer_Release(&view);
    return res;
}

/* ------------------------------------------------------------------ batch append (the store's batch put) */
static inline void put_i64(unsigned char *p, long long v) { wr_i64(p, v); }

/* Whether p[0:n] is UTF-8 as Python's strict decoder accepts it (no overlongs, surrogates or > U+10FFFF). */
static int utf8_valid(const unsigned char *p, Py_ssize_t n) {
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
static PyObject *find_property(const unsigned char *p, Py_ssize_t n, const char *name, Py_ssize_t name_len) {
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

/* A record's 88-byte header (codec/message.py HEADER), hosts given as their 4 bytes. */
static void write_record_header(unsigned char *r, long long total, uint32_t crc, long long queue_id, long long flag,
                                long long qoff, long long phy, long long sys_flag, long long born_ts,
                                const unsigned char *born_host, long long born_port, long long store_ts,
                                const unsigned char *store_host, long long store_port, long long reconsume,
                                long long prepared, long long blen) {
    wr_i32(r, total);
    wr_i32(r + 4, (int32_t)MESSAGE_MAGIC_CODE);
    wr_i32(r + 8, (int64_t)(crc & 0x7FFFFFFFu));
    wr_i32(r + 12, queue_id);
    wr_i32(r + 16, flag);
    put_i64(r + 20, qoff);
    put_i64(r + 28, phy);
    wr_i32(r + 36, sys_flag);
    put_i64(r + 40, born_ts);
    memcpy(r + 48, born_host, 4);
    wr_i32(r + 52, born_port);
    put_i64(r + 56, store_ts);
    memcpy(r + 64, store_host, 4);
    wr_i32(r + 68, store_port);
    wr_i32(r + 72, reconsume);
    put_i64(r + 76, prepared);
    wr_i32(r + 84, blen);
}

/* append_batch(buf, pos, file_size, base, body, body_pos, topic, topic_bytes, queue_id, queue_offset, extra,
 *              sys_flag, born_ts, born_host, born_port, store_ts, store_host, store_port, reconsume,
 *              dispatch, phys) -> (pos, body_pos, queue_offset): see codec/batch_append.py */
static PyObject *py_append_batch(PyObject *self, PyObject *args) {
    Py_buffer buf, body, topic_b, extra, born_host, store_host;
    Py_ssize_t pos, file_size, body_pos;
    long long base, qoff, born_ts, store_ts;
    int queue_id, sys_flag, born_port, store_port, reconsume;
    PyObject *topic, *dispatch, *phys;
    if (!PyArg_ParseTuple(args, "w*nnLy*nUy*iLy*iLy*iLy*iiOO", &buf, &pos, &file_size, &base, &body, &body_pos,
                          &topic, &topic_b, &queue_id, &qoff, &extra, &sys_flag, &born_ts, &born_host, &born_port,
                          &store_ts, &store_host, &store_port, &reconsume, &dispatch, &phys))
        return NULL;
    PyObject *res = NULL;
    const unsigned char *bb = (const unsigned char *)body.buf;
    const unsigned char *xb = (const unsigned char *)extra.buf;
    unsigned char *w = (unsigned char *)buf.buf;
    Py_ssize_t tlen = topic_b.len, xlen = extra.len;
    if (!PyList_Check(dispatch) || !PyList_Check(phys) || born_host.len != 4 || store_host.len != 4 || tlen > 127 ||
        file_size > buf.len || pos < 0 || pos > file_size) {
        PyErr_SetString(PyExc_ValueError, "append_batch: bad arguments");
        goto done;
    }
    unsigned char *joined = NULL;
    Py_ssize_t joined_cap = 0;
    while (body_pos < body.len) {
        if (body.len - body_pos < BATCH_ENTRY_HEAD + 2) {
            codec_error("batch", body_pos, "truncated batch entry head");
            goto done_free;
        }
        const unsigned char *e = bb + body_pos;
        int32_t flag = rd_i32(e + 12), blen = rd_i32(e + 16);
        if (blen < 0 || body_pos + BATCH_ENTRY_HEAD + (Py_ssize_t)blen + 2 > body.len) {
            codec_error("batch", body_pos, "bad batch entry: body length %d runs past the batch", (int)blen);
            goto done_free;
        }
        const unsigned char *mb = e + BATCH_ENTRY_HEAD;
        int16_t plen = rd_i16(mb + blen);
        const unsigned char *pp = mb + blen + 2;
        if (plen < 0 || (pp - bb) + plen > body.len) {
            codec_error("batch", body_pos, "bad batch entry: properties length %d runs past the batch", (int)plen);
            goto done_free;
        }
        /* the entry's properties, a separator when they do not end with one, then the broker's (as RocketMQ) */
        int sep = plen > 0 && pp[plen - 1] != 0x02;
        Py_ssize_t jlen = plen + sep + xlen;
        if (jlen > 32767) {
            codec_error("batch", body_pos, "properties are %zd bytes, at most 32767", jlen);
            goto done_free;
        }
        Py_ssize_t total = FIXED_OVERHEAD + blen + tlen + jlen;
        if (total + 8 > file_size - pos) break;  /* the caller rolls to the next segment */
        if (jlen > joined_cap) {
            PyMem_Free(joined);
            joined_cap = jlen + 256;
            joined = PyMem_Malloc((size_t)joined_cap);
            if (joined == NULL) { PyErr_NoMemory(); goto done_free; }
        }
        if (!utf8_valid(pp, plen)) {
            codec_error("batch", body_pos, "batch entry properties are not UTF-8");
            goto done_free;
        }
        if (plen) memcpy(joined, pp, (size_t)plen);
        if (sep) joined[plen] = 0x02;
        if (xlen) memcpy(joined + plen + sep, xb, (size_t)xlen);
        PyObject *tags = find_property(joined, jlen, "TAGS", 4);
        if (tags == NULL && PyErr_Occurred()) goto done_free;
        PyObject *keys = find_property(joined, jlen, "KEYS", 4);
        if (keys == NULL && PyErr_Occurred()) { Py_XDECREF(tags); goto done_free; }
        PyObject *uniq = find_property(joined, jlen, "UNIQ_KEY", 8);
        if (uniq == NULL && PyErr_Occurred()) { Py_XDECREF(tags); Py_XDECREF(keys); goto done_free; }
        uint32_t crc;
        if (body_crc32(mb, blen, &crc) < 0) { Py_XDECREF(tags); Py_XDECREF(keys); Py_XDECREF(uniq); goto done_free; }
        long long phy = base + pos;
        unsigned char *r = w + pos;
        write_record_header(r, total, crc, queue_id, flag, qoff, phy, sys_flag, born_ts,
                            (const unsigned char *)born_host.buf, born_port, store_ts,
                            (const unsigned char *)store_host.buf, store_port, reconsume, 0, blen);
        memcpy(r + HEADER_SIZE, mb, (size_t)blen);
        unsigned char *t = r + HEADER_SIZE + blen;
        t[0] = (unsigned char)tlen;
        memcpy(t + 1, topic_b.buf, (size_t)tlen);
        wr_i16(t + 1 + tlen, jlen);
        memcpy(t + 3 + tlen, joined, (size_t)jlen);
        long long tags_code = 0;
        if (tags != NULL && PyUnicode_GET_LENGTH(tags) > 0) tags_code = (int32_t)java_hash_continue(0, tags);
        PyObject *ph = PyLong_FromLongLong(phy);
        PyObject *d = ph ? PyTuple_New(10) : NULL;  /* each slot gets a new reference */
        if (d != NULL) {
            PyTuple_SET_ITEM(d, 0, Py_NewRef(ph));
            PyTuple_SET_ITEM(d, 1, PyLong_FromSsize_t(total));
            PyTuple_SET_ITEM(d, 2, Py_NewRef(topic));
            PyTuple_SET_ITEM(d, 3, PyLong_FromLong(queue_id));
            PyTuple_SET_ITEM(d, 4, PyLong_FromLongLong(qoff));
            PyTuple_SET_ITEM(d, 5, PyLong_FromLongLong(tags_code));
            PyTuple_SET_ITEM(d, 6, PyLong_FromLongLong(store_ts));
            PyTuple_SET_ITEM(d, 7, Py_NewRef(keys ? keys : Py_None));
            PyTuple_SET_ITEM(d, 8, Py_NewRef(uniq ? uniq : Py_None));
            PyTuple_SET_ITEM(d, 9, PyLong_FromLong(sys_flag));
            for (int k = 0; k < 10; k++)
                if (PyTuple_GET_ITEM(d, k) == NULL) { Py_CLEAR(d); break; }
        }
        Py_XDECREF(tags); Py_XDECREF(keys); Py_XDECREF(uniq);
        if (d == NULL) { Py_XDECREF(ph); goto done_free; }
        int rc = PyList_Append(dispatch, d);
        Py_DECREF(d);
        if (rc < 0 || PyList_Append(phys, ph) < 0) { Py_DECREF(ph); goto done_free; }
        Py_DECREF(ph);
        pos += total;
        qoff += 1;
        body_pos = (pp - bb) + plen;
    }
    res = Py_BuildValue("(nnL)", pos, body_pos, qoff);
done_free:
    PyMem_Free(joined);
done:
    PyBuffer_Release(&buf); PyBuffer_Release(&body); PyBuffer_Release(&topic_b); PyBuffer_Release(&extra);
    PyBuffer_Release(&born_host); PyBuffer_Release(&store_host);
    return res;
}

/* encode_batch(entries: list of (flag, body, properties_bytes)) -> bytes: see codec/wire.py. Raises struct.error
 * as the pure twin's struct packing would (a flag outside int32, properties over 32767 bytes, an entry over
 * int32), TypeError for an entry that is not such a tuple. */
static PyObject *struct_error;
static PyObject *py_encode_batch(PyObject *self, PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "entries must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), total = 0;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = items[i];
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 3) {
            PyErr_SetString(PyExc_TypeError, "a batch entry must be a (flag, body, properties) tuple");
            goto fail;
        }
        Py_buffer b, p;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(e, 1), &b, PyBUF_SIMPLE) < 0) goto fail;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(e, 2), &p, PyBUF_SIMPLE) < 0) { PyBuffer_Release(&b); goto fail; }
        Py_ssize_t size = 22 + b.len + p.len, plen = p.len;
        PyBuffer_Release(&b);
        PyBuffer_Release(&p);
        int overflow = 0;
        long long flag = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(e, 0), &overflow);
        if (flag == -1 && PyErr_Occurred()) {
            if (PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_SetString(struct_error, "required argument is not an integer");
            }
            goto fail;
        }
        if (overflow || flag < INT32_MIN || flag > INT32_MAX || size > INT32_MAX) {
            PyErr_SetString(struct_error, "'i' format requires -2147483648 <= number <= 2147483647");
            goto fail;
        }
        if (plen > 32767) {
            PyErr_SetString(struct_error, "'h' format requires -32768 <= number <= 32767");
            goto fail;
        }
        total += size;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) goto fail;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = items[i];
        Py_buffer b, p;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(e, 1), &b, PyBUF_SIMPLE) < 0) { Py_DECREF(out); goto fail; }
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(e, 2), &p, PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&b); Py_DECREF(out); goto fail;
        }
        long long flag = PyLong_AsLongLong(PyTuple_GET_ITEM(e, 0));
        wr_i32(w, 22 + b.len + p.len);
        wr_i32(w + 4, 0);
        wr_i32(w + 8, 0);
        wr_i32(w + 12, flag);
        wr_i32(w + 16, b.len);
        memcpy(w + 20, b.buf, (size_t)b.len);
        wr_i16(w + 20 + b.len, p.len);
        memcpy(w + 22 + b.len, p.buf, (size_t)p.len);
        w += 22 + b.len + p.len;
        PyBuffer_Release(&b);
        PyBuffer_Release(&p);
    }
    Py_DECREF(seq);
    return out;
fail:
    Py_DECREF(seq);
    return NULL;
}

/* check_batch(body, extra_len, topic_len, max_body, segment_size) -> None | (index, status, reason):
 * see codec/batch_append.py */
static PyObject *py_check_batch(PyObject *self, PyObject *args) {
    Py_buffer body;
    Py_ssize_t xlen, tlen, max_body, seg;
    if (!PyArg_ParseTuple(args, "y*nnnn", &body, &xlen, &tlen, &max_body, &seg)) return NULL;
    const unsigned char *bb = (const unsigned char *)body.buf;
    Py_ssize_t pos = 0, i = 0;
    PyObject *res = NULL;
    char why[160];
    const char *status = "MESSAGE_ILLEGAL";
    why[0] = 0;
    while (pos < body.len) {
        if (body.len - pos < BATCH_ENTRY_HEAD + 2) {
            snprintf(why, sizeof why, "truncated batch entry head at byte %zd", pos);
            break;
        }
        int32_t blen = rd_i32(bb + pos + 16);
        Py_ssize_t body_at = pos + BATCH_ENTRY_HEAD;
        if (blen < 0 || body_at + blen + 2 > body.len) {
            snprintf(why, sizeof why, "bad batch entry at byte %zd: body length %d runs past the batch", pos, (int)blen);
            break;
        }
        int16_t plen = rd_i16(bb + body_at + blen);
        Py_ssize_t props_at = body_at + blen + 2;
        if (plen < 0 || props_at + plen > body.len) {
            snprintf(why, sizeof why, "bad batch entry at byte %zd: properties length %d runs past the batch", pos,
                     (int)plen);
            break;
        }
        if (!utf8_valid(bb + props_at, plen)) {
            snprintf(why, sizeof why, "properties are not UTF-8");
            break;
        }
        int sep = plen > 0 && bb[props_at + plen - 1] != 0x02;
        Py_ssize_t jlen = plen + sep + xlen;
        if (jlen > 32767) {
            status = "PROPERTIES_SIZE_EXCEEDED";
            snprintf(why, sizeof why, "properties are %zd bytes, at most 32767", jlen);
            break;
        }
        if (blen > max_body) {
            snprintf(why, sizeof why, "body is %d bytes, maxMessageSize is %zd", (int)blen, max_body);
            break;
        }
        Py_ssize_t total = FIXED_OVERHEAD + blen + tlen + jlen;
        if (total + 8 > seg) {
            snprintf(why, sizeof why, "record of %zd bytes does not fit a %zd-byte CommitLog segment", total, seg);
            break;
        }
        pos = props_at + plen;
        i++;
    }
    if (why[0] == 0 && i == 0) snprintf(why, sizeof why, "empty batch");
    if (why[0]) res = Py_BuildValue("(nss)", i, status, why);
    else res = Py_NewRef(Py_None);
    PyBuffer_Release(&body);
    return res;
}

/* parse_dispatch(buf, pos, limit, max_n, schedule_topic, delay_ms) -> (entries, end, why): see codec/records.py */
static PyObject *py_parse_dispatch(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, limit, max_n;
    PyObject *schedule_topic, *delay_ms;
    if (!PyArg_ParseTuple(args, "y*nnnUO", &view, &pos, &limit, &max_n, &schedule_topic, &delay_ms)) return NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    if (limit > view.len) limit = view.len;
    PyObject *out = PyList_New(0), *why = NULL, *res = NULL, *last_topic = NULL;
    const unsigned char *last_tp = NULL;
    Py_ssize_t last_tlen = -1;
    if (out == NULL) goto done;
    while (pos < limit && PyList_GET_SIZE(out) < max_n) {
        if (pos + 8 > limit) { why = PyUnicode_FromString("end of data"); break; }
        const unsigned char *p = b + pos;
        int32_t total = rd_i32(p);
        uint32_t magic = rd_u32(p + 4);
        if (magic == BLANK_MAGIC_CODE) { why = PyUnicode_FromString("blank"); break; }
        if (magic != MESSAGE_MAGIC_CODE) {
            if (total == 0 && magic == 0) { why = PyUnicode_FromString("end of data"); break; }
            char hex[16];
            snprintf(hex, sizeof hex, "%08X", (unsigned int)magic);
            why = PyUnicode_FromFormat("bad magic code 0x%s", hex);
            break;
        }
        if (total < FIXED_OVERHEAD || pos + total > limit) {
            why = PyUnicode_FromFormat("truncated record of size %d", (int)total);
            break;
        }
        int32_t blen = rd_i32(p + 84);
        if (blen < 0 || HEADER_SIZE + (Py_ssize_t)blen + 3 > total) {
            why = PyUnicode_FromFormat("inconsistent body length %d", (int)blen);
            break;
        }
        Py_ssize_t q = HEADER_SIZE + blen;
        Py_ssize_t tlen = p[q];
        Py_ssize_t pp = q + 1 + tlen;
        if (pp + 2 > total) { why = PyUnicode_FromString("inconsistent topic length"); break; }
        Py_ssize_t plen = rd_u16(p + pp);
        if (pp + 2 + plen != total) { why = PyUnicode_FromString("inconsistent properties length"); break; }
        const unsigned char *tp = p + q + 1, *props = p + pp + 2;
        if (!utf8_valid(tp, tlen) || !utf8_valid(props, plen)) {
            why = PyUnicode_FromString("topic or properties are not UTF-8");
            break;
        }
        if (last_topic == NULL || tlen != last_tlen || memcmp(tp, last_tp, (size_t)tlen) != 0) {
            Py_XDECREF(last_topic);
            last_topic = PyUnicode_DecodeUTF8((const char *)tp, tlen, NULL);
            if (last_topic == NULL) goto done;
            last_tp = tp;
            last_tlen = tlen;
        }
        long long store_ts = rd_i64(p + 56);
        PyObject *tags = find_property(props, plen, "TAGS", 4);
        PyObject *keys = PyErr_Occurred() ? NULL : find_property(props, plen, "KEYS", 4);
        PyObject *uniq = PyErr_Occurred() ? NULL : find_property(props, plen, "UNIQ_KEY", 8);
        PyObject *tags_code = NULL;
        if (!PyErr_Occurred()) {
            int is_schedule = delay_ms != Py_None && PyUnicode_Compare(last_topic, schedule_topic) == 0;
            if (is_schedule) {
                PyObject *lv = find_property(props, plen, "DELAY", 5);
                long long level = 1;
                if (lv != NULL && PyUnicode_GET_LENGTH(lv) > 0) {
                    PyObject *n = PyLong_FromUnicodeObject(lv, 10);
                    level = n ? PyLong_AsLongLong(n) : 0;
                    Py_XDECREF(n);
                }
                Py_XDECREF(lv);
                if (!PyErr_Occurred()) {
                    PyObject *d = PyObject_CallFunction(delay_ms, "L", level > 1 ? level : 1LL);
                    if (d != NULL) {
                        PyObject *base = PyLong_FromLongLong(store_ts);
                        tags_code = base ? PyNumber_Add(base, d) : NULL;
                        Py_XDECREF(base);
                        Py_DECREF(d);
                    }
                }
            } else {
                long long code = 0;
                if (tags != NULL && PyUnicode_GET_LENGTH(tags) > 0) code = (int32_t)java_hash_continue(0, tags);
                tags_code = PyLong_FromLongLong(code);
            }
        }
        PyObject *d = NULL;
        if (tags_code != NULL && (d = PyTuple_New(10)) != NULL) {  /* steals: each slot gets a new reference */
            PyTuple_SET_ITEM(d, 0, PyLong_FromLongLong(rd_i64(p + 28)));
            PyTuple_SET_ITEM(d, 1, PyLong_FromLong(total));
            PyTuple_SET_ITEM(d, 2, Py_NewRef(last_topic));
            PyTuple_SET_ITEM(d, 3, PyLong_FromLong(rd_i32(p + 12)));
            PyTuple_SET_ITEM(d, 4, PyLong_FromLongLong(rd_i64(p + 20)));
            PyTuple_SET_ITEM(d, 5, Py_NewRef(tags_code));
            PyTuple_SET_ITEM(d, 6, PyLong_FromLongLong(store_ts));
            PyTuple_SET_ITEM(d, 7, Py_NewRef(keys ? keys : Py_None));
            PyTuple_SET_ITEM(d, 8, Py_NewRef(uniq ? uniq : Py_None));
            PyTuple_SET_ITEM(d, 9, PyLong_FromLong(rd_i32(p + 36)));
            for (int k = 0; k < 10; k++)
                if (PyTuple_GET_ITEM(d, k) == NULL) { Py_CLEAR(d); break; }
        }
        Py_XDECREF(tags); Py_XDECREF(keys); Py_XDECREF(uniq); Py_XDECREF(tags_code);
        if (d == NULL || PyList_Append(out, d) < 0) { Py_XDECREF(d); goto done; }
        Py_DECREF(d);
        pos += total;
    }
    if (why == NULL && !PyErr_Occurred()) why = PyUnicode_FromString("");
    if (why != NULL) res = Py_BuildValue("(OnO)", out, pos, why);
done:
    Py_XDECREF(out); Py_XDECREF(why); Py_XDECREF(last_topic);
    PyBuffer_Release(&view);
    return res;
}

/* scan_units(buf, pos, limit) -> (end, max_phy, stopped): see codec/consume_queue.py */
static PyObject *py_scan_units(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, limit;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &pos, &limit)) return NULL;
    if (limit > view.len) limit = view.len;
    const unsigned char *b = (const unsigned char *)view.buf;
    long long last_offset = -1, last_size = 0;  /* max_phy = their sum, which may pass the i64 range */
    int stopped = 0;
    while (pos >= 0 && pos + 20 <= limit) {
        long long offset = rd_i64(b + pos);
        int32_t size = rd_i32(b + pos + 8);
        if (size <= 0 || offset < 0) { stopped = 1; break; }
        if (size != 0x7FFFFFFF) { last_offset = offset; last_size = size; }
        pos += 20;
    }
    PyBuffer_Release(&view);
    PyObject *o = PyLong_FromLongLong(last_offset), *z = PyLong_FromLongLong(last_size);
    PyObject *max_phy = o && z ? PyNumber_Add(o, z) : NULL;
    Py_XDECREF(o);
    Py_XDECREF(z);
    if (max_phy == NULL) return NULL;
    return Py_BuildValue("(nNO)", pos, max_phy, stopped ? Py_True : Py_False);
}

/* pick_units(buf, limit, max_nums, min_phy, tag_hashes, max_bytes, base_offset)
 *   -> (runs, phys, queue_offsets, end, removed): see codec/consume_queue.py */
static PyObject *py_pick_units(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t limit, max_nums;
    long long min_phy, max_bytes, base_offset;
    PyObject *tags;
    if (!PyArg_ParseTuple(args, "y*nnLOLL", &view, &limit, &max_nums, &min_phy, &tags, &max_bytes, &base_offset))
        return NULL;
    if (tags != Py_None && !PyAnySet_Check(tags)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "tag_hashes must be a set or None");
        return NULL;
    }
    if (limit > view.len) limit = view.len;
    const unsigned char *b = (const unsigned char *)view.buf;
    PyObject *runs = PyList_New(0), *phys = PyList_New(0), *offsets = PyList_New(0);
    PyObject *res = NULL;
    if (runs == NULL || phys == NULL || offsets == NULL) goto done;
    long long total = 0, run_start = 0, run_len = 0, run_end = 0;
    Py_ssize_t run_first = 0, picked = 0, pos = 0;
    int removed = 0, have_run = 0;  /* a flag, not a sentinel offset: a corrupt unit may name any offset, -1 too */
    while (pos + 20 <= limit && picked < max_nums) {
        long long phy = rd_i64(b + pos);
        int32_t size = rd_i32(b + pos + 8);
        long long tags_code = rd_i64(b + pos + 12);
        pos += 20;
        if (size == 0x7FFFFFFF) continue;
        if (phy < min_phy) { removed = 1; continue; }
        if (tags != Py_None) {
            PyObject *code = PyLong_FromLongLong(tags_code);
            if (code == NULL) goto done;
            int in = PySet_Contains(tags, code);
            Py_DECREF(code);
            if (in < 0) goto done;
            if (!in) continue;
        }
        if (picked > 0 && total + size > max_bytes) { pos -= 20; break; }
        if (!have_run || phy != run_end) {
            if (have_run) {
                PyObject *r = Py_BuildValue("(LLn)", run_start, run_len, run_first);
                if (r == NULL || PyList_Append(runs, r) < 0) { Py_XDECREF(r); goto done; }
                Py_DECREF(r);
            }
            run_start = phy; run_len = 0; run_first = picked; have_run = 1;
        }
        run_len += size;
        run_end = phy + size;
        PyObject *p = PyLong_FromLongLong(phy), *q = PyLong_FromLongLong(base_offset + pos / 20 - 1);
        if (p == NULL || q == NULL || PyList_Append(phys, p) < 0 || PyList_Append(offsets, q) < 0) {
            Py_XDECREF(p); Py_XDECREF(q); goto done;
        }
        Py_DECREF(p); Py_DECREF(q);
        total += size;
        picked++;
    }
    if (have_run) {
        PyObject *r = Py_BuildValue("(LLn)", run_start, run_len, run_first);
        if (r == NULL || PyList_Append(runs, r) < 0) { Py_XDECREF(r); goto done; }
        Py_DECREF(r);
    }
    res = Py_BuildValue("(OOOnO)", runs, phys, offsets, pos, removed ? Py_True : Py_False);
done:
    Py_XDECREF(runs); Py_XDECREF(phys); Py_XDECREF(offsets);
    PyBuffer_Release(&view);
    return res;
}

/* group_units(batch) -> {(topic, queue_id): [(phy, size, tags_code, queue_offset), ...]}: see
 * codec/consume_queue.py */
static PyObject *py_group_units(PyObject *self, PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "batch must be a sequence");
    if (seq == NULL) return NULL;
    PyObject *out = PyDict_New();
    PyObject *last_topic = NULL, *last_qid = NULL, *last_list = NULL;  /* owned; consecutive records often share a queue */
    if (out == NULL) { Py_DECREF(seq); return NULL; }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = items[i];
        if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) != 10) {
            PyErr_SetString(PyExc_TypeError, "a dispatch entry is a 10-tuple");
            goto fail;
        }
        long long sys_flag = PyLong_AsLongLong(PyTuple_GET_ITEM(d, 9));
        if (sys_flag == -1 && PyErr_Occurred()) goto fail;
        long long tx = sys_flag & TRANSACTION_TYPE_MASK;
        if (tx != 0 && tx != (0x2 << 2)) continue;
        PyObject *topic = PyTuple_GET_ITEM(d, 2), *qid = PyTuple_GET_ITEM(d, 3);
        int same = 0;
        if (last_list != NULL) {
            int t = PyObject_RichCompareBool(last_topic, topic, Py_EQ);
            if (t < 0) goto fail;
            int q = t ? PyObject_RichCompareBool(last_qid, qid, Py_EQ) : 0;
            if (q < 0) goto fail;
            same = t && q;
        }
        if (!same) {
            PyObject *key = PyTuple_Pack(2, topic, qid);
            if (key == NULL) goto fail;
            PyObject *list = PyDict_GetItemWithError(out, key);
            if (list == NULL) {
                if (PyErr_Occurred()) { Py_DECREF(key); goto fail; }
                list = PyList_New(0);
                if (list == NULL || PyDict_SetItem(out, key, list) < 0) { Py_XDECREF(list); Py_DECREF(key); goto fail; }
                Py_DECREF(list);  /* the dict holds it */
            }
            Py_DECREF(key);
            Py_XSETREF(last_topic, Py_NewRef(topic));
            Py_XSETREF(last_qid, Py_NewRef(qid));
            Py_XSETREF(last_list, Py_NewRef(list));
        }
        PyObject *u = PyTuple_Pack(4, PyTuple_GET_ITEM(d, 0), PyTuple_GET_ITEM(d, 1), PyTuple_GET_ITEM(d, 5),
                                   PyTuple_GET_ITEM(d, 4));
        if (u == NULL || PyList_Append(last_list, u) < 0) { Py_XDECREF(u); goto fail; }
        Py_DECREF(u);
    }
    Py_XDECREF(last_topic); Py_XDECREF(last_qid); Py_XDECREF(last_list);
    Py_DECREF(seq);
    return out;
fail:
    Py_XDECREF(last_topic); Py_XDECREF(last_qid); Py_XDECREF(last_list);
    Py_DECREF(seq);
    Py_DECREF(out);
    return NULL;
}

/* offset_msg_ids(host4, port, phys) -> "ID,ID,...": each the 32-hex offset message id */
static PyObject *py_offset_msg_ids(PyObject *self, PyObject *args) {
    Py_buffer host;
    int port;
    PyObject *phys;
    if (!PyArg_ParseTuple(args, "y*iO", &host, &port, &phys)) return NULL;
    PyObject *seq = PySequence_Fast(phys, "phys must be a sequence");
    if (seq == NULL || host.len != 4) {
        if (seq != NULL) { Py_DECREF(seq); PyErr_SetString(PyExc_ValueError, "host must be 4 bytes"); }
        PyBuffer_Release(&host);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyUnicode_New(n ? n * 33 - 1 : 0, 127);
    if (out == NULL) { Py_DECREF(seq); PyBuffer_Release(&host); return NULL; }
    Py_UCS1 *o = PyUnicode_1BYTE_DATA(out);
    static const char hexd[] = "0123456789ABCDEF";
    unsigned char raw[16];
    memcpy(raw, host.buf, 4);
    wr_i32(raw + 4, port);
    for (Py_ssize_t i = 0; i < n; i++) {
        long long phy = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (phy == -1 && PyErr_Occurred()) { Py_DECREF(out); Py_DECREF(seq); PyBuffer_Release(&host); return NULL; }
        wr_i64(raw + 8, phy);
        if (i) *o++ = ',';
        for (int k = 0; k < 16; k++) { *o++ = (Py_UCS1)hexd[raw[k] >> 4]; *o++ = (Py_UCS1)hexd[raw[k] & 15]; }
    }
    Py_DECREF(seq);
    PyBuffer_Release(&host);
    return out;
}

/* ------------------------------------------------------------------ ROCKETMQ binary command header */
#define BINARY_HEAD_SIZE 17

typedef struct { int code, language, version; int32_t opaque, flag; PyObject *remark, *ext; } BinaryHeader;

/* The header in b[0:end] into *h (new references to remark, None when absent, and ext): 0, or -1 with an
 * exception set (CodecError for lengths, UnicodeDecodeError for text) */
static int decode_header_into(const unsigned char *b, Py_ssize_t end, BinaryHeader *h) {
    Py_ssize_t pos;
    PyObject *remark = NULL, *ext = NULL;
    int rc = -1;
    if (end < BINARY_HEAD_SIZE + 4) {
        codec_error("header", 0, "binary header of %zd bytes is shorter than its %d fixed bytes", end,
                    BINARY_HEAD_SIZE + 4);
        goto done;
    }
    int code = rd_i16(b), language = b[2], version = rd_i16(b + 3);
    int32_t opaque = rd_i32(b + 5), flag = rd_i32(b + 9), rlen = rd_i32(b + 13);
    pos = BINARY_HEAD_SIZE;
    if (rlen < 0 || pos + rlen + 4 > end) {
        codec_error("header", pos - 4, "remark length %d runs past the header", (int)rlen);
        goto done;
    }
    if (rlen) {
        remark = PyUnicode_DecodeUTF8((const char *)b + pos, rlen, NULL);
        if (remark == NULL) goto done;
    } else {
        remark = Py_NewRef(Py_None);
    }
    pos += rlen;
    int32_t ext_len = rd_i32(b + pos);
    pos += 4;
    if (ext_len < 0 || pos + ext_len != end) {
        codec_error("header", pos - 4, "extFields length %d does not end the header (%zd bytes left)",
                    (int)ext_len, end - pos);
        goto done;
    }
    /* sized for the entries the bytes can hold (a send's 12 letters made two resizes of a new dict) */
    ext = _PyDict_NewPresized(ext_len / 8 < 32 ? ext_len / 8 : 32);
    if (ext == NULL) goto done;
    while (pos < end) {
        if (end - pos < 6) { codec_error("header", pos, "truncated extFields entry"); goto done; }
        int16_t klen = rd_i16(b + pos);
        Py_ssize_t kend = pos + 2 + klen;
        if (klen < 0 || kend + 4 > end) {
            codec_error("header", pos, "extFields key length %d runs past the header", (int)klen);
            goto done;
        }
        int32_t vlen = rd_i32(b + kend);
        Py_ssize_t vend = kend + 4 + (Py_ssize_t)vlen;
        if (vlen < 0 || vend > end) {
            codec_error("header", kend, "extFields value length %d runs past the header", (int)vlen);
            goto done;
        }
        /* the names (the same few letters in every request) from the string cache: hashed once */
        PyObject *k = cached_utf8(b + pos + 2, klen);
        if (k == NULL) goto done;
        PyObject *v = PyUnicode_DecodeUTF8((const char *)b + kend + 4, vlen, NULL);
        if (v == NULL) { Py_DECREF(k); goto done; }
        int set = PyDict_SetItem(ext, k, v);
        Py_DECREF(k);
        Py_DECREF(v);
        if (set < 0) goto done;
        pos = vend;
    }
    *h = (BinaryHeader){code, language, version, opaque, flag, remark, ext};
    remark = ext = NULL;
    rc = 0;
done:
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    return rc;
}

/* decode_binary_header(buf) -> (code, language, version, opaque, flag, remark, ext_fields) */
static PyObject *py_decode_binary_header(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    BinaryHeader h;
    PyObject *res = NULL;
    if (decode_header_into((const unsigned char *)view.buf, view.len, &h) == 0) {
        res = Py_BuildValue("(iiiiiOO)", h.code, h.language, h.version, (int)h.opaque, (int)h.flag, h.remark, h.ext);
        Py_DECREF(h.remark);
        Py_DECREF(h.ext);
    }
    PyBuffer_Release(&view);
    return res;
}

/* decode_frame(data, max_frame_bytes, factory, languages, other) -> command or None: see codec/wire.py */
static PyObject *py_decode_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "decode_frame takes 5 arguments");
        return NULL;
    }
    PyObject *data = args[0], *factory = args[2], *languages = args[3], *other = args[4];
    long long max_frame = PyLong_AsLongLong(args[1]);
    if (max_frame == -1 && PyErr_Occurred()) return NULL;
    if (!PyBytes_Check(data) || !PyTuple_Check(languages) || PyBytes_GET_SIZE(data) < 8) Py_RETURN_NONE;
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    long long length = rd_i32(b);
    uint32_t word = rd_u32(b + 4);
    long long hlen = word & 0xFFFFFF;
    if (length + 4 != n || length + 4 > max_frame || (word >> 24) != 1 || length < 4 || hlen > length - 4)
        Py_RETURN_NONE;  /* not one whole ROCKETMQ frame, or one the general decoder refuses */
    BinaryHeader h;
    if (decode_header_into(b + 8, (Py_ssize_t)hlen, &h) < 0) {
        if (PyErr_ExceptionMatches(CodecError) || PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            Py_RETURN_NONE;  /* the general decoder says why */
        }
        return NULL;
    }
    PyObject *res = NULL, *code = PyLong_FromLong(h.code), *opaque = PyLong_FromLong(h.opaque);
    PyObject *flag = PyLong_FromLong(h.flag), *version = PyLong_FromLong(h.version);
    PyObject *body = PyBytes_FromStringAndSize((const char *)b + 8 + hlen, n - 8 - (Py_ssize_t)hlen);
    PyObject *st = PyLong_FromLong(1);
    PyObject *language = h.language < PyTuple_GET_SIZE(languages) ? PyTuple_GET_ITEM(languages, h.language) : other;
    PyObject *remark = h.remark == Py_None ? empty_str : h.remark;
    if (code && opaque && flag && version && body && st) {
        PyObject *argv[9] = {code, opaque, flag, h.ext, body, remark, language, version, st};
        res = PyObject_Vectorcall(factory, argv, 9, NULL);
    }
    Py_XDECREF(code); Py_XDECREF(opaque); Py_XDECREF(flag); Py_XDECREF(version); Py_XDECREF(body); Py_XDECREF(st);
    Py_DECREF(h.remark);
    Py_DECREF(h.ext);
    return res;
}

static int check_i16(long v, const char *what) {
    if (v < -32768 || v > 32767) {
        PyErr_Format(struct_error, "%s %ld does not fit a short", what, v);  /* as struct's 'h' packing */
        return -1;
    }
    return 0;
}

/* encode_binary_header(code, language, version, opaque, flag, remark, ext_fields) -> bytes */
/* The ROCKETMQ binary header of these fields; with `body` (not NULL) the whole frame instead: the length word,
 * the header word (serialize type 1, header length), the header, the body, in one allocation. */
static PyObject *binary_header(long code, long language, long version, long opaque, long flag, PyObject *remark,
                               PyObject *ext, Py_buffer *body) {
    if (check_i16(code, "code") < 0 || check_i16(version, "version") < 0) return NULL;
    if (language < 0 || language > 255) { PyErr_SetString(struct_error, "language does not fit a byte"); return NULL; }
    if (opaque < INT32_MIN || opaque > INT32_MAX || flag < INT32_MIN || flag > INT32_MAX) {
        PyErr_SetString(struct_error, "opaque and flag must fit an int");
        return NULL;
    }
    const char *rb = NULL;
    Py_ssize_t rlen = 0;
    if (remark != Py_None) {
        int truth = PyObject_IsTrue(remark);
        if (truth < 0) return NULL;
        if (truth) {
            rb = PyUnicode_AsUTF8AndSize(remark, &rlen);
            if (rb == NULL) return NULL;
        }
    }
    /* sizes first */
    Py_ssize_t ext_size = 0, pos = 0;
    PyObject *k, *v;
    int has_ext = ext != Py_None && PyObject_IsTrue(ext);
    if (has_ext) {
        if (!PyDict_Check(ext)) { PyErr_SetString(PyExc_TypeError, "ext_fields must be a dict"); return NULL; }
        while (PyDict_Next(ext, &pos, &k, &v)) {
            if (k == Py_None || v == Py_None) continue;
            Py_ssize_t kl, vl;
            if (PyUnicode_AsUTF8AndSize(k, &kl) == NULL || PyUnicode_AsUTF8AndSize(v, &vl) == NULL) return NULL;
            ext_size += 2 + kl + 4 + vl;
        }
    }
    Py_ssize_t hlen = BINARY_HEAD_SIZE + rlen + 4 + ext_size;
    Py_ssize_t blen = body ? body->len : 0;
    if (body && (hlen > 0xFFFFFF || 4 + hlen + blen > INT32_MAX)) {
        PyErr_SetString(PyExc_OverflowError, "the frame does not fit its length words");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (body ? 8 : 0) + hlen + blen);
    if (out == NULL) return NULL;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
    if (body) {
        wr_i32(w, 4 + hlen + blen);
        wr_i32(w + 4, ((int64_t)1 << 24) | hlen);
        w += 8;
    }
    wr_i16(w, code);
    w[2] = (unsigned char)language;
    wr_i16(w + 3, version);
    wr_i32(w + 5, opaque);
    wr_i32(w + 9, flag);
    wr_i32(w + 13, rlen);
    w += BINARY_HEAD_SIZE;
    if (rlen) { memcpy(w, rb, (size_t)rlen); w += rlen; }
    wr_i32(w, ext_size);
    w += 4;
    if (has_ext) {
        pos = 0;
        while (PyDict_Next(ext, &pos, &k, &v)) {
            if (k == Py_None || v == Py_None) continue;
            Py_ssize_t kl, vl;
            const char *kb = PyUnicode_AsUTF8AndSize(k, &kl), *vb = PyUnicode_AsUTF8AndSize(v, &vl);
            wr_i16(w, kl);
            memcpy(w + 2, kb, (size_t)kl);
            w += 2 + kl;
            wr_i32(w, vl);
            memcpy(w + 4, vb, (size_t)vl);
            w += 4 + vl;
        }
    }
    if (blen) memcpy(w, body->buf, (size_t)blen);
    return out;
}

static PyObject *py_encode_binary_header(PyObject *self, PyObject *args) {
    long code, language, version, opaque, flag;
    PyObject *remark, *ext;
    if (!PyArg_ParseTuple(args, "lllllOO", &code, &language, &version, &opaque, &flag, &remark, &ext)) return NULL;
    return binary_header(code, language, version, opaque, flag, remark, ext, NULL);
}

/* encode_binary_frame(code, language, version, opaque, flag, remark, ext_fields, body) -> bytes: see wire.py */
static PyObject *py_encode_binary_frame(PyObject *self, PyObject *args) {
    long code, language, version, opaque, flag;
    PyObject *remark, *ext;
    PyObject *bodyo = NULL;
    Py_buffer body;
    if (!PyArg_ParseTuple(args, "lllllOO|O", &code, &language, &version, &opaque, &flag, &remark, &ext, &bodyo))
        return NULL;
    if (bodyo == NULL) {
        body.buf = NULL;
        body.len = 0;
        return binary_header(code, language, version, opaque, flag, remark, ext, &body);
    }
    if (PyObject_GetBuffer(bodyo, &body, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *out = binary_header(code, language, version, opaque, flag, remark, ext, &body);
    PyBuffer_Release(&body);
    return out;
}

/* ------------------------------------------------------------------ module */

/* ------------------------------------------------------------------ the store's put loop */
enum { A_LIMITS, A_BODY, A_TAIL, A_TOPIC, A_QUEUE_ID, A_FLAG, A_SYS_FLAG, A_BORN_TS, A_BORN_HOST, A_BORN_PORT,
       A_RECONSUME, A_PREPARED, A_DELAY, A_TAGS, A_KEYS, A_UNIQ, A_COUNT };
static const char *const attr_names[A_COUNT] = {
    "limits_error", "body", "tail", "topic", "queue_id", "flag", "sys_flag", "born_timestamp", "born_host",
    "born_port", "reconsume_times", "prepared_transaction_offset", "delay_ms", "tags", "keys", "uniq_key"};
static PyObject *attr_str[A_COUNT];

/* The put loop reads each message's fields and fills each result through SlotMaps: the per-message attribute lookups
 * by name and the result's Python __init__ were about half of its time (perf on a warm buffer). */
static SlotMap msg_map;     /* MessageInner (or whatever class the store hands over): attr_str order */
static SlotMap result_map;  /* the result class, R_* order, when it declares __native_slots__ as those names */
enum { R_STATUS, R_PHY, R_SIZE, R_QOFF, R_STORE_TS, R_HOST, R_PORT, R_ERROR, R_COUNT };
static const char *const result_names[R_COUNT] = {
    "status", "phy_offset", "size", "queue_offset", "store_timestamp", "store_host", "store_port", "error"};
static PyObject *result_str[R_COUNT];

/* The result class may be filled directly: it declares __native_slots__ equal to result_names (a promise that
 * calling it with (status, phy, size, qoff, store_ts, host, port) sets exactly those slots, error ""), and they
 * are writable object slots. 1 yes, 0 no (call it), -1 error. */
static int result_map_for(PyObject *cls) {
    if (!PyType_Check(cls)) return 0;
    PyTypeObject *tp = (PyTypeObject *)cls;
    if (result_map.tp == tp) return result_map.usable;
    PyObject *names = PyDict_GetItemWithError(tp->tp_dict, native_slots_str);  /* borrowed; own dict only */
    if (names == NULL && PyErr_Occurred()) return -1;
    int declared = names != NULL && PyTuple_Check(names) && PyTuple_GET_SIZE(names) == R_COUNT &&
                   tp->tp_alloc != NULL;
    for (int i = 0; declared && i < R_COUNT; i++) {
        int eq = PyUnicode_Check(PyTuple_GET_ITEM(names, i)) &&
                 PyUnicode_Compare(PyTuple_GET_ITEM(names, i), result_str[i]) == 0;
        if (PyErr_Occurred()) return -1;
        declared = eq;
    }
    if (!declared) {
        Py_XSETREF(result_map.tp, (PyTypeObject *)Py_NewRef(cls));
        result_map.usable = 0;
        return 0;
    }
    return slot_map_for(&result_map, tp, result_str, R_COUNT);
}

/* A new result with the R_* values in its slots (error ""), or NULL with an exception set */
static PyObject *fill_result(PyObject *const *v) {
    PyTypeObject *tp = result_map.tp;
    PyObject *obj = tp->tp_alloc(tp, 0);
    if (obj == NULL) return NULL;
    char *base = (char *)obj;
    for (int i = 0; i < R_ERROR; i++) *(PyObject **)(base + result_map.off[i]) = Py_NewRef(v[i]);
    *(PyObject **)(base + result_map.off[R_ERROR]) = Py_NewRef(empty_str);
    return obj;
}

/* o is an int (bool included, as struct packs it) within [lo, hi]: 1 and *out; otherwise 0, no error set */
static int int_within(PyObject *o, long long lo, long long hi, long long *out) {
    if (!PyLong_Check(o)) return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
    if (v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/* struct's "4s": the first 4 bytes, zero-padded */
static void put_4s(unsigned char *p, PyObject *b) {
    Py_ssize_t n = PyBytes_GET_SIZE(b);
    memset(p, 0, 4);
    memcpy(p, PyBytes_AS_STRING(b), (size_t)(n < 4 ? n : 4));
}

#define I32_MIN (-2147483647LL - 1)
#define I32_MAX 2147483647LL
#define I64_MIN (-9223372036854775807LL - 1)
#define I64_MAX 9223372036854775807LL
#define TX_MASK (0x3 << 2)
#define TX_PREPARED (0x1 << 2)
#define TX_ROLLBACK (0x3 << 2)

/* The put's fixed inputs for one lock hold (codec/message_append.py). */
typedef struct {
    unsigned char *w;           /* the segment buffer */
    Py_ssize_t file_size, max_body;
    long long base, store_ts, store_port;
    PyObject *store_ts_o, *store_host, *store_port_o, *table, *pending_append, *ok, *result_cls;
    int direct_result;
} PutCtx;

/* Write `msg` as a record at *pos: 1 written and recorded (*result_out a new reference, *pos moved on and, when
 * pos_out is given, *pos_out the new position as a new int), 0 not
 * written (refused, does not fit what is left, or a field this loop does not take as is: the caller decides),
 * -1 error (nothing written or recorded). Everything that can fail is built before anything is written. */
static int append_one(const PutCtx *c, PyObject *msg, Py_ssize_t *pos_io, PyObject **result_out, PyObject **pos_out) {
    PyObject *a[A_COUNT] = {NULL};
    int rc = -1;
    Py_ssize_t pos = *pos_io;
    int mapped = slot_map_for(&msg_map, Py_TYPE(msg), attr_str, A_COUNT);
    if (mapped < 0) goto out;
    for (int k = 0; k < A_COUNT; k++) {
        PyObject *v = mapped ? *(PyObject **)((char *)msg + msg_map.off[k]) : NULL;
        a[k] = v != NULL ? Py_NewRef(v) : PyObject_GetAttr(msg, attr_str[k]);
        if (a[k] == NULL) goto out;
    }
    int refused = PyObject_IsTrue(a[A_LIMITS]);
    if (refused < 0) goto out;
    rc = 0;
    PyObject *body = a[A_BODY], *tail = a[A_TAIL];
    if (!PyBytes_Check(body) || !PyBytes_Check(tail)) goto out;  /* the pure twin takes any buffer */
    Py_ssize_t blen = PyBytes_GET_SIZE(body), tlen = PyBytes_GET_SIZE(tail);
    Py_ssize_t total = HEADER_SIZE + blen + tlen;
    if (refused || blen > c->max_body || total + 8 > c->file_size) goto out;  /* the caller's check answers it */
    if (total + 8 > c->file_size - pos) goto out;  /* the caller rolls to the next segment */
    long long queue_id, flag, sys_flag, born_ts, born_port, reconsume, prepared, delay;
    if (!PyUnicode_Check(a[A_TOPIC]) || !PyBytes_Check(a[A_BORN_HOST]) ||
        !int_within(a[A_QUEUE_ID], I32_MIN, I32_MAX, &queue_id) ||
        !int_within(a[A_FLAG], I32_MIN, I32_MAX, &flag) ||
        !int_within(a[A_SYS_FLAG], I32_MIN, I32_MAX, &sys_flag) ||
        !int_within(a[A_BORN_TS], I64_MIN, I64_MAX, &born_ts) ||
        !int_within(a[A_BORN_PORT], I32_MIN, I32_MAX, &born_port) ||
        !int_within(a[A_RECONSUME], I32_MIN, I32_MAX, &reconsume) ||
        !int_within(a[A_PREPARED], I64_MIN, I64_MAX, &prepared) ||
        !int_within(a[A_DELAY], I64_MIN, I64_MAX, &delay) ||
        (a[A_TAGS] != Py_None && !PyUnicode_Check(a[A_TAGS])))
        goto out;  /* the pure twin packs it, or raises struct.error as it always did */
    long long store_ts = c->store_ts, tags_code = 0;
    if (delay) {
        if ((delay > 0 && store_ts > I64_MAX - delay) || (delay < 0 && store_ts < I64_MIN - delay)) goto out;
        tags_code = store_ts + delay;
    } else if (a[A_TAGS] != Py_None && PyUnicode_GET_LENGTH(a[A_TAGS]) > 0) {
        tags_code = (int32_t)java_hash_continue(0, a[A_TAGS]);
    }
    rc = -1;
    PyObject *qkey = PyTuple_Pack(2, a[A_TOPIC], a[A_QUEUE_ID]);
    if (qkey == NULL) goto out;
    PyObject *qoff_o = PyDict_GetItemWithError(c->table, qkey);  /* borrowed */
    long long qoff = 0;
    if (qoff_o == NULL && PyErr_Occurred()) { Py_DECREF(qkey); goto out; }
    if (qoff_o != NULL && !int_within(qoff_o, I64_MIN, I64_MAX - 1, &qoff)) { Py_DECREF(qkey); rc = 0; goto out; }
    uint32_t crc;
    if (body_crc32((const unsigned char *)PyBytes_AS_STRING(body), blen, &crc) < 0) { Py_DECREF(qkey); goto out; }
    long long phy = c->base + pos;
    int advance = (sys_flag & TX_MASK) != TX_PREPARED && (sys_flag & TX_MASK) != TX_ROLLBACK;
    /* everything that can fail, before anything is written or recorded */
    PyObject *phy_o = PyLong_FromLongLong(phy), *total_o = PyLong_FromSsize_t(total);
    PyObject *qoff_n = PyLong_FromLongLong(qoff), *tags_o = PyLong_FromLongLong(tags_code);
    PyObject *next_o = advance ? PyLong_FromLongLong(qoff + 1) : NULL;
    PyObject *pend = NULL, *r = NULL;
    if (phy_o && total_o && qoff_n && tags_o && (next_o || !advance)) {
        pend = PyTuple_Pack(10, phy_o, total_o, a[A_TOPIC], a[A_QUEUE_ID], qoff_n, tags_o, c->store_ts_o,
                            a[A_KEYS], a[A_UNIQ], a[A_SYS_FLAG]);
        PyObject *rargs[7] = {c->ok, phy_o, total_o, qoff_n, c->store_ts_o, c->store_host, c->store_port_o};
        if (pend != NULL)
            r = c->direct_result ? fill_result(rargs) : PyObject_Vectorcall(c->result_cls, rargs, 7, NULL);
    }
    PyObject *pos_o = r != NULL && pos_out != NULL ? PyLong_FromSsize_t(pos + total) : NULL;
    Py_XDECREF(phy_o); Py_XDECREF(total_o); Py_XDECREF(qoff_n); Py_XDECREF(tags_o);
    if (r == NULL || (pos_out != NULL && pos_o == NULL)) {
        Py_XDECREF(r); Py_XDECREF(pend); Py_XDECREF(next_o); Py_DECREF(qkey);
        goto out;
    }
    unsigned char *rec = c->w + pos, bh[4], sh[4];
    put_4s(bh, a[A_BORN_HOST]);
    put_4s(sh, c->store_host);
    write_record_header(rec, total, crc, queue_id, flag, qoff, phy, sys_flag, born_ts, bh, born_port, store_ts,
                        sh, c->store_port, reconsume, prepared, blen);
    memcpy(rec + HEADER_SIZE, PyBytes_AS_STRING(body), (size_t)blen);
    memcpy(rec + HEADER_SIZE + blen, PyBytes_AS_STRING(tail), (size_t)tlen);
    PyObject *appended = PyObject_CallOneArg(c->pending_append, pend);
    Py_DECREF(pend);
    int set = appended == NULL ? -1 : 0;
    Py_XDECREF(appended);
    if (set == 0 && advance) set = PyDict_SetItem(c->table, qkey, next_o);
    Py_XDECREF(next_o);
    Py_DECREF(qkey);
    if (set < 0) { Py_DECREF(r); Py_XDECREF(pos_o); goto out; }
    *result_out = r;
    if (pos_out != NULL) *pos_out = pos_o;
    *pos_io = pos + total;
    rc = 1;
out:
    for (int k = 0; k < A_COUNT; k++) Py_XDECREF(a[k]);
    return rc;
}

/* The store host and port as the record takes them: 1, 0 when the pure twin must pack (or refuse) them */
static int put_ctx_host(PutCtx *c, PyObject *store_host, PyObject *store_port_o) {
    c->store_host = store_host;
    c->store_port_o = store_port_o;
    return PyBytes_Check(store_host) && int_within(store_port_o, I32_MIN, I32_MAX, &c->store_port);
}

/* append_messages(buf, pos, file_size, base, msgs, start, end, max_body, store_ts, store_host, store_port, table,
 *                 pending_append, results, ok, result_cls, progress) -> (pos, i): see codec/message_append.py.
 * Also stops, writing nothing, at a message whose fields it cannot take as they are (the caller runs the pure
 * twin for it). Everything that can fail for a message is built before anything is written or recorded. */
static PyObject *py_append_messages(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, file_size, start, end, max_body;
    long long base, store_ts;
    PyObject *msgs, *store_host, *store_port_o, *table, *pending_append, *results, *ok, *result_cls, *progress;
    if (!PyArg_ParseTuple(args, "w*nnLOnnnLOOOOOOOO", &buf, &pos, &file_size, &base, &msgs, &start, &end, &max_body,
                          &store_ts, &store_host, &store_port_o, &table, &pending_append, &results, &ok, &result_cls,
                          &progress))
        return NULL;
    PyObject *res = NULL;
    PutCtx c = {.w = (unsigned char *)buf.buf, .file_size = file_size, .max_body = max_body, .base = base,
                .store_ts = store_ts, .table = table, .pending_append = pending_append, .ok = ok,
                .result_cls = result_cls};
    if (!PyList_Check(msgs) || !PyDict_Check(table) || !PyList_Check(results) || !PyList_Check(progress) ||
        PyList_GET_SIZE(progress) < 1 || file_size > buf.len || pos < 0 || pos > file_size || start < 0 ||
        end > PyList_GET_SIZE(msgs) || end > PyList_GET_SIZE(results)) {
        PyErr_SetString(PyExc_ValueError, "append_messages: bad arguments");
        goto done;
    }
    Py_ssize_t i = start;
    if (!put_ctx_host(&c, store_host, store_port_o)) {
        res = Py_BuildValue("(nn)", pos, i);  /* the pure twin packs (or refuses) these */
        goto done;
    }
    c.store_ts_o = PyLong_FromLongLong(store_ts);
    if (c.store_ts_o == NULL) goto done;
    c.direct_result = result_map_for(result_cls);
    if (c.direct_result < 0) goto done;
    for (; i < end; i++) {
        PyObject *r = NULL, *pos_o = NULL;
        int rc = append_one(&c, PyList_GET_ITEM(msgs, i), &pos, &r, &pos_o);
        if (rc < 0) goto done;
        if (rc == 0) break;
        PyList_SetItem(results, i, r);  /* steals r */
        PyList_SetItem(progress, 0, pos_o);  /* steals pos_o: the caller's record of what is accounted */
    }
    res = Py_BuildValue("(nn)", pos, i);
done:
    Py_XDECREF(c.store_ts_o);
    PyBuffer_Release(&buf);
    return res;
}

/* encode_send_ok(opaque, language, version, host, port, phy, queue_id, queue_offset, region, trace_on) -> bytes:
 * see codec/wire.py. The usual arguments are written straight into the frame; anything else (a host that is not 4
 * bytes, a number outside its field, text that is not str) goes through the general encoder with the same map, so
 * the errors are its own. */
static PyObject *s_msgid, *s_queueid, *s_queueoffset, *s_region, *s_traceon;
/* str(v) of a C long long into out (at least 21 bytes, no terminator); returns its length (snprintf's "%lld"
 * cost ~700 instructions a call here, this a tenth) */
static int decimal(char *out, long long v) {
    char tmp[24];
    int n = 0, len = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do { tmp[n++] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) out[len++] = '-';
    while (n) out[len++] = tmp[--n];
    return len;
}

static PyObject *py_encode_send_ok(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "encode_send_ok takes 10 arguments");
        return NULL;
    }
    long long opaque, language, version, port, phy, qid, qoff;
    int ok = int_within(args[0], I32_MIN, I32_MAX, &opaque) && int_within(args[1], 0, 255, &language) &&
             int_within(args[2], -32768, 32767, &version) && PyBytes_Check(args[3]) && PyBytes_GET_SIZE(args[3]) == 4 &&
             int_within(args[4], I32_MIN, I32_MAX, &port) && int_within(args[5], I64_MIN, I64_MAX, &phy) &&
             int_within(args[6], I64_MIN, I64_MAX, &qid) && int_within(args[7], I64_MIN, I64_MAX, &qoff) &&
             PyUnicode_Check(args[8]) && PyUnicode_Check(args[9]);
    Py_ssize_t rlen = 0, tlen = 0;
    const char *region = ok ? PyUnicode_AsUTF8AndSize(args[8], &rlen) : NULL;
    const char *trace = region ? PyUnicode_AsUTF8AndSize(args[9], &tlen) : NULL;
    if (trace == NULL) {
        PyErr_Clear();  /* the general encoder says what is wrong, if anything */
        if (!int_within(args[4], I32_MIN, I32_MAX, &port) || !int_within(args[5], I64_MIN, I64_MAX, &phy)) {
            PyErr_SetString(struct_error, "the offset message id's port or offset does not fit its field");
            return NULL;  /* as the pure twin's struct packing */
        }
        PyObject *id = NULL, *ext = PyDict_New();
        if (ext == NULL) return NULL;
        PyObject *phys = PyTuple_Pack(1, args[5]);
        PyObject *pargs = phys ? PyTuple_Pack(3, args[3], args[4], phys) : NULL;
        id = pargs ? py_offset_msg_ids(NULL, pargs) : NULL;
        Py_XDECREF(phys);
        Py_XDECREF(pargs);
        PyObject *q = id ? PyObject_Str(args[6]) : NULL, *o = q ? PyObject_Str(args[7]) : NULL;
        PyObject *res = NULL;
        if (o && PyDict_SetItem(ext, s_msgid, id) == 0 && PyDict_SetItem(ext, s_queueid, q) == 0 &&
            PyDict_SetItem(ext, s_queueoffset, o) == 0 && PyDict_SetItem(ext, s_region, args[8]) == 0 &&
            PyDict_SetItem(ext, s_traceon, args[9]) == 0) {
            long lang_l = PyLong_AsLong(args[1]), ver_l = PyLong_AsLong(args[2]), op_l = PyLong_AsLong(args[0]);
            Py_buffer none = {0};
            if (!PyErr_Occurred()) res = binary_header(0, lang_l, ver_l, op_l, 1, Py_None, ext, &none);
        }
        Py_XDECREF(id); Py_XDECREF(q); Py_XDECREF(o); Py_DECREF(ext);
        return res;
    }
    char qbuf[24], obuf[24];
    int qlen = decimal(qbuf, qid), olen = decimal(obuf, qoff);
    /* entries: msgId (32 hex), queueId, queueOffset, MSG_REGION, TRACE_ON; each 2 + key + 4 + value */
    Py_ssize_t ext_size = (2 + 5 + 4 + 32) + (2 + 7 + 4 + qlen) + (2 + 11 + 4 + olen) + (2 + 10 + 4 + rlen) +
                          (2 + 8 + 4 + tlen);
    Py_ssize_t hlen = BINARY_HEAD_SIZE + 4 + ext_size;
    PyObject *out = PyBytes_FromStringAndSize(NULL, 8 + hlen);
    if (out == NULL) return NULL;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
    wr_i32(w, 4 + hlen);
    wr_i32(w + 4, ((int64_t)1 << 24) | hlen);
    w += 8;
    wr_i16(w, 0);  /* SUCCESS */
    w[2] = (unsigned char)language;
    wr_i16(w + 3, version);
    wr_i32(w + 5, opaque);
    wr_i32(w + 9, 1);  /* the response flag */
    wr_i32(w + 13, 0);  /* no remark */
    w += BINARY_HEAD_SIZE;
    wr_i32(w, ext_size);
    w += 4;
    static const char hexd[] = "0123456789ABCDEF";
    unsigned char raw[16];
    memcpy(raw, PyBytes_AS_STRING(args[3]), 4);
    wr_i32(raw + 4, port);
    wr_i64(raw + 8, phy);
    char id[32];
    for (int k = 0; k < 16; k++) { id[2 * k] = hexd[raw[k] >> 4]; id[2 * k + 1] = hexd[raw[k] & 15]; }
    const struct { const char *k; Py_ssize_t kl; const char *v; Py_ssize_t vl; } e[5] = {
        {"msgId", 5, id, 32}, {"queueId", 7, qbuf, qlen}, {"queueOffset", 11, obuf, olen},
        {"MSG_REGION", 10, region, rlen}, {"TRACE_ON", 8, trace, tlen}};
    for (int k = 0; k < 5; k++) {
        wr_i16(w, e[k].kl);
        memcpy(w + 2, e[k].k, (size_t)e[k].kl);
        w += 2 + e[k].kl;
        wr_i32(w, e[k].vl);
        memcpy(w + 4, e[k].v, (size_t)e[k].vl);
        w += 4 + e[k].vl;
    }
    return out;
}

/* ------------------------------------------------------------------ the store's single put */
#define STAGE_RELEASE (4LL * 1024 * 1024)  /* store/mapped_file.py STAGE_RELEASE */
/* Attribute names put_single reads and writes (codec/message_append.py names the contract). */
enum { P_CLOCK, P_WALL_OFFSET, P_PUT_LOCK, P_ACQUIRE, P_RELEASE, P_MFQ, P_FILES, P_SEG_SIZE, P_WROTE, P_BEGIN, P_BASE,
       P_MAX_BODY, P_HOST, P_PORT, P_TABLE, P_PENDING, P_APPEND, P_WV, P_STORE_TS, P_AHEAD, P_PREFAULT, P_PREFAULT_FN,
       P_LOW_WATER, P_PREFAULT_END, P_FILE_SIZE, P_AFTER_APPEND, P_ARMED, P_WAKE, P_APPENDED, P_SET, P_STAGED, P_FD,
       P_RELEASED, P_RELEASE_STAGED, P_COUNT };
static const char *const put_names[P_COUNT] = {
    "clock", "wall_offset", "put_lock", "acquire", "release", "mapped_file_queue", "files", "mapped_file_size",
    "wrote_position", "begin_time_in_lock", "file_from_offset", "max_message_size", "store_host", "store_port",
    "topic_queue_table", "pending_dispatch", "append", "wv", "store_timestamp", "_prefault_ahead", "prefault",
    "_prefault", "low_water", "prefault_end", "file_size", "after_append", "dispatch_armed", "wake_on_append", "appended", "set",
    "staged", "fd", "released", "release_staged"};
static PyObject *put_str[P_COUNT];

/* getattr(o, put_str[k]) as a C long long; 0 and an exception set when it is not an int */
static int attr_ll(PyObject *o, int k, long long *out) {
    PyObject *v = PyObject_GetAttr(o, put_str[k]);
    if (v == NULL) return 0;
    int overflow = 0;
    *out = PyLong_Check(v) ? PyLong_AsLongLongAndOverflow(v, &overflow) : -1;
    int ok = PyLong_Check(v) && !overflow && !(*out == -1 && PyErr_Occurred());
    Py_DECREF(v);
    if (!ok && !PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%U is not a 64-bit int", put_str[k]);
    return ok;
}

/* After a record was appended to `mf` (position `pos`): the prefault request the CommitLog's _prefault makes,
 * asked only when the writer nears the end it last asked for (or no prefault service exists yet). 0, or -1 error. */
static int put_prefault(PyObject *cl, PyObject *mf, Py_ssize_t pos) {
    long long ahead, low, asked, fsize;
    if (!attr_ll(cl, P_AHEAD, &ahead)) return -1;
    if (!ahead) return 0;
    PyObject *pf = PyObject_GetAttr(cl, put_str[P_PREFAULT]);
    if (pf == NULL) return -1;
    int wanted = pf == Py_None;
    if (!wanted) {
        if (!attr_ll(pf, P_LOW_WATER, &low) || !attr_ll(mf, P_PREFAULT_END, &asked) ||
            !attr_ll(mf, P_FILE_SIZE, &fsize)) { Py_DECREF(pf); return -1; }
        wanted = pos + low > asked && asked < fsize;
    }
    Py_DECREF(pf);
    if (!wanted) return 0;
    PyObject *r = PyObject_CallMethodOneArg(cl, put_str[P_PREFAULT_FN], mf);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* The append under the held lock: 1 written (*result_out), 0 not (None to the caller), -1 error. */
static int put_locked(PyObject *cl, PyObject *msg, PyObject *ok, PyObject *result_cls, long long now,
                      PyObject **result_out) {
    PyObject *mfq = NULL, *files = NULL, *mf = NULL, *now_o = NULL, *host = NULL, *port = NULL, *table = NULL;
    PyObject *pending = NULL, *append = NULL, *mv = NULL, *r = NULL, *pos_o = NULL;
    int rc = -1;
    long long size, pos, base, max_body;
    mfq = PyObject_GetAttr(cl, put_str[P_MFQ]);
    files = mfq ? PyObject_GetAttr(mfq, put_str[P_FILES]) : NULL;
    if (files == NULL) goto out;
    rc = 0;
    if (!PyList_Check(files) || PyList_GET_SIZE(files) == 0) goto out;  /* no segment yet: the batch way makes one */
    mf = Py_NewRef(PyList_GET_ITEM(files, PyList_GET_SIZE(files) - 1));
    rc = -1;
    if (!attr_ll(cl, P_SEG_SIZE, &size) || !attr_ll(mf, P_WROTE, &pos)) goto out;
    rc = 0;
    if (pos < 0 || pos >= size) goto out;  /* full: the batch way rolls to the next segment */
    rc = -1;
    now_o = PyLong_FromLongLong(now);
    if (now_o == NULL || PyObject_SetAttr(cl, put_str[P_BEGIN], now_o) < 0) goto out;
    if (!attr_ll(mf, P_BASE, &base) || !attr_ll(cl, P_MAX_BODY, &max_body)) goto out;
    host = PyObject_GetAttr(cl, put_str[P_HOST]);
    port = host ? PyObject_GetAttr(cl, put_str[P_PORT]) : NULL;
    table = port ? PyObject_GetAttr(cl, put_str[P_TABLE]) : NULL;
    pending = table ? PyObject_GetAttr(cl, put_str[P_PENDING]) : NULL;
    append = pending ? PyObject_GetAttr(pending, put_str[P_APPEND]) : NULL;
    mv = append ? PyObject_GetAttr(mf, put_str[P_WV]) : NULL;
    if (mv == NULL) goto out;
    PutCtx c = {.file_size = (Py_ssize_t)size, .max_body = (Py_ssize_t)max_body, .base = base, .store_ts = now,
                .store_ts_o = now_o, .table = table, .pending_append = append, .ok = ok, .result_cls = result_cls};
    rc = 0;
    if (!PyDict_Check(table) || !put_ctx_host(&c, host, port)) goto out;  /* the pure twin packs (or refuses) them */
    rc = -1;
    c.direct_result = result_map_for(result_cls);
    if (c.direct_result < 0) goto out;
    Py_buffer buf;
    if (PyObject_GetBuffer(mv, &buf, PyBUF_WRITABLE) < 0) goto out;
    if (size > buf.len) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "put_single: the segment buffer is shorter than mapped_file_size");
        goto out;
    }
    c.w = (unsigned char *)buf.buf;
    Py_ssize_t at = (Py_ssize_t)pos;
    rc = append_one(&c, msg, &at, &r, &pos_o);
    int staged = 0, written = 0;
    long long fd = -1, released = 0;
    if (rc == 1) {  /* a staged segment (MappedFile.stage): the record into the file before its position is published */
        PyObject *st = PyObject_GetAttr(mf, put_str[P_STAGED]);
        staged = st == NULL ? -1 : PyObject_IsTrue(st);
        Py_XDECREF(st);
        if (staged > 0 && (!attr_ll(mf, P_FD, &fd) || !attr_ll(mf, P_RELEASED, &released))) staged = -1;
        if (staged > 0) {
            const unsigned char *src = c.w + pos;
            Py_ssize_t left = at - (Py_ssize_t)pos;
            off_t where = (off_t)pos;
            while (left > 0) {
                ssize_t n = pwrite((int)fd, src, (size_t)left, where);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) break;
                src += n; left -= n; where += n;
            }
            written = left == 0;
        }
    }
    PyBuffer_Release(&buf);
    if (rc != 1) goto out;
    if (staged < 0) { rc = -1; goto out; }
    if (staged > 0) {
        /* a failed pwrite: MappedFile.commit writes it again, or through the mapping; else staging given back */
        PyObject *done = NULL;
        if (!written) {
            done = PyObject_CallMethod(mf, "commit", "nn", (Py_ssize_t)pos, at);
        } else if (at >= size || at - released >= STAGE_RELEASE) {
            PyObject *at_o = PyLong_FromSsize_t(at);
            done = at_o ? PyObject_CallMethodOneArg(mf, put_str[P_RELEASE_STAGED], at_o) : NULL;
            Py_XDECREF(at_o);
        } else {
            done = Py_NewRef(Py_None);
        }
        if (done == NULL) { rc = -1; goto out; }
        Py_DECREF(done);
    }
    /* written and recorded: the segment's wrote position moves past it (the Python loop's `finally`) */
    if (PyObject_SetAttr(mf, put_str[P_WROTE], pos_o) < 0 || PyObject_SetAttr(mf, put_str[P_STORE_TS], now_o) < 0 ||
        put_prefault(cl, mf, at) < 0) {
        rc = -1;
        goto out;
    }
    *result_out = Py_NewRef(r);
out:
    Py_XDECREF(mfq); Py_XDECREF(files); Py_XDECREF(mf); Py_XDECREF(now_o); Py_XDECREF(host); Py_XDECREF(port);
    Py_XDECREF(table); Py_XDECREF(pending); Py_XDECREF(append); Py_XDECREF(mv); Py_XDECREF(r); Py_XDECREF(pos_o);
    return rc;
}

/* put_single(commit_log, msg, ok, result_cls) -> result or None: see codec/message_append.py */
static PyObject *py_put_single(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "put_single takes 4 arguments");
        return NULL;
    }
    PyObject *cl = args[0], *msg = args[1], *ok = args[2], *result_cls = args[3];
    PyObject *clock = PyObject_GetAttr(cl, put_str[P_CLOCK]);
    if (clock == NULL) return NULL;
    PyObject *offset_o = PyObject_GetAttr(clock, put_str[P_WALL_OFFSET]);
    Py_DECREF(clock);
    if (offset_o == NULL) return NULL;
    if (offset_o == Py_None) { Py_DECREF(offset_o); Py_RETURN_NONE; }  /* a clock of its own: the batch way */
    long long offset = PyLong_AsLongLong(offset_o);
    Py_DECREF(offset_o);
    if (offset == -1 && PyErr_Occurred()) return NULL;
    PyObject *lock = PyObject_GetAttr(cl, put_str[P_PUT_LOCK]);
    if (lock == NULL) return NULL;
    PyObject *got = PyObject_CallMethodOneArg(lock, put_str[P_ACQUIRE], Py_False);
    if (got == NULL) { Py_DECREF(lock); return NULL; }
    int held = got == Py_True;
    Py_DECREF(got);
    if (!held) { Py_DECREF(lock); Py_RETURN_NONE; }  /* another thread's put: the batch way waits for the lock */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);  /* time.time_ns()'s clock */
    long long now = ((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec) / 1000000LL + offset;
    PyObject *result = NULL;
    int rc = put_locked(cl, msg, ok, result_cls, now, &result);
    /* the lock is released whatever happened; an error already set is kept over one from here */
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject *zero = PyLong_FromLong(0);
    int reset = zero != NULL && PyObject_SetAttr(cl, put_str[P_BEGIN], zero) == 0;
    Py_XDECREF(zero);
    PyObject *released = PyObject_CallMethodNoArgs(lock, put_str[P_RELEASE]);
    Py_DECREF(lock);
    if (released == NULL || !reset) rc = -1;
    Py_XDECREF(released);
    if (exc_type != NULL) PyErr_Restore(exc_type, exc_value, exc_tb);
    if (rc < 0) {
        Py_XDECREF(result);
        return NULL;
    }
    if (rc == 0) Py_RETURN_NONE;
    /* appended: the CommitLog's notify_append, inlined (its event-loop hook unless a dispatch is armed there, else
     * its event if the dispatcher sleeps) */
    PyObject *hook = PyObject_GetAttr(cl, put_str[P_AFTER_APPEND]);
    PyObject *called = NULL;
    if (hook != NULL && hook != Py_None) {
        PyObject *armed = PyObject_GetAttr(cl, put_str[P_ARMED]);
        int a = armed == NULL ? -1 : PyObject_IsTrue(armed);
        Py_XDECREF(armed);
        called = a < 0 ? NULL : a ? Py_NewRef(Py_None) : PyObject_CallNoArgs(hook);
    } else if (hook != NULL) {
        PyObject *wake = PyObject_GetAttr(cl, put_str[P_WAKE]);
        int w = wake == NULL ? -1 : PyObject_IsTrue(wake);
        Py_XDECREF(wake);
        if (w > 0) {
            PyObject *ev = PyObject_GetAttr(cl, put_str[P_APPENDED]);
            called = ev ? PyObject_CallMethodNoArgs(ev, put_str[P_SET]) : NULL;
            Py_XDECREF(ev);
        } else if (w == 0) {
            called = Py_NewRef(Py_None);
        }
    }
    Py_XDECREF(hook);
    if (called == NULL) { Py_DECREF(result); return NULL; }
    Py_DECREF(called);
    return result;
}

/* ------------------------------------------------------------------ the broker's single send */
enum { M_BODY, M_BORN_HOST, M_BORN_PORT, M_BORN_TS, M_DELAY_LEVEL, M_DELAY_MS, M_FLAG, M_KEYS, M_LIMITS, M_PREPARED,
       M_PROPS_BYTES, M_QUEUE_ID, M_RECONSUME, M_SYS_FLAG, M_TAGS, M_TAIL, M_TOPIC, M_TOPIC_BYTES, M_UNIQ, M_COUNT };
static const char *const inner_names[M_COUNT] = {
    "body", "born_host", "born_port", "born_timestamp", "delay_level", "delay_ms", "flag", "keys", "limits_error",
    "prepared_transaction_offset", "properties_bytes", "queue_id", "reconsume_times", "sys_flag", "tags", "tail",
    "topic", "topic_bytes", "uniq_key"};
static PyObject *inner_str[M_COUNT];
static SlotMap inner_map;
/* header letters and property names v2_message reads */
static PyObject *s_b, *s_e, *s_f, *s_g, *s_h, *s_i, *s_j, *s_tags, *s_keys, *s_uniq, *s_delay, *s_cluster, *s_tran, *s_wait,
    *s_true;

/* int(h.get(letter) or 0) as a new reference; NULL with ValueError cleared and *none set when int() refuses it
 * (the pure twin answers None), NULL with another exception set otherwise */
static PyObject *header_int(PyObject *h, PyObject *letter, int *none) {
    PyObject *v = PyDict_GetItemWithError(h, letter);  /* borrowed */
    if (v == NULL && PyErr_Occurred()) return NULL;
    if (v != NULL && PyUnicode_CheckExact(v) && PyUnicode_IS_ASCII(v)) {
        /* the usual value: ASCII digits, an optional '-', at most 18 of them (int() of it without the generic
         * parser); anything else (spaces, '+', '_', other digits, longer) goes through int() below */
        Py_ssize_t len = PyUnicode_GET_LENGTH(v), k = 0;
        const char *d = (const char *)PyUnicode_DATA(v);
        int neg = len > 0 && d[0] == '-';
        k = neg;
        if (len - k >= 1 && len - k <= 18) {
            long long acc = 0;
            for (; k < len && d[k] >= '0' && d[k] <= '9'; k++) acc = acc * 10 + (d[k] - '0');
            if (k == len) return PyLong_FromLongLong(neg ? -acc : acc);
        }
    }
    int truth = v == NULL ? 0 : PyObject_IsTrue(v);
    if (truth < 0) return NULL;
    if (!truth) return PyLong_FromLong(0);
    PyObject *n = PyNumber_Long(v);
    if (n == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) { PyErr_Clear(); *none = 1; }
    return n;
}

/* v2_message's work, its arguments parsed (h a dict) */
static PyObject *v2_message_c(PyObject *factory, PyObject *h, PyObject *body, long long write_queue_nums,
                              PyObject *cluster, PyObject *born_host, PyObject *born_port) {
    if (!PyType_Check(factory)) { PyErr_SetString(PyExc_TypeError, "v2_message: factory must be a class"); return NULL; }
    int mapped = slot_map_for(&inner_map, (PyTypeObject *)factory, inner_str, M_COUNT);
    if (mapped < 0) return NULL;
    if (!mapped) { PyErr_SetString(PyExc_TypeError, "v2_message: the factory's fields are not all slots"); return NULL; }
    PyObject *topic = PyDict_GetItemWithError(h, s_b);  /* borrowed */
    if (topic == NULL) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, s_b);
        return NULL;
    }
    PyObject *v[M_COUNT] = {NULL};
    PyObject *props = NULL, *res = NULL, *raw = NULL;
    int none = 0;
    long long q, sf, x;
    int overflow;
    /* the ints in the pure twin's order: the first one int() refuses answers None */
    if ((v[M_QUEUE_ID] = header_int(h, s_e, &none)) == NULL ||
        (v[M_SYS_FLAG] = header_int(h, s_f, &none)) == NULL ||
        (v[M_BORN_TS] = header_int(h, s_g, &none)) == NULL ||
        (v[M_FLAG] = header_int(h, s_h, &none)) == NULL ||
        (v[M_RECONSUME] = header_int(h, s_j, &none)) == NULL)
        goto out;
    /* outside the record's fields (i32, i64): None, the general path decides */
    q = PyLong_AsLongLongAndOverflow(v[M_QUEUE_ID], &overflow);
    if (overflow || q < 0 || q >= write_queue_nums) goto none_out;
    sf = PyLong_AsLongLongAndOverflow(v[M_SYS_FLAG], &overflow);
    if (overflow || sf < I32_MIN || sf > I32_MAX || (sf & TX_MASK)) goto none_out;
    x = PyLong_AsLongLongAndOverflow(v[M_FLAG], &overflow);
    if (overflow || x < I32_MIN || x > I32_MAX) goto none_out;
    x = PyLong_AsLongLongAndOverflow(v[M_RECONSUME], &overflow);
    if (overflow || x < I32_MIN || x > I32_MAX) goto none_out;
    (void)PyLong_AsLongLongAndOverflow(v[M_BORN_TS], &overflow);
    if (overflow) goto none_out;
    if (PyErr_Occurred()) goto out;
    raw = PyDict_GetItemWithError(h, s_i);  /* borrowed */
    if (raw == NULL && PyErr_Occurred()) goto out;
    {
        int truth = raw == NULL ? 0 : PyObject_IsTrue(raw);
        if (truth < 0) goto out;
        props = py_decode_properties(NULL, truth ? raw : empty_str);
    }
    if (props == NULL) goto out;
    PyObject *tran = PyDict_GetItemWithError(props, s_tran);  /* borrowed */
    if (tran == NULL && PyErr_Occurred()) goto out;
    if (tran != NULL) {
        int eq = PyObject_RichCompareBool(tran, s_true, Py_EQ);
        if (eq < 0) goto out;
        if (eq) goto none_out;
    }
    if (PyDict_DelItem(props, s_wait) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_KeyError)) goto out;
        PyErr_Clear();
    }
    if (PyDict_SetItem(props, s_cluster, cluster) < 0) goto out;
    /* MessageInner.from_encoded, field by field */
    if ((v[M_PROPS_BYTES] = py_encode_properties(NULL, props)) == NULL) goto out;
    if (!PyUnicode_Check(topic)) { PyErr_SetString(PyExc_TypeError, "the topic is not a str"); goto out; }
    if ((v[M_TOPIC_BYTES] = PyUnicode_AsUTF8String(topic)) == NULL) goto out;
    Py_ssize_t tlen = PyBytes_GET_SIZE(v[M_TOPIC_BYTES]), plen = PyBytes_GET_SIZE(v[M_PROPS_BYTES]);
    if (tlen <= 0 || tlen > 127 || plen > 32767 || q >= (1LL << 31)) {
        v[M_LIMITS] = Py_NewRef(Py_True);
        v[M_TAIL] = PyBytes_FromStringAndSize("", 0);
    } else {
        v[M_LIMITS] = Py_NewRef(Py_False);
        v[M_TAIL] = PyBytes_FromStringAndSize(NULL, 1 + tlen + 2 + plen);
        if (v[M_TAIL] != NULL) {
            unsigned char *t = (unsigned char *)PyBytes_AS_STRING(v[M_TAIL]);
            t[0] = (unsigned char)tlen;
            memcpy(t + 1, PyBytes_AS_STRING(v[M_TOPIC_BYTES]), (size_t)tlen);
            t[1 + tlen] = (unsigned char)(plen >> 8);
            t[2 + tlen] = (unsigned char)plen;
            memcpy(t + 3 + tlen, PyBytes_AS_STRING(v[M_PROPS_BYTES]), (size_t)plen);
        }
    }
    if (v[M_TAIL] == NULL) goto out;
    PyObject *const names[3] = {s_tags, s_keys, s_uniq};
    const int slots3[3] = {M_TAGS, M_KEYS, M_UNIQ};
    for (int k = 0; k < 3; k++) {
        PyObject *got = PyDict_GetItemWithError(props, names[k]);  /* borrowed */
        if (got == NULL && PyErr_Occurred()) goto out;
        v[slots3[k]] = Py_NewRef(got ? got : Py_None);
    }
    {   /* _level(props.get(DELAY)): 0 when absent, empty or not an int, else max(0, int(raw)) */
        PyObject *d = PyDict_GetItemWithError(props, s_delay);  /* borrowed */
        if (d == NULL && PyErr_Occurred()) goto out;
        int truth = d == NULL ? 0 : PyObject_IsTrue(d);
        if (truth < 0) goto out;
        PyObject *level = truth ? PyNumber_Long(d) : PyLong_FromLong(0);
        if (level == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError)) goto out;
            PyErr_Clear();
            level = PyLong_FromLong(0);
            if (level == NULL) goto out;
        } else if (_PyLong_Sign(level) < 0) {
            Py_SETREF(level, PyLong_FromLong(0));
            if (level == NULL) goto out;
        }
        v[M_DELAY_LEVEL] = level;
    }
    v[M_TOPIC] = Py_NewRef(topic);
    v[M_BODY] = Py_NewRef(body);
    v[M_DELAY_MS] = PyLong_FromLong(0);
    v[M_PREPARED] = PyLong_FromLong(0);
    v[M_BORN_HOST] = Py_NewRef(born_host);
    v[M_BORN_PORT] = Py_NewRef(born_port);
    if (v[M_DELAY_MS] == NULL || v[M_PREPARED] == NULL) goto out;
    {
        PyTypeObject *tp = (PyTypeObject *)factory;
        PyObject *obj = tp->tp_alloc(tp, 0);
        if (obj == NULL) goto out;
        for (int k = 0; k < M_COUNT; k++) {  /* steals each reference */
            *(PyObject **)((char *)obj + inner_map.off[k]) = v[k];
            v[k] = NULL;
        }
        res = obj;
    }
    goto out;
none_out:
    res = Py_NewRef(Py_None);
out:
    for (int k = 0; k < M_COUNT; k++) Py_XDECREF(v[k]);
    Py_XDECREF(props);
    if (res == NULL && !PyErr_Occurred() && none) res = Py_NewRef(Py_None);
    return res;
}

/* v2_message(factory, h, body, write_queue_nums, cluster, born_host, born_port): see codec/send_v2.py */
static PyObject *py_v2_message(PyObject *self, PyObject *args) {
    PyObject *factory, *h, *body, *cluster, *born_host, *born_port;
    long long write_queue_nums;
    if (!PyArg_ParseTuple(args, "OO!OLOOO", &factory, &PyDict_Type, &h, &body, &write_queue_nums, &cluster,
                          &born_host, &born_port))
        return NULL;
    return v2_message_c(factory, h, body, write_queue_nums, cluster, born_host, born_port);
}

/* ------------------------------------------------------------------ the broker's send lane */
/* serve_send_v2(ctx, data, conn) -> the answer frame (bytes), or None: see server/send_fast.py (make_lane), which builds ctx
 * (a tuple, L_* order) and states the contract. `data` is what one read brought; the lane answers only when it is
 * exactly one ROCKETMQ frame of a plain SEND_MESSAGE_V2 request, every check of the Python path passes (the same
 * checks: produce.send, send_fast.single_v2, MessageStore.put_message) and the record is stored (PUT_OK). Anything
 * else answers None before anything is stored, so the general path decides from the same bytes. */
enum { L_TOPICS, L_VALID, L_CONFIG, L_STORE, L_CL, L_STATS, L_TRACER, L_INNER, L_RESULT, L_OK, L_LANGUAGE,
       L_VERSION, L_MAX_FRAME, L_COUNT };
enum { LA_TABLE, LA_PERM, LA_WQN, LA_ACL, LA_ROLE, LA_CLUSTER, LA_REGION, LA_TRACE_ON, LA_SYNC_FLUSH, LA_RUNNING,
       LA_WRITABLE, LA_GUARD, LA_FULL, LA_FLUSH_FAILURE, LA_ERROR, LA_ENABLED, LA_PUT_COUNT, LA_ATTRIBUTES, LA_BORN,
       LA_M, LA_SLAVE, LA_SYNC_MASTER, LA_RETRY, LA_TRUE, LA_FALSE, LA_COUNT };
static const char *const lane_names[LA_COUNT] = {
    "table", "perm", "write_queue_nums", "acl_enable", "broker_role", "broker_cluster_name", "region_id", "trace_on",
    "sync_flush", "running", "_writable_role", "disk_guard", "full", "flush_failure", "error", "enabled", "put_count",
    "attributes", "born", "m", "SLAVE", "SYNC_MASTER", "%RETRY%", "true", "false"};
static PyObject *lane_str[LA_COUNT];
#define SEND_MESSAGE_V2_CODE 310
#define PERM_WRITE_BIT 2

/* the truth of getattr(o, lane_str[k]): 1, 0, or -1 with an exception set */
static int lane_truth(PyObject *o, int k) {
    PyObject *v = PyObject_GetAttr(o, lane_str[k]);
    if (v == NULL) return -1;
    int t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return t;
}

/* getattr(o, lane_str[k]) == lane_str[text] (a str compare): 1, 0, or -1 with an exception set */
static int lane_equals(PyObject *o, int k, int text) {
    PyObject *v = PyObject_GetAttr(o, lane_str[k]);
    if (v == NULL) return -1;
    int eq = PyObject_RichCompareBool(v, lane_str[text], Py_EQ);
    Py_DECREF(v);
    return eq;
}

/* 1 when nothing in the broker's or store's state sends this request the general way (ACL on, a slave, tracing,
 * SYNC_FLUSH, a SYNC_MASTER, a store that refuses puts), 0 when something does, -1 error */
static int lane_open(PyObject *const *ctx) {
    PyObject *config = ctx[L_CONFIG], *store = ctx[L_STORE];
    int t;
    if ((t = lane_truth(config, LA_ACL)) != 0) return t < 0 ? -1 : 0;
    if ((t = lane_equals(config, LA_ROLE, LA_SLAVE)) != 0) return t < 0 ? -1 : 0;
    if ((t = lane_equals(config, LA_ROLE, LA_SYNC_MASTER)) != 0) return t < 0 ? -1 : 0;
    if ((t = lane_truth(ctx[L_TRACER], LA_ENABLED)) != 0) return t < 0 ? -1 : 0;
    if ((t = lane_truth(store, LA_SYNC_FLUSH)) != 0) return t < 0 ? -1 : 0;
    if ((t = lane_truth(store, LA_RUNNING)) != 1) return t;
    if ((t = lane_truth(store, LA_WRITABLE)) != 1) return t;
    PyObject *part = PyObject_GetAttr(store, lane_str[LA_GUARD]);
    if (part == NULL) return -1;
    t = lane_truth(part, LA_FULL);
    Py_DECREF(part);
    if (t != 0) return t < 0 ? -1 : 0;
    part = PyObject_GetAttr(store, lane_str[LA_FLUSH_FAILURE]);
    if (part == NULL) return -1;
    t = lane_truth(part, LA_ERROR);
    Py_DECREF(part);
    return t < 0 ? -1 : !t;
}

/* The topic's config when the lane may take a send to it (exists, writable, a name already found valid, not a
 * retry topic), else None; NULL with an exception set */
static PyObject *lane_topic(PyObject *const *ctx, PyObject *topic) {
    if (!PyUnicode_CheckExact(topic)) return Py_NewRef(Py_None);
    PyObject *valid = PyDict_GetItemWithError(ctx[L_VALID], topic);  /* borrowed; single_v2 fills it */
    if (valid == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    if (valid != Py_True) return Py_NewRef(Py_None);
    int retry = PyUnicode_Tailmatch(topic, lane_str[LA_RETRY], 0, PY_SSIZE_T_MAX, -1);
    if (retry < 0) return NULL;
    if (retry) return Py_NewRef(Py_None);
    PyObject *table = PyObject_GetAttr(ctx[L_TOPICS], lane_str[LA_TABLE]);  /* read each time: upserts replace it */
    if (table == NULL) return NULL;
    PyObject *cfg = PyDict_Check(table) ? PyDict_GetItemWithError(table, topic) : NULL;  /* borrowed */
    Py_XINCREF(cfg);
    Py_DECREF(table);
    if (cfg == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    long long perm;
    PyObject *p = PyObject_GetAttr(cfg, lane_str[LA_PERM]);
    int ok = p != NULL && int_within(p, I32_MIN, I32_MAX, &perm);
    Py_XDECREF(p);
    if (PyErr_Occurred()) { Py_DECREF(cfg); return NULL; }
    if (!ok || !(perm & PERM_WRITE_BIT)) { Py_DECREF(cfg); return Py_NewRef(Py_None); }
    return cfg;
}

static PyObject *py_serve_send_v2(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != L_COUNT) {
        PyErr_SetString(PyExc_TypeError, "serve_send_v2 takes (ctx, data, conn), ctx a tuple from send_fast.make_lane");
        return NULL;
    }
    PyObject *const *ctx = &PyTuple_GET_ITEM(args[0], 0);
    PyObject *data = args[1], *conn = args[2];
    if (!PyBytes_CheckExact(data) || PyBytes_GET_SIZE(data) < 8 + BINARY_HEAD_SIZE + 4) Py_RETURN_NONE;
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    long long max_frame = PyLong_AsLongLong(ctx[L_MAX_FRAME]);
    if (max_frame == -1 && PyErr_Occurred()) return NULL;
    long long length = rd_i32(b);
    uint32_t word = rd_u32(b + 4);
    long long hlen = word & 0xFFFFFF;
    /* one whole ROCKETMQ frame (as decode_frame takes it) of a SEND_MESSAGE_V2 request: flag 0, neither a response
     * nor oneway */
    if (length + 4 != n || length + 4 > max_frame || (word >> 24) != 1 || length < 4 || hlen > length - 4 ||
        hlen < BINARY_HEAD_SIZE + 4 || rd_i16(b + 8) != SEND_MESSAGE_V2_CODE || rd_i32(b + 8 + 9) != 0)
        Py_RETURN_NONE;
    int usable = lane_open(ctx);
    if (usable <= 0) return usable < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *attributes = PyObject_GetAttr(conn, lane_str[LA_ATTRIBUTES]);
    if (attributes == NULL) return NULL;
    PyObject *born = PyDict_Check(attributes) ? PyDict_GetItemWithError(attributes, lane_str[LA_BORN]) : NULL;
    Py_XINCREF(born);
    Py_DECREF(attributes);
    if (born == NULL || !PyTuple_Check(born) || PyTuple_GET_SIZE(born) != 2) {  /* the first send: single_v2 sets it */
        Py_XDECREF(born);
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    BinaryHeader h = {0};
    PyObject *cfg = NULL, *body = NULL, *wqn = NULL, *cluster = NULL, *msg = NULL, *r = NULL, *res = NULL;
    PyObject *region = NULL, *trace = NULL;
    if (decode_header_into(b + 8, (Py_ssize_t)hlen, &h) < 0) {
        if (PyErr_ExceptionMatches(CodecError) || PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            res = Py_NewRef(Py_None);  /* the general decoder says why */
        }
        Py_DECREF(born);
        return res;
    }
    PyObject *topic = PyDict_GetItemWithError(h.ext, s_b);  /* borrowed */
    PyObject *qtext = topic ? PyDict_GetItemWithError(h.ext, s_e) : NULL;
    PyObject *batch = qtext ? PyDict_GetItemWithError(h.ext, lane_str[LA_M]) : NULL;
    if (PyErr_Occurred()) goto out;
    if (topic == NULL || qtext == NULL || !PyUnicode_Check(qtext) || PyUnicode_GET_LENGTH(qtext) == 0) goto none;
    if (batch != NULL && !(PyUnicode_CheckExact(batch) && _PyUnicode_EqualToASCIIString(batch, "false"))) {
        /* single_v2: btext and btext.lower() == "true" ("false", what clients send, without the call) */
        if (!PyUnicode_Check(batch)) goto none;
        PyObject *lower = PyObject_CallMethod(batch, "lower", NULL);
        if (lower == NULL) goto out;
        int eq = PyObject_RichCompareBool(lower, lane_str[LA_TRUE], Py_EQ);
        Py_DECREF(lower);
        if (eq != 0) { if (eq < 0) goto out; goto none; }
    }
    if ((cfg = lane_topic(ctx, topic)) == NULL) goto out;
    if (cfg == Py_None) goto none;
    wqn = PyObject_GetAttr(cfg, lane_str[LA_WQN]);
    cluster = wqn ? PyObject_GetAttr(ctx[L_CONFIG], lane_str[LA_CLUSTER]) : NULL;
    if (cluster == NULL) goto out;
    long long queue_nums;
    if (!int_within(wqn, 0, I32_MAX, &queue_nums)) goto none;
    body = PyBytes_FromStringAndSize((const char *)b + 8 + hlen, n - 8 - (Py_ssize_t)hlen);
    if (body == NULL) goto out;
    msg = v2_message_c(ctx[L_INNER], h.ext, body, queue_nums, cluster, PyTuple_GET_ITEM(born, 0),
                       PyTuple_GET_ITEM(born, 1));
    if (msg == NULL) goto out;
    if (msg == Py_None) goto none;
    /* MessageInner.delay_level and limits_error, through the slots v2_message_c filled: a delayed message or one
     * over a limit goes the general way (the schedule's transform, the store's refusal) */
    PyObject *level = *(PyObject **)((char *)msg + inner_map.off[M_DELAY_LEVEL]);
    PyObject *limits = *(PyObject **)((char *)msg + inner_map.off[M_LIMITS]);
    if (level == NULL || limits != Py_False || !PyLong_CheckExact(level) || _PyLong_Sign(level) != 0) goto none;
    PyObject *put_args[4] = {ctx[L_CL], msg, ctx[L_OK], ctx[L_RESULT]};
    if ((r = py_put_single(NULL, put_args, 4)) == NULL) goto out;
    if (r == Py_None) goto none;  /* the lock was taken, the segment full: the batch way, from the start */
    PyObject *status = PyObject_GetAttr(r, result_str[R_STATUS]);
    if (status == NULL) goto out;
    Py_DECREF(status);
    if (status != ctx[L_OK]) goto none;  /* refused, nothing written: the general path answers the same refusal */
    {   /* ctl.stats.put_count += 1 */
        PyObject *count = PyObject_GetAttr(ctx[L_STATS], lane_str[LA_PUT_COUNT]);
        PyObject *one = count ? PyLong_FromLong(1) : NULL;
        PyObject *sum = one ? PyNumber_Add(count, one) : NULL;
        int set = sum ? PyObject_SetAttr(ctx[L_STATS], lane_str[LA_PUT_COUNT], sum) : -1;
        Py_XDECREF(count); Py_XDECREF(one); Py_XDECREF(sum);
        if (set < 0) goto out;
    }
    region = PyObject_GetAttr(ctx[L_CONFIG], lane_str[LA_REGION]);
    int traced = region ? lane_truth(ctx[L_CONFIG], LA_TRACE_ON) : -1;
    if (traced < 0) goto out;
    trace = Py_NewRef(lane_str[traced ? LA_TRUE : LA_FALSE]);
    {
        PyObject *host = PyObject_GetAttr(r, result_str[R_HOST]), *port = NULL, *phy = NULL, *qoff = NULL;
        PyObject *opaque = NULL, *qid = *(PyObject **)((char *)msg + inner_map.off[M_QUEUE_ID]);
        if (host && (port = PyObject_GetAttr(r, result_str[R_PORT])) && (phy = PyObject_GetAttr(r, result_str[R_PHY]))
            && (qoff = PyObject_GetAttr(r, result_str[R_QOFF])) && (opaque = PyLong_FromLong(rd_i32(b + 8 + 5)))) {
            PyObject *enc[10] = {opaque, ctx[L_LANGUAGE], ctx[L_VERSION], host, port, phy, qid, qoff, region, trace};
            res = py_encode_send_ok(NULL, enc, 10);
        }
        Py_XDECREF(host); Py_XDECREF(port); Py_XDECREF(phy); Py_XDECREF(qoff); Py_XDECREF(opaque);
    }
    goto out;
none:
    res = Py_NewRef(Py_None);
out:
    Py_XDECREF(cfg); Py_XDECREF(body); Py_XDECREF(wqn); Py_XDECREF(cluster); Py_XDECREF(msg); Py_XDECREF(r);
    Py_XDECREF(region); Py_XDECREF(trace); Py_DECREF(born); Py_XDECREF(h.remark); Py_XDECREF(h.ext);
    return res;
}

/* int_within for an exact int only (no bool, no subclass): what pack_units' pure twin takes */
static int exact_int_within(PyObject *o, long long lo, long long hi, long long *out) {
    return PyLong_CheckExact(o) && int_within(o, lo, hi, out);
}

/* pack_units(buf, pos, end, units, start, stop, expect, min_end) -> n: see codec/consume_queue.py */
static PyObject *py_pack_units(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, end, start, stop;
    long long expect, min_end;
    PyObject *units;
    if (!PyArg_ParseTuple(args, "w*nnOnnLL", &buf, &pos, &end, &units, &start, &stop, &expect, &min_end))
        return NULL;
    if (!PyList_Check(units) || pos < 0 || end > buf.len || start < 0 || stop > PyList_GET_SIZE(units)) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "pack_units: bad arguments");
        return NULL;
    }
    unsigned char *w = (unsigned char *)buf.buf;
    Py_ssize_t n = 0;
    for (Py_ssize_t i = start; i < stop; i++) {
        if (pos + 20 > end) break;
        PyObject *u = PyList_GET_ITEM(units, i);
        if (!PyTuple_CheckExact(u) || PyTuple_GET_SIZE(u) != 4) break;
        long long phy, size, tags, qoff;
        if (!exact_int_within(PyTuple_GET_ITEM(u, 0), I64_MIN, I64_MAX, &phy) ||
            !exact_int_within(PyTuple_GET_ITEM(u, 1), I32_MIN, I32_MAX, &size) ||
            !exact_int_within(PyTuple_GET_ITEM(u, 2), I64_MIN, I64_MAX, &tags) ||
            !exact_int_within(PyTuple_GET_ITEM(u, 3), I64_MIN, I64_MAX, &qoff) ||
            expect > I64_MAX - n || qoff != expect + n)
            break;
        /* phy + size past 64 bits, or not past min_end (a replay): stop, as the pure twin does */
        if ((size > 0 && phy > I64_MAX - size) || (size < 0 && phy < I64_MIN - size)) break;
        if (phy + size <= min_end) break;
        min_end = phy + size;
        wr_i64(w + pos, phy);
        wr_i32(w + pos + 8, size);
        wr_i64(w + pos + 12, tags);
        pos += 20;
        n++;
    }
    PyBuffer_Release(&buf);
    return PyLong_FromSsize_t(n);
}

static PyObject *popleft_str;  /* "popleft" */

/* take_pending(pending, batch, offset, limit, max_n) -> offset: see codec/consume_queue.py */
static PyObject *py_take_pending(PyObject *self, PyObject *args) {
    PyObject *pending, *batch, *offset;
    Py_ssize_t max_n;
    PyObject *limit;
    if (!PyArg_ParseTuple(args, "OO!OOn", &pending, &PyList_Type, &batch, &offset, &limit, &max_n)) return NULL;
    Py_INCREF(offset);
    for (;;) {
        Py_ssize_t left = PyObject_Length(pending);
        if (left < 0) goto fail;
        if (left == 0 || PyList_GET_SIZE(batch) >= max_n) break;
        PyObject *d = PySequence_GetItem(pending, 0);
        if (d == NULL) goto fail;
        PyObject *phy = PySequence_GetItem(d, 0), *size = phy ? PySequence_GetItem(d, 1) : NULL;
        Py_DECREF(d);
        if (size == NULL) { Py_XDECREF(phy); goto fail; }
        int at = PyObject_RichCompareBool(phy, offset, Py_EQ);
        Py_DECREF(phy);
        PyObject *after = at > 0 ? PyNumber_Add(offset, size) : NULL;
        Py_DECREF(size);
        if (at < 0 || (at > 0 && after == NULL)) goto fail;
        if (!at) break;
        int over = PyObject_RichCompareBool(after, limit, Py_GT);
        if (over != 0) { Py_DECREF(after); if (over < 0) goto fail; break; }
        PyObject *taken = PyObject_CallMethodNoArgs(pending, popleft_str);
        if (taken == NULL || PyList_Append(batch, taken) < 0) { Py_XDECREF(taken); Py_DECREF(after); goto fail; }
        Py_DECREF(taken);
        Py_SETREF(offset, after);
        left = PyObject_Length(pending);
        if (left < 0) goto fail;
        if (left > 0) {
            PyObject *nd = PySequence_GetItem(pending, 0);
            PyObject *nphy = nd ? PySequence_GetItem(nd, 0) : NULL;
            Py_XDECREF(nd);
            if (nphy == NULL) goto fail;
            int same = PyObject_RichCompareBool(nphy, offset, Py_EQ);
            Py_DECREF(nphy);
            if (same < 0) goto fail;
            if (!same) break;  /* the caller looks for a segment roll */
        }
    }
    return offset;
fail:
    Py_DECREF(offset);
    return NULL;
}

/* populate_write(buf, start, length) -> bool: fault in, writable, the pages of a shared writable mapping under
 * buf[start:start+length] (madvise MADV_POPULATE_WRITE, widened to whole pages), with the GIL released. Contents
 * are not changed. False when the kernel (or platform) has no such advice; OSError for other failures. */
#define POPULATE_SLICE ((uintptr_t)128 * 1024)  /* pages.py SLICE */
static PyObject *py_populate_write(PyObject *self, PyObject *args) {
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
static PyObject *py_read_in(PyObject *self, PyObject *args) {
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
static PyObject *py_sync_range(PyObject *self, PyObject *args) {
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

/* ------------------------------------------------------------------ BytesReceiver
 * BytesReceiver(size, prefix): a bytes object of ``size`` bytes under construction, starting with ``prefix``.
 * recv(sock, flags) receives into the rest (one recv() call, GIL released; EINTR runs the signal handlers and
 * retries, as socket.recv_into does) and returns the count, 0 when the peer closed; OSError (BlockingIOError
 * when SO_RCVTIMEO expired) as socket.recv_into raises. take() hands the bytes object over once it is full;
 * until then nothing else sees it, so filling it in place is safe. The pure twin (remoting/receive.py) fills a
 * bytearray and copies it on take(); this one saves the zero-filled buffer and the copy (a pulled megabyte). */
typedef struct {
    PyObject_HEAD
    PyObject *data;      /* the bytes being filled; NULL once taken */
    Py_ssize_t filled;
    Py_ssize_t size;
} Receiver;

static PyObject *receiver_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    Py_ssize_t size;
    Py_buffer prefix;
    static char *kwlist[] = {"size", "prefix", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ny*", kwlist, &size, &prefix)) return NULL;
    if (size < 0 || prefix.len > size) {
        PyBuffer_Release(&prefix);
        PyErr_SetString(PyExc_ValueError, "BytesReceiver: the prefix is longer than the size");
        return NULL;
    }
    Receiver *self = (Receiver *)type->tp_alloc(type, 0);
    if (self == NULL) {
        PyBuffer_Release(&prefix);
        return NULL;
    }
    self->data = PyBytes_FromStringAndSize(NULL, size);
    if (self->data == NULL) {
        PyBuffer_Release(&prefix);
        Py_DECREF(self);
        return NULL;
    }
    memcpy(PyBytes_AS_STRING(self->data), prefix.buf, (size_t)prefix.len);
    self->filled = prefix.len;
    self->size = size;
    PyBuffer_Release(&prefix);
    return (PyObject *)self;
}

static void receiver_dealloc(Receiver *self) {
    Py_XDECREF(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *receiver_recv(Receiver *self, PyObject *args) {
    PyObject *sock;
    int flags = 0;
    if (!PyArg_ParseTuple(args, "O|i", &sock, &flags)) return NULL;
    if (self->data == NULL) {
        PyErr_SetString(PyExc_ValueError, "BytesReceiver: already taken");
        return NULL;
    }
    PyObject *fileno = PyObject_CallMethod(sock, "fileno", NULL);
    if (fileno == NULL) return NULL;
    long fd = PyLong_AsLong(fileno);
    Py_DECREF(fileno);
    if (fd == -1 && PyErr_Occurred()) return NULL;
    if (fd < 0 || fd > INT_MAX) {  /* a closed socket's fileno() is -1: recv_into would say EBADF */
        errno = EBADF;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    char *p = PyBytes_AS_STRING(self->data) + self->filled;
    size_t want = (size_t)(self->size - self->filled);
    for (;;) {
        ssize_t n;
        int err = 0;
        Py_BEGIN_ALLOW_THREADS
        n = recv((int)fd, p, want, flags);
        if (n < 0) err = errno;
        Py_END_ALLOW_THREADS
        if (n >= 0) {
            self->filled += n;
            return PyLong_FromSsize_t(n);
        }
        if (err != EINTR) {
            errno = err;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        if (PyErr_CheckSignals() < 0) return NULL;
    }
}

static PyObject *receiver_take(Receiver *self, PyObject *Py_UNUSED(ignored)) {
    if (self->data == NULL) {
        PyErr_SetString(PyExc_ValueError, "BytesReceiver: already taken");
        return NULL;
    }
    if (self->filled < self->size) {
        PyErr_Format(PyExc_ValueError, "BytesReceiver: %zd of %zd bytes received", self->filled, self->size);
        return NULL;
    }
    PyObject *out = self->data;
    self->data = NULL;
    return out;
}

static PyMethodDef receiver_methods[] = {
    {"recv", (PyCFunction)receiver_recv, METH_VARARGS, "Receive into the rest; the count, 0 at end of stream."},
    {"take", (PyCFunction)receiver_take, METH_NOARGS, "The full bytes object (once)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef receiver_members[] = {
    {"filled", T_PYSSIZET, offsetof(Receiver, filled), READONLY, "bytes in place so far"},
    {"size", T_PYSSIZET, offsetof(Receiver, size), READONLY, "bytes wanted in all"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ReceiverType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "broker_core.codec._native.BytesReceiver",
    .tp_basicsize = sizeof(Receiver),
    .tp_dealloc = (destructor)receiver_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A bytes object of a given size, filled from a socket (see remoting/receive.py).",
    .tp_methods = receiver_methods,
    .tp_members = receiver_members,
    .tp_new = receiver_new,
};

static PyMethodDef methods[] = {
    {"java_hash_u32", py_java_hash_u32, METH_O, "Java String.hashCode() of a str, unsigned 32-bit."},
    {"index_key_hash", py_index_key_hash, METH_O, "RocketMQ's IndexFile hash of topic#key."},
    {"index_entries", py_index_entries, METH_VARARGS, "Index entries of dispatched records."},
    {"index_put", py_index_put, METH_VARARGS, "Insert index entries into an IndexFile buffer."},
    {"decode_properties", py_decode_properties, METH_O, "Decode a properties string."},
    {"encode_properties", py_encode_properties, METH_O, "Encode a properties map."},
    {"decode_batch", (PyCFunction)(void (*)(void))py_decode_batch, METH_VARARGS | METH_KEYWORDS, "Split a SEND_BATCH_MESSAGE body."},
    {"decode_pulled", py_decode_pulled, METH_VARARGS, "Pulled records to messages through a factory."},
    {"append_batch", py_append_batch, METH_VARARGS, "Write a batch's entries as CommitLog records."},
    {"check_batch", py_check_batch, METH_VARARGS, "Whether every entry of a batch can be stored."},
    {"encode_batch", py_encode_batch, METH_O, "Entries in RocketMQ's message batch layout."},
    {"parse_dispatch", py_parse_dispatch, METH_VARARGS, "Dispatch tuples of records parsed from a segment."},
    {"scan_units", py_scan_units, METH_VARARGS, "Walk written ConsumeQueue units."},
    {"pick_units", py_pick_units, METH_VARARGS, "The ConsumeQueue units a pull reads, as runs."},
    {"group_units", py_group_units, METH_O, "ConsumeQueue units of dispatched records, per queue."},
    {"offset_msg_ids", py_offset_msg_ids, METH_VARARGS, "Offset message ids joined by commas."},
    {"scan_records", (PyCFunction)(void (*)(void))py_scan_records, METH_VARARGS | METH_KEYWORDS, "Walk valid records; (end, why)."},
    {"decode_binary_header", py_decode_binary_header, METH_O, "Decode a ROCKETMQ binary header."},
    {"decode_frame", (PyCFunction)(void (*)(void))py_decode_frame, METH_FASTCALL, "One whole frame's command, or None."},
    {"encode_send_ok", (PyCFunction)(void (*)(void))py_encode_send_ok, METH_FASTCALL, "A stored send's answer frame."},
    {"encode_binary_header", py_encode_binary_header, METH_VARARGS, "Encode a ROCKETMQ binary header."},
    {"append_messages", py_append_messages, METH_VARARGS, "The store's put loop: messages as CommitLog records."},
    {"put_single", (PyCFunction)(void (*)(void))py_put_single, METH_FASTCALL, "One message's put, or None."},
    {"pack_units", py_pack_units, METH_VARARGS, "Consecutive ConsumeQueue units written into a buffer."},
    {"take_pending", py_take_pending, METH_VARARGS, "The dispatcher's drain of the put path's hand-off."},
    {"populate_write", py_populate_write, METH_VARARGS, "Fault in a mapping's pages for writing (GIL released)."},
    {"sync_range", py_sync_range, METH_VARARGS, "msync(MS_SYNC) a range of a file mapping (GIL released)."},
    {"read_in", py_read_in, METH_VARARGS, "posix_fadvise(WILLNEED) a range of a file in slices (GIL released)."},
    {"encode_binary_frame", py_encode_binary_frame, METH_VARARGS, "A whole frame with a ROCKETMQ binary header."},
    {"v2_message", py_v2_message, METH_VARARGS, "The store message of a plain SEND_MESSAGE_V2, or None."},
    {"serve_send_v2", (PyCFunction)(void (*)(void))py_serve_send_v2, METH_FASTCALL,
     "The answer frame to one read holding one plain SEND_MESSAGE_V2, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "broker_core's codec loops in C", -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *errors = PyImport_ImportModule("broker_core.codec.errors");
    if (errors == NULL) return NULL;
    CodecError = PyObject_GetAttrString(errors, "CodecError");
    Py_DECREF(errors);
    if (CodecError == NULL) return NULL;
    PyObject *zlib = PyImport_ImportModule("zlib");
    if (zlib == NULL) return NULL;
    /* ISA-L's CRC-32 (PyPI isal, folding with carry-less multiplies) where installed: the same function as zlib's,
     * about 4x faster here (9.2 vs 2.1 GB/s; 285 vs 787 ns a 1 KiB body); zlib's otherwise */
    PyObject *isal = PyImport_ImportModule("isal.isal_zlib");
    if (isal != NULL) {
        crc32_func = PyObject_GetAttrString(isal, "crc32");
        Py_DECREF(isal);
        crc32_name = "isal";
    } else {
        PyErr_Clear();
        crc32_func = PyObject_GetAttrString(zlib, "crc32");
        crc32_name = "zlib";
    }
    zlib_decompress = PyObject_GetAttrString(zlib, "decompress");
    zlib_error = PyObject_GetAttrString(zlib, "error");
    Py_DECREF(zlib);
    if (crc32_func == NULL || zlib_decompress == NULL || zlib_error == NULL) return NULL;
    popleft_str = PyUnicode_InternFromString("popleft");
    if (popleft_str == NULL) return NULL;
    uniq_key_str = PyUnicode_InternFromString("UNIQ_KEY");
    if (uniq_key_str == NULL) return NULL;
    for (int k = 0; k < A_COUNT; k++) {
        attr_str[k] = PyUnicode_InternFromString(attr_names[k]);
        if (attr_str[k] == NULL) return NULL;
    }
    for (int k = 0; k < R_COUNT; k++) {
        result_str[k] = PyUnicode_InternFromString(result_names[k]);
        if (result_str[k] == NULL) return NULL;
    }
    for (int k = 0; k < P_COUNT; k++) {
        put_str[k] = PyUnicode_InternFromString(put_names[k]);
        if (put_str[k] == NULL) return NULL;
    }
    for (int k = 0; k < M_COUNT; k++) {
        inner_str[k] = PyUnicode_InternFromString(inner_names[k]);
        if (inner_str[k] == NULL) return NULL;
    }
    for (int k = 0; k < LA_COUNT; k++) {
        lane_str[k] = PyUnicode_InternFromString(lane_names[k]);
        if (lane_str[k] == NULL) return NULL;
    }
    struct { PyObject **slot; const char *text; } interned[] = {
        {&s_b, "b"}, {&s_e, "e"}, {&s_f, "f"}, {&s_g, "g"}, {&s_h, "h"}, {&s_i, "i"}, {&s_j, "j"},
        {&s_tags, "TAGS"}, {&s_keys, "KEYS"}, {&s_uniq, "UNIQ_KEY"}, {&s_delay, "DELAY"}, {&s_cluster, "CLUSTER"},
        {&s_tran, "TRAN_MSG"}, {&s_wait, "WAIT"}, {&s_true, "true"}, {&s_msgid, "msgId"}, {&s_queueid, "queueId"},
        {&s_queueoffset, "queueOffset"}, {&s_region, "MSG_REGION"}, {&s_traceon, "TRACE_ON"}};
    for (size_t k = 0; k < sizeof(interned) / sizeof(interned[0]); k++) {
        *interned[k].slot = PyUnicode_InternFromString(interned[k].text);
        if (*interned[k].slot == NULL) return NULL;
    }
    native_slots_str = PyUnicode_InternFromString("__native_slots__");
    empty_str = PyUnicode_InternFromString("");
    if (native_slots_str == NULL || empty_str == NULL) return NULL;
    PyObject *structmod = PyImport_ImportModule("struct");
    if (structmod == NULL) return NULL;
    struct_error = PyObject_GetAttrString(structmod, "error");
    Py_DECREF(structmod);
    if (struct_error == NULL) return NULL;
    if (PyType_Ready(&ReceiverType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddStringConstant(m, "CRC32", crc32_name) < 0 ||
        PyModule_AddObjectRef(m, "BytesReceiver", (PyObject *)&ReceiverType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
