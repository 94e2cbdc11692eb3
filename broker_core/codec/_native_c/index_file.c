/* broker_core.codec._native, the IndexFile (twins in codec/index_file.py): index_entries (the keys and unique id of
 * dispatched records, hashed) and index_put (their insertion into a mapped IndexFile's slots and entries). */
#include "_native.h"

/* ------------------------------------------------------------------ IndexFile */
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
PyObject *bc_py_index_entries(PyObject *self, PyObject *args) {
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
        uint32_t th = bc_java_hash_continue(0, topic) * 31u + '#';
        if (uniq != Py_None && PyObject_IsTrue(uniq)) {
            if (!PyUnicode_Check(uniq)) { PyErr_SetString(PyExc_TypeError, "uniq key must be a str"); goto fail; }
            if (append_entry(out, index_hash_of(bc_java_hash_continue(th, uniq)), phy_o, ts) < 0) goto fail;
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
                    uint32_t h = index_hash_of(bc_java_hash_continue(th, key));
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
PyObject *bc_py_index_put(PyObject *self, PyObject *args) {
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
