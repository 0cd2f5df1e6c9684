/* The script view's content loop, compiled: scriptbridge._render._read_blocks in C.
 *
 * read_blocks() reads a content array of plain data exactly as _read_blocks (its pure-Python
 * twin in _render.py) reads it, and gives the same views, claims, seen set and node count;
 * tests/test_render_paths.py checks the two against each other and against the general path
 * on hostile results. It shows at once the blocks of the common shapes _read_blocks names, and
 * hands every other item to the caller's `other` callback, in order. It runs no code of the
 * result's own: every type is compared by identity (an exact dict, str, int, ...), a block's
 * keys are checked to be exact str before any is looked up, and the only calls it makes are
 * to the callables it was configured or called with.
 *
 * A free-threaded build splits reference counts, which this loop reads: it is not built there
 * (scriptbridge then uses the Python loop).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef Py_GIL_DISABLED
#error "scriptbridge._fastcontent reads reference counts: not built for a free-threaded Python"
#endif

#if PY_VERSION_HEX < 0x030C0000
#define READY(s) PyUnicode_READY(s)
#else
#define READY(s) 0
#endif

static PyObject *s_type, *s_text, *s_data, *s_mime_type, *s_uri, *s_resource, *s_blob,
    *s_disposition;
static PyObject *well_formed_fn, *is_never_fn, *not_plain_exc;

static int
is_leaf(PyObject *v)
{
    return PyUnicode_CheckExact(v) || v == Py_None || PyLong_CheckExact(v) || PyBool_Check(v) ||
           PyFloat_CheckExact(v) || PyBytes_CheckExact(v);
}

static int
is_container(PyObject *v)
{
    return PyDict_CheckExact(v) || PyList_CheckExact(v) || PyTuple_CheckExact(v);
}

static int
is_ascii_str(PyObject *v, const char *ascii)
{
    return PyUnicode_CompareWithASCIIString(v, ascii) == 0;
}

/* A new reference: `s` (an exact str) made well formed, as markers.well_formed does it. */
static PyObject *
shown_str(PyObject *s)
{
    if (READY(s) < 0) {
        return NULL;
    }
    if (PyUnicode_IS_ASCII(s)) {
        return Py_NewRef(s);
    }
    return PyObject_CallOneArg(well_formed_fn, s);
}

/* Whether an exact str holds something besides whitespace (what str.strip() keeps). */
static int
has_non_space(PyObject *s)
{
    if (READY(s) < 0) {
        return -1;
    }
    Py_ssize_t length = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < length; i++) {
        if (!Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i))) {
            return 1;
        }
    }
    return 0;
}

/* A new dict {key0: value0, key1: value1[, key2: value2]}, values given as new references
 * (stolen, NULL on error); NULL on error. */
static PyObject *
view_of(PyObject *key0, PyObject *value0, PyObject *key1, PyObject *value1, PyObject *key2,
        PyObject *value2)
{
    PyObject *view = NULL;
    if (value0 == NULL || value1 == NULL || (key2 != NULL && value2 == NULL)) {
        goto done;
    }
    view = PyDict_New();
    if (view == NULL || PyDict_SetItem(view, key0, value0) < 0 ||
        PyDict_SetItem(view, key1, value1) < 0 ||
        (key2 != NULL && PyDict_SetItem(view, key2, value2) < 0)) {
        Py_CLEAR(view);
    }
done:
    Py_XDECREF(value0);
    Py_XDECREF(value1);
    Py_XDECREF(value2);
    return view;
}

static int
append_index(PyObject *list, Py_ssize_t index)
{
    PyObject *number = PyLong_FromSsize_t(index);
    if (number == NULL) {
        return -1;
    }
    int failed = PyList_Append(list, number);
    Py_DECREF(number);
    return failed;
}

typedef struct {
    PyObject *shown, *links, *waiting, *never, *record_views, *link_view;
    Py_ssize_t nodes;
} Reading;

