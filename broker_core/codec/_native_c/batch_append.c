/* broker_core.codec._native, the store's batch put (twins in codec/batch_append.py): check_batch (whether every
 * entry of a SEND_BATCH_MESSAGE body can be stored), append_batch (the entries written as CommitLog records, one
 * call per segment) and offset_msg_ids (the answer's message ids). */
#include "_native.h"

/* ------------------------------------------------------------------ batch append (the store's batch put) */

/* append_batch(buf, pos, file_size, base, body, body_pos, topic, topic_bytes, queue_id, queue_offset, extra,
 *              sys_flag, born_ts, born_host, born_port, store_ts, store_host, store_port, reconsume,
 *              dispatch, phys) -> (pos, body_pos, queue_offset): see codec/batch_append.py */
PyObject *bc_py_append_batch(PyObject *self, PyObject *args) {
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
            bc_codec_error("batch", body_pos, "truncated batch entry head");
            goto done_free;
        }
        const unsigned char *e = bb + body_pos;
        int32_t flag = rd_i32(e + 12), blen = rd_i32(e + 16);
        if (blen < 0 || body_pos + BATCH_ENTRY_HEAD + (Py_ssize_t)blen + 2 > body.len) {
            bc_codec_error("batch", body_pos, "bad batch entry: body length %d runs past the batch", (int)blen);
            goto done_free;
        }
        const unsigned char *mb = e + BATCH_ENTRY_HEAD;
        int16_t plen = rd_i16(mb + blen);
        const unsigned char *pp = mb + blen + 2;
        if (plen < 0 || (pp - bb) + plen > body.len) {
            bc_codec_error("batch", body_pos, "bad batch entry: properties length %d runs past the batch", (int)plen);
            goto done_free;
        }
        /* the entry's properties, a separator when they do not end with one, then the broker's (as RocketMQ) */
        int sep = plen > 0 && pp[plen - 1] != 0x02;
        Py_ssize_t jlen = plen + sep + xlen;
        if (jlen > 32767) {
            bc_codec_error("batch", body_pos, "properties are %zd bytes, at most 32767", jlen);
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
        if (!bc_utf8_valid(pp, plen)) {
            bc_codec_error("batch", body_pos, "batch entry properties are not UTF-8");
            goto done_free;
        }
        if (plen) memcpy(joined, pp, (size_t)plen);
        if (sep) joined[plen] = 0x02;
        if (xlen) memcpy(joined + plen + sep, xb, (size_t)xlen);
        PyObject *tags = bc_find_property(joined, jlen, "TAGS", 4);
        if (tags == NULL && PyErr_Occurred()) goto done_free;
        PyObject *keys = bc_find_property(joined, jlen, "KEYS", 4);
        if (keys == NULL && PyErr_Occurred()) { Py_XDECREF(tags); goto done_free; }
        PyObject *uniq = bc_find_property(joined, jlen, "UNIQ_KEY", 8);
        if (uniq == NULL && PyErr_Occurred()) { Py_XDECREF(tags); Py_XDECREF(keys); goto done_free; }
        uint32_t crc;
        if (bc_body_crc32(mb, blen, &crc) < 0) { Py_XDECREF(tags); Py_XDECREF(keys); Py_XDECREF(uniq); goto done_free; }
        long long phy = base + pos;
        unsigned char *r = w + pos;
        bc_write_record_header(r, total, crc, queue_id, flag, qoff, phy, sys_flag, born_ts,
                               (const unsigned char *)born_host.buf, born_port, store_ts,
                               (const unsigned char *)store_host.buf, store_port, reconsume, 0, blen);
        memcpy(r + HEADER_SIZE, mb, (size_t)blen);
        unsigned char *t = r + HEADER_SIZE + blen;
        t[0] = (unsigned char)tlen;
        memcpy(t + 1, topic_b.buf, (size_t)tlen);
        wr_i16(t + 1 + tlen, jlen);
        memcpy(t + 3 + tlen, joined, (size_t)jlen);
        long long tags_code = 0;
        if (tags != NULL && PyUnicode_GET_LENGTH(tags) > 0) tags_code = (int32_t)bc_java_hash_continue(0, tags);
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

/* check_batch(body, extra_len, topic_len, max_body, segment_size) -> None | (index, status, reason):
 * see codec/batch_append.py */
PyObject *bc_py_check_batch(PyObject *self, PyObject *args) {
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
        if (!bc_utf8_valid(bb + props_at, plen)) {
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

/* offset_msg_ids(host4, port, phys) -> "ID,ID,...": each the 32-hex offset message id */
PyObject *bc_py_offset_msg_ids(PyObject *self, PyObject *args) {
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
