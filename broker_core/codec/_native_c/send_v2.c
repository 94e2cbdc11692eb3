/* broker_core.codec._native, the broker's single send (twin in codec/send_v2.py): v2_message, a plain
 * SEND_MESSAGE_V2 request's header letters and body into the store's message in one call (bc_v2_message_c, which
 * the send lane calls too). */
#include "_native.h"

/* ------------------------------------------------------------------ the broker's single send */
/* the message class's fields, M_* order (_native.h) */
static const char *const inner_names[M_COUNT] = {
    "body", "born_host", "born_port", "born_timestamp", "delay_level", "delay_ms", "flag", "keys", "limits_error",
    "prepared_transaction_offset", "properties_bytes", "queue_id", "reconsume_times", "sys_flag", "tags", "tail",
    "topic", "topic_bytes", "uniq_key"};
static PyObject *inner_str[M_COUNT];
SlotMap bc_inner_map;
/* header letters and property names v2_message reads */
PyObject *bc_s_b, *bc_s_e;  /* the send lane reads these two too */
static PyObject *s_f, *s_g, *s_h, *s_i, *s_j, *s_tags, *s_keys, *s_uniq, *s_delay, *s_cluster, *s_tran, *s_wait,
    *s_true, *s_timer[3];

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
PyObject *bc_v2_message_c(PyObject *factory, PyObject *h, PyObject *body, long long write_queue_nums,
                          PyObject *cluster, PyObject *born_host, PyObject *born_port) {
    if (!PyType_Check(factory)) { PyErr_SetString(PyExc_TypeError, "v2_message: factory must be a class"); return NULL; }
    int mapped = bc_slot_map_for(&bc_inner_map, (PyTypeObject *)factory, inner_str, M_COUNT);
    if (mapped < 0) return NULL;
    if (!mapped) { PyErr_SetString(PyExc_TypeError, "v2_message: the factory's fields are not all slots"); return NULL; }
    PyObject *topic = PyDict_GetItemWithError(h, bc_s_b);  /* borrowed */
    if (topic == NULL) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, bc_s_b);
        return NULL;
    }
    PyObject *v[M_COUNT] = {NULL};
    PyObject *props = NULL, *res = NULL, *raw = NULL;
    int none = 0;
    long long q, sf, x;
    int overflow;
    /* the ints in the pure twin's order: the first one int() refuses answers None */
    if ((v[M_QUEUE_ID] = header_int(h, bc_s_e, &none)) == NULL ||
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
        props = bc_py_decode_properties(NULL, truth ? raw : bc_empty_str);
    }
    if (props == NULL) goto out;
    PyObject *tran = PyDict_GetItemWithError(props, s_tran);  /* borrowed */
    if (tran == NULL && PyErr_Occurred()) goto out;
    if (tran != NULL) {
        int eq = PyObject_RichCompareBool(tran, s_true, Py_EQ);
        if (eq < 0) goto out;
        if (eq) goto none_out;
    }
    for (int k = 0; k < 3; k++) {  /* a RocketMQ 5 timer message: the general path hands it to the broker's timer */
        int has = PyDict_Contains(props, s_timer[k]);
        if (has < 0) goto out;
        if (has) goto none_out;
    }
    if (PyDict_DelItem(props, s_wait) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_KeyError)) goto out;
        PyErr_Clear();
    }
    if (PyDict_SetItem(props, s_cluster, cluster) < 0) goto out;
    /* MessageInner.from_encoded, field by field */
    if ((v[M_PROPS_BYTES] = bc_py_encode_properties(NULL, props)) == NULL) goto out;
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
            *(PyObject **)((char *)obj + bc_inner_map.off[k]) = v[k];
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
PyObject *bc_py_v2_message(PyObject *self, PyObject *args) {
    PyObject *factory, *h, *body, *cluster, *born_host, *born_port;
    long long write_queue_nums;
    if (!PyArg_ParseTuple(args, "OO!OLOOO", &factory, &PyDict_Type, &h, &body, &write_queue_nums, &cluster,
                          &born_host, &born_port))
        return NULL;
    return bc_v2_message_c(factory, h, body, write_queue_nums, cluster, born_host, born_port);
}

/* The names v2_message reads and fills, interned once (PyInit): 0, or -1 with an exception set */
int bc_send_v2_init(void) {
    for (int k = 0; k < M_COUNT; k++) {
        inner_str[k] = PyUnicode_InternFromString(inner_names[k]);
        if (inner_str[k] == NULL) return -1;
    }
    struct { PyObject **slot; const char *text; } interned[] = {
        {&bc_s_b, "b"}, {&bc_s_e, "e"}, {&s_f, "f"}, {&s_g, "g"}, {&s_h, "h"}, {&s_i, "i"}, {&s_j, "j"},
        {&s_tags, "TAGS"}, {&s_keys, "KEYS"}, {&s_uniq, "UNIQ_KEY"}, {&s_delay, "DELAY"}, {&s_cluster, "CLUSTER"},
        {&s_tran, "TRAN_MSG"}, {&s_wait, "WAIT"}, {&s_true, "true"}, {&s_timer[0], "TIMER_DELIVER_MS"},
        {&s_timer[1], "TIMER_DELAY_SEC"}, {&s_timer[2], "TIMER_DELAY_MS"}};
    for (size_t k = 0; k < sizeof(interned) / sizeof(interned[0]); k++) {
        *interned[k].slot = PyUnicode_InternFromString(interned[k].text);
        if (*interned[k].slot == NULL) return -1;
    }
    return 0;
}