static int show_link(Reading *r, PyObject *block, PyObject *uri, Py_ssize_t size);

/* Show `block`, an exact dict whose keys are all exact str, if it has a common shape.
 * 1: shown (appended to shown), 0: not of a common shape (nothing done), -1: error. */
static int
show_common(Reading *r, PyObject *block, PyObject *kind)
{
    Py_ssize_t size = PyDict_GET_SIZE(block);
    PyObject *view;
    if (is_ascii_str(kind, "text")) {
        PyObject *text = PyDict_GetItemWithError(block, s_text);
        if (size != 2 || text == NULL || !PyUnicode_CheckExact(text)) {
            return PyErr_Occurred() ? -1 : 0;
        }
        view = view_of(s_type, Py_NewRef(s_text), s_text, shown_str(text), NULL, NULL);
        r->nodes += 2;
    }
    else if (is_ascii_str(kind, "image") || is_ascii_str(kind, "audio")) {
        PyObject *data = PyDict_GetItemWithError(block, s_data);
        if (data == NULL && PyErr_Occurred()) {
            return -1;
        }
        PyObject *mime = PyDict_GetItemWithError(block, s_mime_type);
        if (mime == NULL && PyErr_Occurred()) {
            return -1;
        }
        if (size != 3 || data == NULL || !PyUnicode_CheckExact(data) || mime == NULL ||
            !PyUnicode_CheckExact(mime)) {
            return 0;
        }
        int filled = has_non_space(mime);
        if (filled <= 0) {
            return filled;
        }
        /* held across shown_str, which may run Python code */
        Py_INCREF(data);
        Py_INCREF(mime);
        PyObject *shown_data = shown_str(data);
        PyObject *shown_mime = shown_data == NULL ? NULL : shown_str(mime);
        Py_DECREF(data);
        Py_DECREF(mime);
        view = view_of(s_type, Py_NewRef(kind), s_data, shown_data, s_mime_type, shown_mime);
        r->nodes += 3;
    }
    else if (is_ascii_str(kind, "resource")) {
        PyObject *record = PyDict_GetItemWithError(block, s_resource);
        if (size != 2 || record == NULL || !PyDict_CheckExact(record)) {
            return PyErr_Occurred() ? -1 : 0;
        }
        Py_ssize_t pos = 0;
        PyObject *name, *value;
        while (PyDict_Next(record, &pos, &name, &value)) {
            if (!PyUnicode_CheckExact(name) || !(is_leaf(value) || is_container(value))) {
                return 0;
            }
        }
        PyObject *uri = PyDict_GetItemWithError(record, s_uri);
        PyObject *text = uri == NULL ? NULL : PyDict_GetItemWithError(record, s_text);
        PyObject *blob = text == NULL ? NULL : PyDict_GetItemWithError(record, s_blob);
        if (PyErr_Occurred()) {
            return -1;
        }
        if (uri == NULL || !PyUnicode_CheckExact(uri) || text == NULL ||
            !PyUnicode_CheckExact(text) || (blob != NULL && PyUnicode_CheckExact(blob))) {
            return 0;
        }
        /* an embedded resource: no walk reads its fields, and it counts no nodes */
        view = view_of(s_type, Py_NewRef(s_text), s_text, shown_str(text), NULL, NULL);
    }
    else if (is_ascii_str(kind, "resource_link")) {
        PyObject *uri = PyDict_GetItemWithError(block, s_uri);
        if (uri == NULL || !PyUnicode_CheckExact(uri) || PyUnicode_GET_LENGTH(uri) == 0) {
            return PyErr_Occurred() ? -1 : 0;
        }
        Py_INCREF(uri); /* held across is_never and link_view, which run Python code */
        int answer = show_link(r, block, uri, size);
        Py_DECREF(uri);
        return answer;
    }
    else {
        return 0;
    }
    if (view == NULL) {
        return -1;
    }
    int failed = PyList_Append(r->shown, view);
    Py_DECREF(view);
    return failed < 0 ? -1 : 1;
}

