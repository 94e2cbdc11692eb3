/* broker_core.codec._native, direct slot access: bc_slot_map_for maps a class's attribute names to the offsets of
 * its __slots__ (SlotMap, _native.h), for decode_pulled (records.c), the put loop (message_append.c) and v2_message
 * (send_v2.c). */
#include "_native.h"

/* ------------------------------------------------------------------ SlotMap */
/* The map for `tp` (remapped when another class comes): 1 usable, 0 not, -1 error */
int bc_slot_map_for(SlotMap *m, PyTypeObject *tp, PyObject *const *names, int n) {
    if (m->tp == tp) return m->usable;
    int usable = n <= SLOTMAP_MAX;
    Py_ssize_t off[SLOTMAP_MAX];
    for (int i = 0; i < n && usable; i++) {
        PyObject *descr = PyObject_GetAttr((PyObject *)tp, names[i]);
        if (descr == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear();
            usable = 0;
            break;
        }
        if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            PyMemberDef *def = ((PyMemberDescrObject *)descr)->d_member;
            usable = def->type == T_OBJECT_EX && !(def->flags & READONLY);
            off[i] = def->offset;
        } else {
            usable = 0;
        }
        Py_DECREF(descr);
    }
    Py_XSETREF(m->tp, (PyTypeObject *)Py_NewRef((PyObject *)tp));
    m->usable = usable;
    if (usable) memcpy(m->off, off, sizeof(off[0]) * (size_t)n);
    return usable;
}
