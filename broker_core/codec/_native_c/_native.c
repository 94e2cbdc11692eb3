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
 *
 * One extension module built from the C files of this directory (setup.py lists them), one per concern and named
 * after the Python module holding the twins; _native.h declares what they share (bc_* names, hidden from the
 * linker's exports). This file holds the module's state, the CodecError helper, the method table and PyInit.
 *   hashing.c         java_hash_u32, index_key_hash (codec/hashing.py); the Java String.hashCode the others use
 *   index_file.c      index_entries, index_put (codec/index_file.py)
 *   properties.c      decode_properties, encode_properties (codec/message.py); UTF-8 checks, property lookup,
 *                     the string cache
 *   records.c         scan_records, decode_pulled, parse_dispatch (codec/records.py); the record layout, header
 *                     writer and body CRC
 *   batch_append.c    check_batch, append_batch, offset_msg_ids (codec/batch_append.py)
 *   consume_queue.c   scan_units, pick_units, group_units, pack_units, take_pending (codec/consume_queue.py)
 *   wire.c            decode_batch, encode_batch, the ROCKETMQ binary header and frame, decode_frame,
 *                     encode_send_ok (codec/wire.py)
 *   message_append.c  append_messages, put_single: the store's put loop and single put (codec/message_append.py)
 *   send_v2.c         v2_message (codec/send_v2.py)
 *   send_lane.c       serve_send_v2: the broker's send lane (server/send_fast.py)
 *   pages.c           populate_write, read_in, sync_range (store/pages.py)
 *   receiver.c        BytesReceiver (remoting/receive.py)
 *   slots.c           SlotMap: direct access to a class's __slots__ (decode_pulled, the put loop, v2_message)
 */
#include "_native.h"

PyObject *bc_CodecError;   /* broker_core.codec.errors.CodecError(message, source, position) */
PyObject *bc_crc32_func;   /* isal.isal_zlib.crc32, else zlib.crc32 (the module's CRC32 names which) */
static const char *crc32_name;
PyObject *bc_empty_str;   /* "" */
PyObject *bc_zlib_decompress;  /* zlib.decompress */
PyObject *bc_zlib_error;       /* zlib.error */
PyObject *bc_native_slots_str;  /* "__native_slots__" */

PyObject *bc_codec_error(const char *source, Py_ssize_t pos, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (msg == NULL) return NULL;
    PyObject *exc;
    if (source == NULL)
        exc = PyObject_CallFunction(bc_CodecError, "OOn", msg, Py_None, pos);
    else
        exc = PyObject_CallFunction(bc_CodecError, "Osn", msg, source, pos);
    Py_DECREF(msg);
    if (exc != NULL) {
        PyErr_SetObject(bc_CodecError, exc);
        Py_DECREF(exc);
    }
    return NULL;
}

static PyMethodDef methods[] = {
    {"java_hash_u32", bc_py_java_hash_u32, METH_O, "Java String.hashCode() of a str, unsigned 32-bit."},
    {"index_key_hash", bc_py_index_key_hash, METH_O, "RocketMQ's IndexFile hash of topic#key."},
    {"index_entries", bc_py_index_entries, METH_VARARGS, "Index entries of dispatched records."},
    {"index_put", bc_py_index_put, METH_VARARGS, "Insert index entries into an IndexFile buffer."},
    {"decode_properties", bc_py_decode_properties, METH_O, "Decode a properties string."},
    {"encode_properties", bc_py_encode_properties, METH_O, "Encode a properties map."},
    {"decode_batch", (PyCFunction)(void (*)(void))bc_py_decode_batch, METH_VARARGS | METH_KEYWORDS, "Split a SEND_BATCH_MESSAGE body."},
    {"decode_pulled", bc_py_decode_pulled, METH_VARARGS, "Pulled records to messages through a factory."},
    {"append_batch", bc_py_append_batch, METH_VARARGS, "Write a batch's entries as CommitLog records."},
    {"check_batch", bc_py_check_batch, METH_VARARGS, "Whether every entry of a batch can be stored."},
    {"encode_batch", bc_py_encode_batch, METH_O, "Entries in RocketMQ's message batch layout."},
    {"parse_dispatch", bc_py_parse_dispatch, METH_VARARGS, "Dispatch tuples of records parsed from a segment."},
    {"scan_units", bc_py_scan_units, METH_VARARGS, "Walk written ConsumeQueue units."},
    {"pick_units", bc_py_pick_units, METH_VARARGS, "The ConsumeQueue units a pull reads, as runs."},
    {"group_units", bc_py_group_units, METH_O, "ConsumeQueue units of dispatched records, per queue."},
    {"offset_msg_ids", bc_py_offset_msg_ids, METH_VARARGS, "Offset message ids joined by commas."},
    {"scan_records", (PyCFunction)(void (*)(void))bc_py_scan_records, METH_VARARGS | METH_KEYWORDS, "Walk valid records; (end, why)."},
    {"decode_binary_header", bc_py_decode_binary_header, METH_O, "Decode a ROCKETMQ binary header."},
    {"decode_frame", (PyCFunction)(void (*)(void))bc_py_decode_frame, METH_FASTCALL, "One whole frame's command, or None."},
    {"encode_send_ok", (PyCFunction)(void (*)(void))bc_py_encode_send_ok, METH_FASTCALL, "A stored send's answer frame."},
    {"encode_binary_header", bc_py_encode_binary_header, METH_VARARGS, "Encode a ROCKETMQ binary header."},
    {"append_messages", bc_py_append_messages, METH_VARARGS, "The store's put loop: messages as CommitLog records."},
    {"put_single", (PyCFunction)(void (*)(void))bc_py_put_single, METH_FASTCALL, "One message's put, or None."},
    {"pack_units", bc_py_pack_units, METH_VARARGS, "Consecutive ConsumeQueue units written into a buffer."},
    {"take_pending", bc_py_take_pending, METH_VARARGS, "The dispatcher's drain of the put path's hand-off."},
    {"populate_write", bc_py_populate_write, METH_VARARGS, "Fault in a mapping's pages for writing (GIL released)."},
    {"sync_range", bc_py_sync_range, METH_VARARGS, "msync(MS_SYNC) a range of a file mapping (GIL released)."},
    {"read_in", bc_py_read_in, METH_VARARGS, "posix_fadvise(WILLNEED) a range of a file in slices (GIL released)."},
    {"encode_binary_frame", bc_py_encode_binary_frame, METH_VARARGS, "A whole frame with a ROCKETMQ binary header."},
    {"v2_message", bc_py_v2_message, METH_VARARGS, "The store message of a plain SEND_MESSAGE_V2, or None."},
    {"serve_send_v2", (PyCFunction)(void (*)(void))bc_py_serve_send_v2, METH_FASTCALL,
     "The answer frame to one read holding one plain SEND_MESSAGE_V2, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "broker_core's codec loops in C", -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *errors = PyImport_ImportModule("broker_core.codec.errors");
    if (errors == NULL) return NULL;
    bc_CodecError = PyObject_GetAttrString(errors, "CodecError");
    Py_DECREF(errors);
    if (bc_CodecError == NULL) return NULL;
    PyObject *zlib = PyImport_ImportModule("zlib");
    if (zlib == NULL) return NULL;
    /* ISA-L's CRC-32 (PyPI isal, folding with carry-less multiplies) where installed: the same function as zlib's,
     * about 4x faster here (9.2 vs 2.1 GB/s; 285 vs 787 ns a 1 KiB body); zlib's otherwise */
    PyObject *isal = PyImport_ImportModule("isal.isal_zlib");
    if (isal != NULL) {
        bc_crc32_func = PyObject_GetAttrString(isal, "crc32");
        Py_DECREF(isal);
        crc32_name = "isal";
    } else {
        PyErr_Clear();
        bc_crc32_func = PyObject_GetAttrString(zlib, "crc32");
        crc32_name = "zlib";
    }
    bc_zlib_decompress = PyObject_GetAttrString(zlib, "decompress");
    bc_zlib_error = PyObject_GetAttrString(zlib, "error");
    Py_DECREF(zlib);
    if (bc_crc32_func == NULL || bc_zlib_decompress == NULL || bc_zlib_error == NULL) return NULL;
    /* each file's interned names (attribute names, header letters, property names) and its own imports */
    if (bc_consume_queue_init() < 0 || bc_records_init() < 0 || bc_message_append_init() < 0 ||
        bc_send_v2_init() < 0 || bc_send_lane_init() < 0 || bc_wire_init() < 0)
        return NULL;
    bc_native_slots_str = PyUnicode_InternFromString("__native_slots__");
    bc_empty_str = PyUnicode_InternFromString("");
    if (bc_native_slots_str == NULL || bc_empty_str == NULL) return NULL;
    if (PyType_Ready(&bc_ReceiverType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddStringConstant(m, "CRC32", crc32_name) < 0 ||
        PyModule_AddObjectRef(m, "BytesReceiver", (PyObject *)&bc_ReceiverType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
