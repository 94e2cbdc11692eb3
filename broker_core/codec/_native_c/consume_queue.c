/* broker_core.codec._native, ConsumeQueue units (twins in codec/consume_queue.py): scan_units (the walk over
 * written units), pick_units (a pull's units, as runs), group_units (dispatched records per queue), pack_units
 * (their 20-byte units into a mapped file) and take_pending (the dispatcher's drain of the put path's hand-off). */
#include "_native.h"

/* ------------------------------------------------------------------ ConsumeQueue units */
/* scan_units(buf, pos, limit) -> (end, max_phy, stopped): see codec/consume_queue.py */
PyObject *bc_py_scan_units(PyObject *self, PyObject *args) {
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
PyObject *bc_py_pick_units(PyObject *self, PyObject *args) {
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
PyObject *bc_py_group_units(PyObject *self, PyObject *arg) {
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

/* int_within for an exact int only (no bool, no subclass): what pack_units' pure twin takes */
static int exact_int_within(PyObject *o, long long lo, long long hi, long long *out) {
    return PyLong_CheckExact(o) && int_within(o, lo, hi, out);
}

/* pack_units(buf, pos, end, units, start, stop, expect, min_end) -> n: see codec/consume_queue.py */
PyObject *bc_py_pack_units(PyObject *self, PyObject *args) {
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
PyObject *bc_py_take_pending(PyObject *self, PyObject *args) {
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

/* The names take_pending calls, interned once (PyInit): 0, or -1 with an exception set */
int bc_consume_queue_init(void) {
    popleft_str = PyUnicode_InternFromString("popleft");
    return popleft_str == NULL ? -1 : 0;
}
