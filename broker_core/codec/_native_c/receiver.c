/* broker_core.codec._native, BytesReceiver (twin in remoting/receive.py): the SDK's blocking transport receives a
 * large frame's parts from a socket straight into new bytes objects, and the event-loop transports (the broker's
 * server, protocol/command.py FrameDecoder) a large frame's body. */
#include "_native.h"
#include <sys/socket.h>
#include <limits.h>

/* ------------------------------------------------------------------ BytesReceiver
 * BytesReceiver(size, prefix): a bytes object of ``size`` bytes under construction, starting with ``prefix``.
 * recv(sock, flags) receives into the rest (one recv() call, GIL released; EINTR runs the signal handlers and
 * retries, as socket.recv_into does) and returns the count, 0 when the peer closed; OSError (BlockingIOError
 * when SO_RCVTIMEO expired) as socket.recv_into raises. take() hands the bytes object over once it is full;
 * until then nothing else sees it, so filling it in place is safe. The pure twin (remoting/receive.py) fills a
 * bytearray and copies it on take(); this one saves the zero-filled buffer and the copy (a pulled megabyte). */
typedef struct {
    PyObject_HEAD
    PyObject *data;      /* the bytes being filled; NULL once taken */
    Py_ssize_t filled;
    Py_ssize_t size;
} Receiver;

static PyObject *receiver_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    Py_ssize_t size;
    Py_buffer prefix;
    static char *kwlist[] = {"size", "prefix", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ny*", kwlist, &size, &prefix)) return NULL;
    if (size < 0 || prefix.len > size) {
        PyBuffer_Release(&prefix);
        PyErr_SetString(PyExc_ValueError, "BytesReceiver: the prefix is longer than the size");
        return NULL;
    }
    Receiver *self = (Receiver *)type->tp_alloc(type, 0);
    if (self == NULL) {
        PyBuffer_Release(&prefix);
        return NULL;
    }
    self->data = PyBytes_FromStringAndSize(NULL, size);
    if (self->data == NULL) {
        PyBuffer_Release(&prefix);
        Py_DECREF(self);
        return NULL;
    }
    memcpy(PyBytes_AS_STRING(self->data), prefix.buf, (size_t)prefix.len);
    self->filled = prefix.len;
    self->size = size;
    PyBuffer_Release(&prefix);
    return (PyObject *)self;
}

