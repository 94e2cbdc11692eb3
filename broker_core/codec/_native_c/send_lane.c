/* broker_core.codec._native, the broker's send lane (its Python side: server/send_fast.py make_lane): serve_send_v2
 * answers one read holding one plain SEND_MESSAGE_V2 (decode: wire.c; message: send_v2.c; put: message_append.c). */
#include "_native.h"

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

PyObject *bc_py_serve_send_v2(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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
    if (bc_decode_header_into(b + 8, (Py_ssize_t)hlen, &h) < 0) {
        if (PyErr_ExceptionMatches(bc_CodecError) || PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            res = Py_NewRef(Py_None);  /* the general decoder says why */
        }
        Py_DECREF(born);
        return res;
    }
    PyObject *topic = PyDict_GetItemWithError(h.ext, bc_s_b);  /* borrowed */
    PyObject *qtext = topic ? PyDict_GetItemWithError(h.ext, bc_s_e) : NULL;
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
    msg = bc_v2_message_c(ctx[L_INNER], h.ext, body, queue_nums, cluster, PyTuple_GET_ITEM(born, 0),
                          PyTuple_GET_ITEM(born, 1));
    if (msg == NULL) goto out;
    if (msg == Py_None) goto none;
    /* MessageInner.delay_level and limits_error, through the slots bc_v2_message_c filled: a delayed message or one
     * over a limit goes the general way (the schedule's transform, the store's refusal) */
    PyObject *level = *(PyObject **)((char *)msg + bc_inner_map.off[M_DELAY_LEVEL]);
    PyObject *limits = *(PyObject **)((char *)msg + bc_inner_map.off[M_LIMITS]);
    if (level == NULL || limits != Py_False || !PyLong_CheckExact(level) || _PyLong_Sign(level) != 0) goto none;
    PyObject *put_args[4] = {ctx[L_CL], msg, ctx[L_OK], ctx[L_RESULT]};
    if ((r = bc_py_put_single(NULL, put_args, 4)) == NULL) goto out;
    if (r == Py_None) goto none;  /* the lock was taken, the segment full: the batch way, from the start */
    PyObject *status = PyObject_GetAttr(r, bc_result_str[R_STATUS]);
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
        PyObject *host = PyObject_GetAttr(r, bc_result_str[R_HOST]), *port = NULL, *phy = NULL, *qoff = NULL;
        PyObject *opaque = NULL, *qid = *(PyObject **)((char *)msg + bc_inner_map.off[M_QUEUE_ID]);
        if (host && (port = PyObject_GetAttr(r, bc_result_str[R_PORT])) && (phy = PyObject_GetAttr(r, bc_result_str[R_PHY]))
            && (qoff = PyObject_GetAttr(r, bc_result_str[R_QOFF])) && (opaque = PyLong_FromLong(rd_i32(b + 8 + 5)))) {
            PyObject *enc[10] = {opaque, ctx[L_LANGUAGE], ctx[L_VERSION], host, port, phy, qid, qoff, region, trace};
            res = bc_py_encode_send_ok(NULL, enc, 10);
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

/* The names the lane reads, interned once (PyInit): 0, or -1 with an exception set */
int bc_send_lane_init(void) {
    for (int k = 0; k < LA_COUNT; k++) {
        lane_str[k] = PyUnicode_InternFromString(lane_names[k]);
        if (lane_str[k] == NULL) return -1;
    }
    return 0;
}
