/* broker_core.codec._native, the store's puts (twins in codec/message_append.py): append_messages (the put loop:
 * messages written as CommitLog records, one call per segment run) and put_single (one message's put under the
 * CommitLog's lock, which the send lane calls too). */
#include "_native.h"
#include <unistd.h>
#include <time.h>
#include <sys/uio.h>

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
static const char *const result_names[R_COUNT] = {
    "status", "phy_offset", "size", "queue_offset", "store_timestamp", "store_host", "store_port", "error"};
PyObject *bc_result_str[R_COUNT];

/* The result class may be filled directly: it declares __native_slots__ equal to result_names (a promise that
 * calling it with (status, phy, size, qoff, store_ts, host, port) sets exactly those slots, error ""), and they
 * are writable object slots. 1 yes, 0 no (call it), -1 error. */
static int result_map_for(PyObject *cls) {
    if (!PyType_Check(cls)) return 0;
    PyTypeObject *tp = (PyTypeObject *)cls;
    if (result_map.tp == tp) return result_map.usable;
    PyObject *names = PyDict_GetItemWithError(tp->tp_dict, bc_native_slots_str);  /* borrowed; own dict only */
    if (names == NULL && PyErr_Occurred()) return -1;
    int declared = names != NULL && PyTuple_Check(names) && PyTuple_GET_SIZE(names) == R_COUNT &&
                   tp->tp_alloc != NULL;
    for (int i = 0; declared && i < R_COUNT; i++) {
        int eq = PyUnicode_Check(PyTuple_GET_ITEM(names, i)) &&
                 PyUnicode_Compare(PyTuple_GET_ITEM(names, i), bc_result_str[i]) == 0;
        if (PyErr_Occurred()) return -1;
        declared = eq;
    }
    if (!declared) {
        Py_XSETREF(result_map.tp, (PyTypeObject *)Py_NewRef(cls));
        result_map.usable = 0;
        return 0;
    }
    return bc_slot_map_for(&result_map, tp, bc_result_str, R_COUNT);
}

/* A new result with the R_* values in its slots (error ""), or NULL with an exception set */
static PyObject *fill_result(PyObject *const *v) {
    PyTypeObject *tp = result_map.tp;
    PyObject *obj = tp->tp_alloc(tp, 0);
    if (obj == NULL) return NULL;
    char *base = (char *)obj;
    for (int i = 0; i < R_ERROR; i++) *(PyObject **)(base + result_map.off[i]) = Py_NewRef(v[i]);
    *(PyObject **)(base + result_map.off[R_ERROR]) = Py_NewRef(bc_empty_str);
    return obj;
}


/* struct's "4s": the first 4 bytes, zero-padded */
static void put_4s(unsigned char *p, PyObject *b) {
    Py_ssize_t n = PyBytes_GET_SIZE(b);
    memset(p, 0, 4);
    memcpy(p, PyBytes_AS_STRING(b), (size_t)(n < 4 ? n : 4));
}


/* The put's fixed inputs for one lock hold (codec/message_append.py). */
typedef struct {
    unsigned char *w;           /* the segment buffer */
    Py_ssize_t file_size, max_body;
    long long base, store_ts, store_port;
    PyObject *store_ts_o, *store_host, *store_port_o, *table, *pending_append, *ok, *result_cls;
    int direct_result;
    int body_apart;             /* a large body is not copied into w: the caller writes it from *body_out (staged) */
    const char *body_out;       /* set when the body was left out of w: the body's bytes (the message holds them) */
    Py_ssize_t body_out_len;
} PutCtx;

#define BODY_APART_MIN (64 * 1024)  /* a staged put writes a body from this size from its bytes (pwritev) */

/* Write `msg` as a record at *pos: 1 written and recorded (*result_out a new reference, *pos moved on and, when
 * pos_out is given, *pos_out the new position as a new int), 0 not
 * written (refused, does not fit what is left, or a field this loop does not take as is: the caller decides),
 * -1 error (nothing written or recorded). Everything that can fail is built before anything is written. */