static void receiver_dealloc(Receiver *self) {
    Py_XDECREF(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *receiver_recv(Receiver *self, PyObject *args) {
    PyObject *sock;
    int flags = 0;
    if (!PyArg_ParseTuple(args, "O|i", &sock, &flags)) return NULL;
    if (self->data == NULL) {
        PyErr_SetString(PyExc_ValueError, "BytesReceiver: already taken");
        return NULL;
    }
    PyObject *fileno = PyObject_CallMethod(sock, "fileno", NULL);
    if (fileno == NULL) return NULL;
    long fd = PyLong_AsLong(fileno);
    Py_DECREF(fileno);
    if (fd == -1 && PyErr_Occurred()) return NULL;
    if (fd < 0 || fd > INT_MAX) {  /* a closed socket's fileno() is -1: recv_into would say EBADF */
        errno = EBADF;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    char *p = PyBytes_AS_STRING(self->data) + self->filled;
    size_t want = (size_t)(self->size - self->filled);
    for (;;) {
        ssize_t n;
        int err = 0;
        Py_BEGIN_ALLOW_THREADS
        n = recv((int)fd, p, want, flags);
        if (n < 0) err = errno;
        Py_END_ALLOW_THREADS
        if (n >= 0) {
            self->filled += n;
            return PyLong_FromSsize_t(n);
        }
        if (err != EINTR) {
            errno = err;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        if (PyErr_CheckSignals() < 0) return NULL;
    }
}

/* fill(data) -> n: copies the first n = min(len(data), size - filled) bytes of ``data`` into place (a frame's
 * bytes that arrived in a read buffer of their own); the rest of ``data`` belongs to whatever follows. */
static PyObject *receiver_fill(Receiver *self, PyObject *arg) {
    if (self->data == NULL) {
        PyErr_SetString(PyExc_ValueError, "BytesReceiver: already taken");
        return NULL;
    }
    Py_buffer src;
    if (PyObject_GetBuffer(arg, &src, PyBUF_SIMPLE) < 0) return NULL;
    Py_ssize_t n = self->size - self->filled;
    if (src.len < n) n = src.len;
    memcpy(PyBytes_AS_STRING(self->data) + self->filled, src.buf, (size_t)n);
    self->filled += n;
    PyBuffer_Release(&src);
    return PyLong_FromSsize_t(n);
}

/* into() -> the object to receive the unfilled rest into: this receiver itself, whose buffer (writable) is
 * exactly that rest, so a read into it can never pass the end (asyncio.BufferedProtocol.get_buffer). */
static PyObject *receiver_into(Receiver *self, PyObject *Py_UNUSED(ignored)) {
    if (self->data == NULL) {
        PyErr_SetString(PyExc_ValueError, "BytesReceiver: already taken");
        return NULL;
    }
    return Py_NewRef(self);
}

/* advance(n): n bytes were written into the buffer into() gave (buffer_updated); ValueError past the end. */
static PyObject *receiver_advance(Receiver *self, PyObject *arg) {
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (self->data == NULL) {
        PyErr_SetString(PyExc_ValueError, "BytesReceiver: already taken");
        return NULL;
    }
    if (n < 0 || n > self->size - self->filled) {
        PyErr_Format(PyExc_ValueError, "BytesReceiver: cannot advance %zd bytes, %zd are missing", n,
                     self->size - self->filled);
        return NULL;
    }
    self->filled += n;
    Py_RETURN_NONE;
}

/* The buffer protocol: the unfilled rest, writable. An event loop may still hold it (uvloop releases its read buffer
 * after buffer_updated returns) when take() hands the bytes over; nothing writes through it after the read. */
static int receiver_getbuffer(Receiver *self, Py_buffer *view, int flags) {
    if (self->data == NULL) {
        PyErr_SetString(PyExc_BufferError, "BytesReceiver: already taken");
        view->obj = NULL;
        return -1;
    }
    if (PyBuffer_FillInfo(view, (PyObject *)self, PyBytes_AS_STRING(self->data) + self->filled,
                          self->size - self->filled, 0, flags) < 0)
        return -1;
    return 0;
}

static PyBufferProcs receiver_as_buffer = {
    .bf_getbuffer = (getbufferproc)receiver_getbuffer,
};

/* len(): the bytes still missing (asyncio's selector transport checks len() of what get_buffer returns) */
static Py_ssize_t receiver_len(Receiver *self) {
    return self->data == NULL ? 0 : self->size - self->filled;
}

static PySequenceMethods receiver_as_sequence = {.sq_length = (lenfunc)receiver_len};

static PyObject *receiver_take(Receiver *self, PyObject *Py_UNUSED(ignored)) {
    if (self->data == NULL) {
        PyErr_SetString(PyExc_ValueError, "BytesReceiver: already taken");
        return NULL;
    }
    if (self->filled < self->size) {
        PyErr_Format(PyExc_ValueError, "BytesReceiver: %zd of %zd bytes received", self->filled, self->size);
        return NULL;
    }
    PyObject *out = self->data;
    self->data = NULL;
    return out;
}

static PyMethodDef receiver_methods[] = {
    {"recv", (PyCFunction)receiver_recv, METH_VARARGS, "Receive into the rest; the count, 0 at end of stream."},
    {"take", (PyCFunction)receiver_take, METH_NOARGS, "The full bytes object (once)."},
    {"fill", (PyCFunction)receiver_fill, METH_O, "Copy the head of a buffer into the rest; the count copied."},
    {"into", (PyCFunction)receiver_into, METH_NOARGS, "A writable buffer of exactly the unfilled rest."},
    {"advance", (PyCFunction)receiver_advance, METH_O, "Count n bytes written into into()'s buffer."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef receiver_members[] = {
    {"filled", T_PYSSIZET, offsetof(Receiver, filled), READONLY, "bytes in place so far"},
    {"size", T_PYSSIZET, offsetof(Receiver, size), READONLY, "bytes wanted in all"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject bc_ReceiverType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "broker_core.codec._native.BytesReceiver",
    .tp_basicsize = sizeof(Receiver),
    .tp_dealloc = (destructor)receiver_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A bytes object of a given size, filled from a socket (see remoting/receive.py).",
    .tp_methods = receiver_methods,
    .tp_members = receiver_members,
    .tp_as_buffer = &receiver_as_buffer,
    .tp_as_sequence = &receiver_as_sequence,
    .tp_new = receiver_new,
};
