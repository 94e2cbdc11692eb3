/* broker_core.codec._native, CommitLog records (twins in codec/records.py): scan_records (the walk over valid
 * records), decode_pulled (pulled records to the SDK's messages), parse_dispatch (the dispatcher's parse of new
 * records); and what the put loops share: the record header's writer and the body CRC. */
#include "_native.h"

/* ------------------------------------------------------------------ CommitLog records */

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
        bc_codec_error(source, pos, "bad record (magic 0x%s, size %d)", hex, (int)total);
        return -1;
    }
    int32_t blen = rd_i32(p + 84);
    if (blen < 0 || HEADER_SIZE + (Py_ssize_t)blen + 3 > total) {
        bc_codec_error(source, pos, "bad record (body length %d, size %d)", (int)blen, (int)total);
        return -1;
    }
    Py_ssize_t tlen = p[HEADER_SIZE + blen];
    if (HEADER_SIZE + blen + 1 + tlen + 2 > total) {
        bc_codec_error(source, pos, "bad record (topic length %zd, size %d)", tlen, (int)total);
        return -1;
    }
    *total_out = total;
    *blen_out = blen;
    *tlen_out = tlen;
    return 0;
}

/* A factory class may name, in its ``__native_slots__``, the 13 slots the factory's arguments go to (in
 * argument order) followed by any further slots set to None: then decode_pulled allocates the object and fills those slots directly, as its __init__ would
 * (without running it). The class's own tests prove both ways give equal objects. Offsets are looked up once
 * per class (the member descriptors of its __slots__) and kept while that class object lives. */
#define NATIVE_SLOTS_MAX 20

static SlotMap pulled_map;  /* decode_pulled's factory: the names of its __native_slots__, in that order */
static Py_ssize_t pulled_count;  /* how many names */

/* 1 with the offsets ready for `factory`, 0 when it has no usable __native_slots__ (call it instead), -1 error */
static int native_slots_for(PyObject *factory) {
    if (!PyType_Check(factory)) return 0;
    PyTypeObject *tp = (PyTypeObject *)factory;
    if (tp == pulled_map.tp && pulled_map.usable) return 1;
    PyObject *names = PyDict_GetItemWithError(tp->tp_dict, bc_native_slots_str);  /* borrowed; own dict only */
    if (names == NULL && PyErr_Occurred()) return -1;
    if (names == NULL || !PyTuple_Check(names)) return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    if (n < 13 || n > NATIVE_SLOTS_MAX || tp->tp_alloc == NULL || tp->tp_new == NULL) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i))) return 0;
    }
    int usable = bc_slot_map_for(&pulled_map, tp, &PyTuple_GET_ITEM(names, 0), (int)n);
    pulled_count = n;
    if (usable == 0) {
        PyErr_Format(PyExc_TypeError, "%s.__native_slots__ names a field that is not a writable slot", tp->tp_name);
        return -1;
    }
    return usable;
}

/* A new instance of pulled_map's class with argv[0:13] (new references or borrowed, see `owned`) in its slots. */
static PyObject *fill_slots(PyObject *const *argv) {
    PyTypeObject *tp = pulled_map.tp;
    PyObject *obj = tp->tp_alloc(tp, 0);
    if (obj == NULL) return NULL;
    char *base = (char *)obj;
    for (int i = 0; i < 13; i++) *(PyObject **)(base + pulled_map.off[i]) = Py_NewRef(argv[i]);
    for (Py_ssize_t i = 13; i < pulled_count; i++) *(PyObject **)(base + pulled_map.off[i]) = Py_NewRef(Py_None);
    /* Every slot holds an atomic value or a tuple of them (the properties are their raw bytes until the message
     * decodes them, then a dict of str): nothing a cycle can run through, so
     * the object is left out of the cycle collector (as CPython does for such tuples and dicts), which
     * otherwise walks every message a consumer keeps, again and again. A cycle a caller builds through one
     * (a message put in its own properties) is not collected. */
    if (PyObject_GC_IsTracked(obj)) PyObject_GC_UnTrack(obj);
    return obj;
}

/* decode_pulled(buf, source, factory, broker_name) -> list: see codec/records.py */
PyObject *bc_py_decode_pulled(PyObject *self, PyObject *args) {
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
            PyObject *inflated = PyObject_CallOneArg(bc_zlib_decompress, body);
            Py_DECREF(body);
            if (inflated == NULL) {
                if (!PyErr_ExceptionMatches(bc_zlib_error)) goto fail;
                PyObject *et, *ev, *tb;
                PyErr_Fetch(&et, &ev, &tb);
                PyErr_NormalizeException(&et, &ev, &tb);
                PyObject *why = ev ? PyObject_Str(ev) : NULL;
                Py_XDECREF(et); Py_XDECREF(ev); Py_XDECREF(tb);
                if (why == NULL) goto fail;
                bc_codec_error(source, (Py_ssize_t)phy, "compressed body does not inflate: %U", why);
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
        /* the raw properties: the message decodes them on first use (most consumers never look) */
        PyObject *props = PyBytes_FromStringAndSize((const char *)p + pstart, total - pstart);
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
            m = fast ? fill_slots(argv) : PyObject_Vectorcall(factory, argv, 13, NULL);
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
int bc_body_crc32(const unsigned char *body, Py_ssize_t blen, uint32_t *out) {
    PyObject *mv = PyMemoryView_FromMemory((char *)body, blen, PyBUF_READ);
    if (mv == NULL) return -1;
    PyObject *c = PyObject_CallOneArg(bc_crc32_func, mv);
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
    if (bc_body_crc32(body, blen, &v) < 0) return -1;
    return stored == (v & 0x7FFFFFFFu) || stored == v;
}

/* scan_records(buf, pos, limit, check_crc=True) -> (end, why): see codec/message.py */
PyObject *bc_py_scan_records(PyObject *self, PyObject *args, PyObject *kw) {
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

static inline void put_i64(unsigned char *p, long long v) { wr_i64(p, v); }

/* A record's 88-byte header (codec/message.py HEADER), hosts given as their 4 bytes. */
void bc_write_record_header(unsigned char *r, long long total, uint32_t crc, long long queue_id, long long flag,
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

/* parse_dispatch(buf, pos, limit, max_n, schedule_topic, delay_ms) -> (entries, end, why): see codec/records.py */
PyObject *bc_py_parse_dispatch(PyObject *self, PyObject *args) {
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
        if (!bc_utf8_valid(tp, tlen) || !bc_utf8_valid(props, plen)) {
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
        PyObject *tags = bc_find_property(props, plen, "TAGS", 4);
        PyObject *keys = PyErr_Occurred() ? NULL : bc_find_property(props, plen, "KEYS", 4);
        PyObject *uniq = PyErr_Occurred() ? NULL : bc_find_property(props, plen, "UNIQ_KEY", 8);
        PyObject *tags_code = NULL;
        if (!PyErr_Occurred()) {
            int is_schedule = delay_ms != Py_None && PyUnicode_Compare(last_topic, schedule_topic) == 0;
            if (is_schedule) {
                PyObject *lv = bc_find_property(props, plen, "DELAY", 5);
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
                if (tags != NULL && PyUnicode_GET_LENGTH(tags) > 0) code = (int32_t)bc_java_hash_continue(0, tags);
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

/* What decode_pulled would set up at import: nothing now (it looks no names up); kept as the module's init hook */
int bc_records_init(void) {
    return 0;
}
