/* broker_core.codec._native, the remoting frame (twins in codec/wire.py): RocketMQ's message batch layout
 * (decode_batch, encode_batch), the ROCKETMQ binary command header (decode_binary_header, encode_binary_header,
 * encode_binary_frame), decode_frame (one whole frame to a command) and encode_send_ok (a stored send's answer). */
#include "_native.h"

/* ------------------------------------------------------------------ message batch */
/* decode_batch(buf, max_entries=1<<20) -> list[(flag, body, props)] */
PyObject *bc_py_decode_batch(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"buf", "max_entries", NULL};
    Py_buffer view;
    Py_ssize_t max_entries = (Py_ssize_t)1 << 20;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|n", kwlist, &view, &max_entries)) return NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len, pos = 0;
    PyObject *out = PyList_New(0);
    if (out == NULL) { PyBuffer_Release(&view); return NULL; }
    while (pos < end) {
        if (end - pos < BATCH_ENTRY_HEAD + 2) { bc_codec_error("batch", pos, "truncated batch entry head"); goto fail; }
        int32_t flag = rd_i32(b + pos + 12), blen = rd_i32(b + pos + 16);
        Py_ssize_t body_at = pos + BATCH_ENTRY_HEAD;
        if (blen < 0 || body_at + blen + 2 > end) {
            bc_codec_error("batch", pos, "bad batch entry: body length %d runs past the batch", (int)blen);
            goto fail;
        }
        int16_t plen = rd_i16(b + body_at + blen);
        Py_ssize_t props_at = body_at + blen + 2;
        if (plen < 0 || props_at + plen > end) {
            bc_codec_error("batch", pos, "bad batch entry: properties length %d runs past the batch", (int)plen);
            goto fail;
        }
        PyObject *t = Py_BuildValue("(iy#y#)", (int)flag, (const char *)b + body_at, (Py_ssize_t)blen,
                                    (const char *)b + props_at, (Py_ssize_t)plen);
        if (t == NULL || PyList_Append(out, t) < 0) { Py_XDECREF(t); goto fail; }
        Py_DECREF(t);
        if (PyList_GET_SIZE(out) > max_entries) {
            bc_codec_error("batch", pos, "batch holds more than %zd messages", max_entries);
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

/* encode_batch(entries: list of (flag, body, properties_bytes)) -> bytes: see codec/wire.py. Raises struct.error
 * as the pure twin's struct packing would (a flag outside int32, properties over 32767 bytes, an entry over
 * int32), TypeError for an entry that is not such a tuple. */
static PyObject *struct_error;
PyObject *bc_py_encode_batch(PyObject *self, PyObject *arg) {
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

/* ------------------------------------------------------------------ ROCKETMQ binary command header */

/* The header in b[0:end] into *h (new references to remark, None when absent, and ext): 0, or -1 with an
 * exception set (CodecError for lengths, UnicodeDecodeError for text) */
int bc_decode_header_into(const unsigned char *b, Py_ssize_t end, BinaryHeader *h) {
    Py_ssize_t pos;
    PyObject *remark = NULL, *ext = NULL;
    int rc = -1;
    if (end < BINARY_HEAD_SIZE + 4) {
        bc_codec_error("header", 0, "binary header of %zd bytes is shorter than its %d fixed bytes", end,
                       BINARY_HEAD_SIZE + 4);
        goto done;
    }
    int code = rd_i16(b), language = b[2], version = rd_i16(b + 3);
    int32_t opaque = rd_i32(b + 5), flag = rd_i32(b + 9), rlen = rd_i32(b + 13);
    pos = BINARY_HEAD_SIZE;
    if (rlen < 0 || pos + rlen + 4 > end) {
        bc_codec_error("header", pos - 4, "remark length %d runs past the header", (int)rlen);
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
        bc_codec_error("header", pos - 4, "extFields length %d does not end the header (%zd bytes left)",
                       (int)ext_len, end - pos);
        goto done;
    }
    /* sized for the entries the bytes can hold (a send's 12 letters made two resizes of a new dict) */
    ext = _PyDict_NewPresized(ext_len / 8 < 32 ? ext_len / 8 : 32);
    if (ext == NULL) goto done;
    while (pos < end) {
        if (end - pos < 6) { bc_codec_error("header", pos, "truncated extFields entry"); goto done; }
        int16_t klen = rd_i16(b + pos);
        Py_ssize_t kend = pos + 2 + klen;
        if (klen < 0 || kend + 4 > end) {
            bc_codec_error("header", pos, "extFields key length %d runs past the header", (int)klen);
            goto done;
        }
        int32_t vlen = rd_i32(b + kend);
        Py_ssize_t vend = kend + 4 + (Py_ssize_t)vlen;
        if (vlen < 0 || vend > end) {
            bc_codec_error("header", kend, "extFields value length %d runs past the header", (int)vlen);
            goto done;
        }
        /* the names (the same few letters in every request) from the string cache: hashed once */
        PyObject *k = bc_cached_utf8(b + pos + 2, klen);
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
PyObject *bc_py_decode_binary_header(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    BinaryHeader h;
    PyObject *res = NULL;
    if (bc_decode_header_into((const unsigned char *)view.buf, view.len, &h) == 0) {
        res = Py_BuildValue("(iiiiiOO)", h.code, h.language, h.version, (int)h.opaque, (int)h.flag, h.remark, h.ext);
        Py_DECREF(h.remark);
        Py_DECREF(h.ext);
    }
    PyBuffer_Release(&view);
    return res;
}

/* decode_frame(data, max_frame_bytes, factory, languages, other) -> command or None: see codec/wire.py */
PyObject *bc_py_decode_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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
    if (bc_decode_header_into(b + 8, (Py_ssize_t)hlen, &h) < 0) {
        if (PyErr_ExceptionMatches(bc_CodecError) || PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
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
    PyObject *remark = h.remark == Py_None ? bc_empty_str : h.remark;
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

PyObject *bc_py_encode_binary_header(PyObject *self, PyObject *args) {
    long code, language, version, opaque, flag;
    PyObject *remark, *ext;
    if (!PyArg_ParseTuple(args, "lllllOO", &code, &language, &version, &opaque, &flag, &remark, &ext)) return NULL;
    return binary_header(code, language, version, opaque, flag, remark, ext, NULL);
}

/* encode_binary_frame(code, language, version, opaque, flag, remark, ext_fields, body) -> bytes: see wire.py */
PyObject *bc_py_encode_binary_frame(PyObject *self, PyObject *args) {
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

PyObject *bc_py_encode_send_ok(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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
        id = pargs ? bc_py_offset_msg_ids(NULL, pargs) : NULL;
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

/* The names encode_send_ok writes and struct.error, looked up once (PyInit): 0, or -1 with an exception set */
int bc_wire_init(void) {
    struct { PyObject **slot; const char *text; } interned[] = {
        {&s_msgid, "msgId"}, {&s_queueid, "queueId"}, {&s_queueoffset, "queueOffset"}, {&s_region, "MSG_REGION"},
        {&s_traceon, "TRACE_ON"}};
    for (size_t k = 0; k < sizeof(interned) / sizeof(interned[0]); k++) {
        *interned[k].slot = PyUnicode_InternFromString(interned[k].text);
        if (*interned[k].slot == NULL) return -1;
    }
    PyObject *structmod = PyImport_ImportModule("struct");
    if (structmod == NULL) return -1;
    struct_error = PyObject_GetAttrString(structmod, "error");
    Py_DECREF(structmod);
    return struct_error == NULL ? -1 : 0;
}