/* Show a resource link `block` (held by the caller, as its `uri` is): 1 or -1 on error, 0
 * when it has no common shape. */
static int
show_link(Reading *r, PyObject *block, PyObject *uri, Py_ssize_t size)
{
    Py_ssize_t pos = 0;
    PyObject *name, *value;
    while (PyDict_Next(block, &pos, &name, &value)) {
        if (!is_leaf(value)) {
            return 0;
        }
    }
    PyObject *disposition = PyDict_GetItemWithError(block, s_disposition);
    int claimed = 0;
    if (disposition == NULL && PyErr_Occurred()) {
        return -1;
    }
    if (disposition != NULL && disposition != Py_None) {
        if (PyUnicode_CheckExact(disposition) && is_ascii_str(disposition, "never")) {
            claimed = 1;
        }
        else {
            PyObject *answer = PyObject_CallOneArg(is_never_fn, disposition);
            if (answer == NULL) {
                return -1;
            }
            claimed = PyObject_IsTrue(answer);
            Py_DECREF(answer);
            if (claimed < 0) {
                return -1;
            }
        }
    }
    if (claimed) {
        if (PyDict_SetItem(r->never, uri, Py_None) < 0) {
            return -1;
        }
    }
    else {
        claimed = PyDict_Contains(r->never, uri);
        if (claimed < 0) {
            return -1;
        }
    }
    PyObject *views = PyTuple_GET_ITEM(r->record_views, claimed);
    PyObject *made = PyDict_GetItemWithError(views, uri);
    if (made != NULL) {
        Py_INCREF(made);
    }
    else if (PyErr_Occurred()) {
        return -1;
    }
    else {
        made = PyObject_CallFunctionObjArgs(r->link_view, uri, claimed ? Py_True : Py_False,
                                            NULL);
        if (made == NULL) {
            return -1;
        }
    }
    int failed;
    if (made == Py_None) { /* no record: shown once the claims are read */
        failed = append_index(r->waiting, PyList_GET_SIZE(r->shown)) < 0 ||
                 PyList_Append(r->shown, block) < 0;
    }
    else if (!PyDict_CheckExact(made)) {
        PyErr_SetString(PyExc_TypeError, "link_view must answer a dict or None");
        failed = 1;
    }
    else {
        PyObject *copy = PyDict_Copy(made);
        failed = copy == NULL ||
                 (!claimed && append_index(r->links, PyList_GET_SIZE(r->shown)) < 0) ||
                 PyList_Append(r->shown, copy) < 0;
        Py_XDECREF(copy);
    }
    Py_DECREF(made);
    if (failed) {
        return -1;
    }
    r->nodes += size;
    return 1;
}

/* Read one item of the content (borrowed from it): 0 or -1 on error. */
static int
read_one(Reading *r, PyObject *item, PyObject *seen, PyObject *other)
{
    int shown = 0;
    if (PyDict_CheckExact(item)) {
        if (Py_REFCNT(item) > 1) { /* another container may hold it: the seen set decides */
            PyObject *key = PyLong_FromVoidPtr(item);
            if (key == NULL) {
                return -1;
            }
            int found = PySet_Contains(seen, key);
            if (found == 0) {
                found = PySet_Add(seen, key) < 0 ? -1 : 0;
            }
            Py_DECREF(key);
            if (found != 0) {
                if (found > 0) { /* reached twice: a limit, which a strict walk doesn't pass */
                    PyErr_SetNone(not_plain_exc);
                }
                return -1;
            }
        }
        Py_INCREF(item);
        Py_ssize_t pos = 0;
        PyObject *name, *value;
        int str_keys = 1;
        while (PyDict_Next(item, &pos, &name, &value)) {
            if (!PyUnicode_CheckExact(name)) {
                str_keys = 0; /* not looked up: read by `other` */
                break;
            }
        }
        if (str_keys) {
            PyObject *kind = PyDict_GetItemWithError(item, s_type);
            if (kind != NULL && PyUnicode_CheckExact(kind)) {
                Py_INCREF(kind);
                shown = show_common(r, item, kind);
                Py_DECREF(kind);
            }
            else if (PyErr_Occurred()) {
                shown = -1;
            }
        }
        Py_DECREF(item);
        if (shown != 0) {
            return shown < 0 ? -1 : 0;
        }
    }
    PyObject *done = PyObject_CallOneArg(other, item);
    if (done == NULL) {
        return -1;
    }
    Py_DECREF(done);
    return 0;
}