static int append_one(PutCtx *c, PyObject *msg, Py_ssize_t *pos_io, PyObject **result_out, PyObject **pos_out) {
    PyObject *a[A_COUNT] = {NULL};
    int rc = -1;
    Py_ssize_t pos = *pos_io;
    int mapped = bc_slot_map_for(&msg_map, Py_TYPE(msg), attr_str, A_COUNT);
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
        tags_code = (int32_t)bc_java_hash_continue(0, a[A_TAGS]);
    }
    rc = -1;
    PyObject *qkey = PyTuple_Pack(2, a[A_TOPIC], a[A_QUEUE_ID]);
    if (qkey == NULL) goto out;
    PyObject *qoff_o = PyDict_GetItemWithError(c->table, qkey);  /* borrowed */
    long long qoff = 0;
    if (qoff_o == NULL && PyErr_Occurred()) { Py_DECREF(qkey); goto out; }
    if (qoff_o != NULL && !int_within(qoff_o, I64_MIN, I64_MAX - 1, &qoff)) { Py_DECREF(qkey); rc = 0; goto out; }
    uint32_t crc;
    if (bc_body_crc32((const unsigned char *)PyBytes_AS_STRING(body), blen, &crc) < 0) { Py_DECREF(qkey); goto out; }
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
    bc_write_record_header(rec, total, crc, queue_id, flag, qoff, phy, sys_flag, born_ts, bh, born_port, store_ts,
                           sh, c->store_port, reconsume, prepared, blen);
    if (c->body_apart && blen >= BODY_APART_MIN) {  /* left out of the buffer: the caller writes it from here */
        c->body_out = PyBytes_AS_STRING(body);
        c->body_out_len = blen;
    } else {
        memcpy(rec + HEADER_SIZE, PyBytes_AS_STRING(body), (size_t)blen);
    }
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
PyObject *bc_py_append_messages(PyObject *self, PyObject *args) {
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
    int staged = 0, written = 0;
    long long fd = -1, released = 0;
    PyObject *st = PyObject_GetAttr(mf, put_str[P_STAGED]);
    staged = st == NULL ? -1 : PyObject_IsTrue(st);
    Py_XDECREF(st);
    if (staged > 0 && (!attr_ll(mf, P_FD, &fd) || !attr_ll(mf, P_RELEASED, &released))) staged = -1;
    if (staged < 0) {
        PyBuffer_Release(&buf);
        rc = -1;
        goto out;
    }
    /* staged: the record goes to the file by pwrite, so a large body is written from its own bytes (one copy, by the
     * kernel) rather than copied into the staging buffer (fresh pages to fault in) and written from there */
    c.body_apart = staged > 0;
    rc = append_one(&c, msg, &at, &r, &pos_o);
    if (rc == 1) {  /* a staged segment (MappedFile.stage): the record into the file before its position is published */
        if (staged > 0) {
            const unsigned char *src = c.w + pos;
            Py_ssize_t left = at - (Py_ssize_t)pos;
            off_t where = (off_t)pos;
            if (c.body_out != NULL) {  /* header, body, tail in one gather write */
                unsigned char *rec = c.w + pos;
                Py_ssize_t blen = c.body_out_len;
                struct iovec iov[3] = {{rec, HEADER_SIZE}, {(void *)c.body_out, (size_t)blen},
                                       {rec + HEADER_SIZE + blen, (size_t)(left - HEADER_SIZE - blen)}};
                ssize_t n;
                do n = pwritev((int)fd, iov, 3, where); while (n < 0 && errno == EINTR);
                /* all of it, or the body into staging after all and the rest written (or committed) from there */
                if (n != left) memcpy(rec + HEADER_SIZE, c.body_out, (size_t)blen);
                if (n > 0) { src += n; left -= n; where += n; }
            }
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
PyObject *bc_py_put_single(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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

/* The attribute names the puts read and write, interned once (PyInit): 0, or -1 with an exception set */
int bc_message_append_init(void) {
    for (int k = 0; k < A_COUNT; k++) {
        attr_str[k] = PyUnicode_InternFromString(attr_names[k]);
        if (attr_str[k] == NULL) return -1;
    }
    for (int k = 0; k < R_COUNT; k++) {
        bc_result_str[k] = PyUnicode_InternFromString(result_names[k]);
        if (bc_result_str[k] == NULL) return -1;
    }
    for (int k = 0; k < P_COUNT; k++) {
        put_str[k] = PyUnicode_InternFromString(put_names[k]);
        if (put_str[k] == NULL) return -1;
    }
    return 0;
}
