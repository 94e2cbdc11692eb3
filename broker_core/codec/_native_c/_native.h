/* broker_core.codec._native's shared internal header: what more than one of its C files uses (see _native.c for the
 * module's contract and its files). Helpers shared between files are named bc_* and hidden (BC_INTERNAL): the
 * extension exports PyInit__native only; tiny helpers are static inline here; everything else stays static in
 * its file. Every file of the module includes this first (it includes Python.h). */
#ifndef BROKER_CORE_NATIVE_H
#define BROKER_CORE_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>

#define BC_INTERNAL __attribute__((visibility("hidden")))

/* ------------------------------------------------------------------ module state (_native.c, set by PyInit) */
BC_INTERNAL extern PyObject *bc_CodecError;   /* broker_core.codec.errors.CodecError(message, source, position) */
BC_INTERNAL extern PyObject *bc_crc32_func;   /* isal.isal_zlib.crc32, else zlib.crc32 (the CRC32 constant names it) */
BC_INTERNAL extern PyObject *bc_empty_str;    /* "" */
BC_INTERNAL extern PyObject *bc_zlib_decompress;  /* zlib.decompress */
BC_INTERNAL extern PyObject *bc_zlib_error;       /* zlib.error */
BC_INTERNAL extern PyObject *bc_native_slots_str;  /* "__native_slots__" */

/* A CodecError(message, source, position) set; returns NULL. */
BC_INTERNAL PyObject *bc_codec_error(const char *source, Py_ssize_t pos, const char *fmt, ...);

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

/* ------------------------------------------------------------------ integer fields */
#define I32_MIN (-2147483647LL - 1)
#define I32_MAX 2147483647LL
#define I64_MIN (-9223372036854775807LL - 1)
#define I64_MAX 9223372036854775807LL