static PyObject *
read_blocks(PyObject *module, PyObject *args)
{
    PyObject *blocks, *seen, *other;
    Reading r = {0};
    if (!PyArg_ParseTuple(args, "OO!O!O!O!O!O!OO:read_blocks", &blocks, &PyList_Type, &r.shown,
                          &PyList_Type, &r.links, &PyList_Type, &r.waiting, &PyDict_Type,
                          &r.never, &PySet_Type, &seen, &PyTuple_Type, &r.record_views,
                          &r.link_view, &other)) {
        return NULL;
    }
    if (well_formed_fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "scriptbridge._fastcontent is not configured");
        return NULL;
    }
    if (!(PyList_CheckExact(blocks) || PyTuple_CheckExact(blocks)) ||
        PyTuple_GET_SIZE(r.record_views) != 2 ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(r.record_views, 0)) ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(r.record_views, 1))) {
        PyErr_SetString(PyExc_TypeError, "read_blocks: a list or tuple of blocks, two dicts");
        return NULL;
    }
    Py_INCREF(blocks);
    int failed = 0;
    for (Py_ssize_t i = 0; !failed; i++) {
        PyObject *item;
        if (PyList_CheckExact(blocks)) {
            if (i >= PyList_GET_SIZE(blocks)) {
                break;
            }
            item = PyList_GET_ITEM(blocks, i);
        }
        else {
            if (i >= PyTuple_GET_SIZE(blocks)) {
                break;
            }
            item = PyTuple_GET_ITEM(blocks, i);
        }
        failed = read_one(&r, item, seen, other) < 0;
    }
    Py_DECREF(blocks);
    return failed ? NULL : PyLong_FromSsize_t(r.nodes);
}

static PyObject *
configure(PyObject *module, PyObject *args)
{
    PyObject *well_formed, *is_never, *not_plain;
    if (!PyArg_ParseTuple(args, "OOO:configure", &well_formed, &is_never, &not_plain)) {
        return NULL;
    }
    Py_XSETREF(well_formed_fn, Py_NewRef(well_formed));
    Py_XSETREF(is_never_fn, Py_NewRef(is_never));
    Py_XSETREF(not_plain_exc, Py_NewRef(not_plain));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"read_blocks", read_blocks, METH_VARARGS,
     "read_blocks(blocks, shown, links, waiting, never, seen, record_views, link_view, other)"
     " -> int\n\nscriptbridge._render._read_blocks, compiled: the nodes left to count."},
    {"configure", configure, METH_VARARGS,
     "configure(well_formed, is_never, not_plain): what read_blocks calls and raises."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "scriptbridge._fastcontent",
    "The script view's content loop, compiled (see scriptbridge._render).", -1, methods,
};

PyMODINIT_FUNC
PyInit__fastcontent(void)
{
    struct {
        PyObject **slot;
        const char *text;
    } names[] = {
        {&s_type, "type"},       {&s_text, "text"}, {&s_data, "data"},
        {&s_mime_type, "mimeType"}, {&s_uri, "uri"}, {&s_resource, "resource"},
        {&s_blob, "blob"},       {&s_disposition, "disposition"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (*names[i].slot == NULL) {
            *names[i].slot = PyUnicode_InternFromString(names[i].text);
            if (*names[i].slot == NULL) {
                return NULL;
            }
        }
    }
    return PyModule_Create(&module_def);
}