/* o is an int (bool included, as struct packs it) within [lo, hi]: 1 and *out; otherwise 0, no error set */
static inline int int_within(PyObject *o, long long lo, long long hi, long long *out) {
    if (!PyLong_Check(o)) return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
    if (v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/* ------------------------------------------------------------------ Java String.hashCode (hashing.c) */
BC_INTERNAL uint32_t bc_java_hash_continue(uint32_t h, PyObject *s);

static inline uint32_t index_hash_of(uint32_t h) {
    /* abs(int) as Java; abs(Integer.MIN_VALUE) is negative and RocketMQ stores 0 for it */
    if (h & 0x80000000u) {
        h = 0u - h;
        if (h == 0x80000000u) return 0;
    }
    return h;
}

/* ------------------------------------------------------------------ sys flag: transactions */
#define TRANSACTION_TYPE_MASK (0x3 << 2)
#define TRANSACTION_ROLLBACK_TYPE (0x3 << 2)
#define TX_MASK (0x3 << 2)
#define TX_PREPARED (0x1 << 2)
#define TX_ROLLBACK (0x3 << 2)

/* ------------------------------------------------------------------ properties (properties.c) */
BC_INTERNAL PyObject *bc_py_decode_properties(PyObject *self, PyObject *arg);
BC_INTERNAL PyObject *bc_py_encode_properties(PyObject *self, PyObject *arg);
BC_INTERNAL int bc_utf8_valid(const unsigned char *p, Py_ssize_t n);
BC_INTERNAL PyObject *bc_find_property(const unsigned char *p, Py_ssize_t n, const char *name, Py_ssize_t name_len);
BC_INTERNAL PyObject *bc_cached_utf8(const unsigned char *p, Py_ssize_t n);
BC_INTERNAL PyObject *bc_properties_dict(const unsigned char *p, Py_ssize_t n);

/* ------------------------------------------------------------------ slot access (slots.c) */
#define SLOTMAP_MAX 24
/* Slot access shared by decode_pulled (filling a factory's slots) and the put loop (reading a message's fields,
 * filling a result's). A SlotMap holds, for one exact class, the offsets of the member descriptors its attribute
 * lookup finds for the names: reading an offset is what that lookup returns (a member descriptor is a data
 * descriptor, so an instance __dict__ of a subclass cannot shadow it). A slot that is unset reads NULL: the caller
 * then asks by name (and gets the AttributeError). A class whose names do not all resolve to writable object slots
 * is mapped as not usable (the caller asks by name, calls the class, or refuses it). */
typedef struct { PyTypeObject *tp; int usable; Py_ssize_t off[SLOTMAP_MAX]; } SlotMap;
BC_INTERNAL int bc_slot_map_for(SlotMap *m, PyTypeObject *tp, PyObject *const *names, int n);

/* ------------------------------------------------------------------ CommitLog records (records.c) */
#define HEADER_SIZE 88
#define FIXED_OVERHEAD 91
#define MESSAGE_MAGIC_CODE 0xDAA320A7u
#define BLANK_MAGIC_CODE 0xCBD43194u
BC_INTERNAL int bc_body_crc32(const unsigned char *body, Py_ssize_t blen, uint32_t *out);
BC_INTERNAL void bc_write_record_header(unsigned char *r, long long total, uint32_t crc, long long queue_id,
                                        long long flag, long long qoff, long long phy, long long sys_flag,
                                        long long born_ts, const unsigned char *born_host, long long born_port,
                                        long long store_ts, const unsigned char *store_host, long long store_port,
                                        long long reconsume, long long prepared, long long blen);
BC_INTERNAL int bc_records_init(void);
BC_INTERNAL PyObject *bc_py_decode_pulled(PyObject *self, PyObject *args);
BC_INTERNAL PyObject *bc_py_scan_records(PyObject *self, PyObject *args, PyObject *kw);
BC_INTERNAL PyObject *bc_py_parse_dispatch(PyObject *self, PyObject *args);

/* ------------------------------------------------------------------ message batches (batch_append.c, wire.c) */
#define BATCH_ENTRY_HEAD 20
BC_INTERNAL PyObject *bc_py_append_batch(PyObject *self, PyObject *args);
BC_INTERNAL PyObject *bc_py_check_batch(PyObject *self, PyObject *args);
BC_INTERNAL PyObject *bc_py_offset_msg_ids(PyObject *self, PyObject *args);

/* ------------------------------------------------------------------ remoting frames (wire.c) */
#define BINARY_HEAD_SIZE 17

typedef struct { int code, language, version; int32_t opaque, flag; PyObject *remark, *ext; } BinaryHeader;
BC_INTERNAL int bc_decode_header_into(const unsigned char *b, Py_ssize_t end, BinaryHeader *h);
BC_INTERNAL int bc_wire_init(void);
BC_INTERNAL PyObject *bc_py_decode_batch(PyObject *self, PyObject *args, PyObject *kw);
BC_INTERNAL PyObject *bc_py_encode_batch(PyObject *self, PyObject *arg);
BC_INTERNAL PyObject *bc_py_decode_binary_header(PyObject *self, PyObject *arg);
BC_INTERNAL PyObject *bc_py_decode_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
BC_INTERNAL PyObject *bc_py_encode_binary_header(PyObject *self, PyObject *args);
BC_INTERNAL PyObject *bc_py_encode_binary_frame(PyObject *self, PyObject *args);
BC_INTERNAL PyObject *bc_py_encode_send_ok(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

/* ------------------------------------------------------------------ the store's puts (message_append.c) */
enum { R_STATUS, R_PHY, R_SIZE, R_QOFF, R_STORE_TS, R_HOST, R_PORT, R_ERROR, R_COUNT };
BC_INTERNAL extern PyObject *bc_result_str[R_COUNT];  /* the result's attribute names, R_* order */
BC_INTERNAL int bc_message_append_init(void);
BC_INTERNAL PyObject *bc_py_append_messages(PyObject *self, PyObject *args);
BC_INTERNAL PyObject *bc_py_put_single(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

/* ------------------------------------------------------------------ the broker's single send (send_v2.c) */
enum { M_BODY, M_BORN_HOST, M_BORN_PORT, M_BORN_TS, M_DELAY_LEVEL, M_DELAY_MS, M_FLAG, M_KEYS, M_LIMITS, M_PREPARED,
       M_PROPS_BYTES, M_QUEUE_ID, M_RECONSUME, M_SYS_FLAG, M_TAGS, M_TAIL, M_TOPIC, M_TOPIC_BYTES, M_UNIQ, M_COUNT };
BC_INTERNAL extern SlotMap bc_inner_map;  /* the message class v2_message fills, M_* order */
BC_INTERNAL extern PyObject *bc_s_b, *bc_s_e;  /* the header letters of the topic and the queue id */
BC_INTERNAL PyObject *bc_v2_message_c(PyObject *factory, PyObject *h, PyObject *body, long long write_queue_nums,
                                      PyObject *cluster, PyObject *born_host, PyObject *born_port);
BC_INTERNAL int bc_send_v2_init(void);
BC_INTERNAL PyObject *bc_py_v2_message(PyObject *self, PyObject *args);

/* ------------------------------------------------------------------ the rest of the Python API, by file */
/* hashing.c */
BC_INTERNAL PyObject *bc_py_java_hash_u32(PyObject *self, PyObject *arg);
BC_INTERNAL PyObject *bc_py_index_key_hash(PyObject *self, PyObject *arg);
/* index_file.c */
BC_INTERNAL PyObject *bc_py_index_entries(PyObject *self, PyObject *args);
BC_INTERNAL PyObject *bc_py_index_put(PyObject *self, PyObject *args);
/* consume_queue.c */
BC_INTERNAL int bc_consume_queue_init(void);
BC_INTERNAL PyObject *bc_py_scan_units(PyObject *self, PyObject *args);
BC_INTERNAL PyObject *bc_py_pick_units(PyObject *self, PyObject *args);
BC_INTERNAL PyObject *bc_py_group_units(PyObject *self, PyObject *arg);
BC_INTERNAL PyObject *bc_py_pack_units(PyObject *self, PyObject *args);
BC_INTERNAL PyObject *bc_py_take_pending(PyObject *self, PyObject *args);
/* send_lane.c */
BC_INTERNAL int bc_send_lane_init(void);
BC_INTERNAL PyObject *bc_py_serve_send_v2(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
/* pages.c */
BC_INTERNAL PyObject *bc_py_populate_write(PyObject *self, PyObject *args);
BC_INTERNAL PyObject *bc_py_read_in(PyObject *self, PyObject *args);
BC_INTERNAL PyObject *bc_py_sync_range(PyObject *self, PyObject *args);
/* receiver.c */
BC_INTERNAL extern PyTypeObject bc_ReceiverType;  /* BytesReceiver */

#endif
