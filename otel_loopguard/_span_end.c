/* Optional C accelerator of how the live processor reads every span that ends.

   ``span_reading(name, attributes)`` is ``otel_loopguard.adapters.span_reading`` (the Python
   function stays the definition; ``setup`` hands this module its constants and the Python
   function for what it does not take itself), and ``keys_within(keys, attributes)`` is
   ``keys.issuperset(attributes)``: whether a model span carries only the keys of a turn
   without content (``DeferredTurns``).

   Both run on the agent's thread in ``span.end()`` of every model span. In Python they cost
   about 1.5k and 1.9k instructions per span (``benchmarks/bench_processor_instructions.py``),
   a third of what the processor adds to a model span, mostly the interpreter's own work: the
   function call, the dictionary lookups, and for the key test the comparison of keys that are
   equal but not the same string objects (the instrumentation's and this package's). Here the
   reading is a few dictionary lookups, and the key test is answered from a small memo of the
   key objects seen (an instrumentation names every span's keys with the same string objects):
   a span whose keys are, in order, the very objects of a span tested before gets that answer
   by comparing pointers. The memo holds references to the objects it keeps, so a pointer
   cannot come to name another object; it is used only when every key is an exact ``str`` and
   the set an exact ``frozenset`` (no Python code runs while it is read or written, so the GIL
   keeps it consistent), and never on a build without the GIL.

   Anything else (attributes that are not an exact dict, a name that is not an exact str)
   goes to the Python functions, so the answers are always theirs
   (``tests/test_span_reading.py`` compares them). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

enum { NOT_READ = 0, MODEL_SPAN = 1, EVENT = 2, OTHER = 3 };

static PyObject *op_key, *oi_key, *tl_key;       /* the three marker keys */
static PyObject *model_ops;                      /* frozenset of model operations */
static PyObject *event_ops;                      /* tuple of event operations */
static PyObject *logfire_prefixes;               /* tuple of name prefixes */
static PyObject *unmarked_names;                 /* set of names known unmarked */
static PyObject *named_candidate;                /* Python: a new unmarked name's answer */
static PyObject *py_span_reading;                /* Python: the definition */
static PyObject *s_llm, *s_LLM, *s_tool, *s_TOOL;

static PyObject *
setup(PyObject *self, PyObject *args)
{
    PyObject *v[8];
    if (!PyArg_ParseTuple(args, "OOOO!O!O!O!O:setup", &v[0], &v[1], &v[2],
                          &PyFrozenSet_Type, &v[3], &PyTuple_Type, &v[4],
                          &PyTuple_Type, &v[5], &PySet_Type, &v[6], &v[7]))
        return NULL;
    PyObject **slots[8] = {&op_key, &oi_key, &tl_key, &model_ops, &event_ops,
                           &logfire_prefixes, &unmarked_names, &named_candidate};
    for (int i = 0; i < 8; i++) {
        Py_INCREF(v[i]);
        Py_XSETREF(*slots[i], v[i]);
    }
    Py_RETURN_NONE;
}

static PyObject *
set_fallback(PyObject *self, PyObject *function)
{
    Py_INCREF(function);
    Py_XSETREF(py_span_reading, function);
    Py_RETURN_NONE;
}

/* The value of ``key`` in ``attributes`` (borrowed): NULL when absent, or on an error. */
static PyObject *
get(PyObject *attributes, PyObject *key)
{
    return PyDict_GetItemWithError(attributes, key);
}

/* 1 when ``value == text``, 0 when not, -1 on error. */
static int
equals(PyObject *value, PyObject *text)
{
    return value == Py_None ? 0 : PyObject_RichCompareBool(value, text, Py_EQ);
}

static PyObject *
span_reading(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "span_reading(name, attributes)");
        return NULL;
    }
    PyObject *name = args[0], *attributes = args[1];
    if (op_key == NULL || py_span_reading == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "span_reading: setup() not called");
        return NULL;
    }
    if (!PyDict_CheckExact(attributes) || !PyUnicode_CheckExact(name))
        return PyObject_CallFunctionObjArgs(py_span_reading, name, attributes, NULL);
    PyObject *operation = get(attributes, op_key);
    PyObject *oi_kind = operation == NULL && !PyErr_Occurred() ? get(attributes, oi_key) : NULL;
    PyObject *tl_kind = operation == NULL && oi_kind == NULL && !PyErr_Occurred()
        ? get(attributes, tl_key) : NULL;
    if (PyErr_Occurred())
        return NULL;
    if (operation == NULL && oi_kind == NULL && tl_kind == NULL) {  /* unmarked: most spans */
        int known = PySet_Contains(unmarked_names, name);
        if (known < 0)
            return NULL;
        if (known)
            return PyLong_FromLong(NOT_READ);
        PyObject *found = PyObject_CallOneArg(named_candidate, name);
        if (found == NULL)
            return NULL;
        int truth = PyObject_IsTrue(found);
        Py_DECREF(found);
        if (truth < 0)
            return NULL;
        return PyLong_FromLong(truth ? EVENT : NOT_READ);
    }
    /* marked: the values are held while tested (a value's __eq__ could change the dict) */
    long reading = -1;
    int hit;
    PyObject *op = operation ? operation : Py_None, *oi = NULL, *tl = NULL;
    Py_INCREF(op);
    if ((hit = PySet_Contains(model_ops, op)) != 0) {
        reading = hit < 0 ? -1 : MODEL_SPAN;
        goto done;
    }
    oi = oi_kind ? oi_kind : get(attributes, oi_key);
    if (oi == NULL && PyErr_Occurred())
        goto done;
    oi = oi ? oi : Py_None;
    Py_INCREF(oi);
    tl = tl_kind ? tl_kind : get(attributes, tl_key);
    if (tl == NULL && PyErr_Occurred())
        goto done;
    tl = tl ? tl : Py_None;
    Py_INCREF(tl);
    if ((hit = equals(oi, s_LLM)) != 0 || (hit = equals(tl, s_llm)) != 0) {
        reading = hit < 0 ? -1 : MODEL_SPAN;
        goto done;
    }
    if ((hit = PySequence_Contains(event_ops, op)) != 0
            || (hit = equals(oi, s_TOOL)) != 0 || (hit = equals(tl, s_tool)) != 0) {
        reading = hit < 0 ? -1 : EVENT;
        goto done;
    }
    reading = OTHER;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(logfire_prefixes); i++) {
        Py_ssize_t at = PyUnicode_Tailmatch(name, PyTuple_GET_ITEM(logfire_prefixes, i), 0,
                                            PY_SSIZE_T_MAX, -1);
        if (at != 0) {
            reading = at < 0 ? -1 : EVENT;
            break;
        }
    }
done:
    Py_DECREF(op);
    Py_XDECREF(oi);
    Py_XDECREF(tl);
    return reading < 0 ? NULL : PyLong_FromLong(reading);
}

/* --- keys_within: the key test, with a memo of key objects --------------------------------- */

#define MEMO_KEYS 16     /* spans with more keys are tested without the memo */
#define MEMO_ENTRIES 8   /* key sequences remembered, replaced in turn */

typedef struct {
    PyObject *set;                 /* the frozenset tested against (a reference) */
    Py_ssize_t size;               /* how many keys; 0: an empty entry */
    PyObject *keys[MEMO_KEYS];     /* the key objects, in order (references) */
    int within;
} MemoEntry;

static MemoEntry memo[MEMO_ENTRIES];
static int memo_next;

static void
memo_clear(MemoEntry *entry)
{
    for (Py_ssize_t i = 0; i < entry->size; i++)
        Py_CLEAR(entry->keys[i]);
    Py_CLEAR(entry->set);
    entry->size = 0;
}

static PyObject *
keys_within(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "keys_within(keys, attributes)");
        return NULL;
    }
    PyObject *set = args[0], *attributes = args[1];
    if (!PyDict_CheckExact(attributes) || !PyFrozenSet_CheckExact(set))
        return PyObject_CallMethod(set, "issuperset", "O", attributes);
    Py_ssize_t size = PyDict_GET_SIZE(attributes);
    PyObject *keys[MEMO_KEYS];
    int memo_on = size > 0 && size <= MEMO_KEYS;
#ifdef Py_GIL_DISABLED
    memo_on = 0;
#endif
    if (memo_on) {
        Py_ssize_t pos = 0, i = 0;
        PyObject *key, *value;
        while (PyDict_Next(attributes, &pos, &key, &value)) {
            if (!PyUnicode_CheckExact(key)) {
                memo_on = 0;
                break;
            }
            keys[i++] = key;
        }
    }
    if (memo_on) {
        for (int e = 0; e < MEMO_ENTRIES; e++) {
            MemoEntry *entry = &memo[e];
            if (entry->size == size && entry->set == set
                    && memcmp(entry->keys, keys, (size_t)size * sizeof(PyObject *)) == 0)
                return PyBool_FromLong(entry->within);
        }
    }
    int within = 1;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(attributes, &pos, &key, &value)) {
        int found = PySet_Contains(set, key);
        if (found < 0)
            return NULL;
        if (!found) {
            within = 0;
            break;
        }
    }
    if (memo_on) {  /* only exact str keys: no Python code ran since they were collected */
        MemoEntry *entry = &memo[memo_next];
        MemoEntry old = *entry;  /* released once the entry is whole again: freeing the old
                                    set may run a finalizer, which may call this again */
        memo_next = (memo_next + 1) % MEMO_ENTRIES;
        Py_INCREF(set);
        entry->set = set;
        for (Py_ssize_t i = 0; i < size; i++) {
            Py_INCREF(keys[i]);
            entry->keys[i] = keys[i];
        }
        entry->size = size;
        entry->within = within;
        memo_clear(&old);
    }
    return PyBool_FromLong(within);
}

/* --- keep_aside: a blank model span kept aside, the common case --------------------------- */

static PyObject *deque_type;        /* collections.deque */
static PyObject *deque_append;      /* deque.append, called without a lookup by name */
static PyObject *ordered_type;      /* collections.OrderedDict: a run table may be one */
static Py_ssize_t max_traces, max_spans;

static PyObject *
setup_kept(PyObject *self, PyObject *args)
{
    PyObject *type, *ordered;
    Py_ssize_t traces, spans;
    if (!PyArg_ParseTuple(args, "O!O!nn:setup_kept", &PyType_Type, &type, &PyType_Type,
                          &ordered, &traces, &spans))
        return NULL;
    Py_INCREF(ordered);
    Py_XSETREF(ordered_type, ordered);
    PyObject *append = PyObject_GetAttrString(type, "append");
    if (append == NULL)
        return NULL;
    Py_XSETREF(deque_append, append);
    Py_INCREF(type);
    Py_XSETREF(deque_type, type);
    max_traces = traces;
    max_spans = spans;
    Py_RETURN_NONE;
}

static PyObject *
keep_aside(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "keep_aside(deferred, traces, trace_id, span)");
        return NULL;
    }
    PyObject *deferred = args[0], *traces = args[1], *trace_id = args[2], *span = args[3];
    if (deque_type == NULL || !PyDict_CheckExact(deferred) || !PyLong_CheckExact(trace_id)
            || !(PyDict_CheckExact(traces) || Py_TYPE(traces) == (PyTypeObject *)ordered_type))
        Py_RETURN_NONE;
#ifdef Py_GIL_DISABLED
    Py_RETURN_NONE;  /* the steps below are one atomic step only under the GIL */
#endif
    /* With exact dicts (or an OrderedDict, whose lookups are the dict's), an exact int key and
       a deque, no Python code runs between the last lookup and the append (neither allocates
       a tracked object): under the GIL, they are one step for other threads. */
    int found = PyDict_Contains(traces, trace_id);
    if (found != 0)
        return found < 0 ? NULL : Py_NewRef(Py_False);  /* the trace has a run: queue it */
    PyObject *kept = PyDict_GetItemWithError(deferred, trace_id);
    if (kept == NULL) {
        if (PyErr_Occurred())
            return NULL;
        if (PyDict_GET_SIZE(deferred) >= max_traces)
            Py_RETURN_NONE;  /* the oldest trace's spans go first: the Python path */
        /* Making the deque may run the cyclic collector, and a finalizer's Python code may
           let another thread in: setdefault keeps the deque a thread made meanwhile. */
        PyObject *made = PyObject_CallNoArgs(deque_type);
        if (made == NULL)
            return NULL;
        kept = PyDict_SetDefault(deferred, trace_id, made);  /* borrowed, held by the dict */
        Py_DECREF(made);
        if (kept == NULL)
            return NULL;
        if (Py_TYPE(kept) != (PyTypeObject *)deque_type)
            Py_RETURN_NONE;
    }
    else if (Py_TYPE(kept) != (PyTypeObject *)deque_type || PyObject_Length(kept) >= max_spans)
        Py_RETURN_NONE;  /* full: its spans are queued, by the Python path */
    PyObject *call[2] = {kept, span};
    PyObject *done = PyObject_Vectorcall(deque_append, call, 2, NULL);
    if (done == NULL)
        return NULL;
    Py_DECREF(done);
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS,
     "setup(operation_key, openinference_key, openllmetry_key, model_operations, "
     "event_operations, logfire_prefixes, unmarked_names, named_candidate)"},
    {"set_fallback", set_fallback, METH_O, "set_fallback(span_reading): the definition"},
    {"span_reading", (PyCFunction)(void (*)(void))span_reading, METH_FASTCALL,
     "span_reading(name, attributes) -> int: adapters.span_reading's answer."},
    {"keys_within", (PyCFunction)(void (*)(void))keys_within, METH_FASTCALL,
     "keys_within(keys, attributes) -> bool: keys.issuperset(attributes)."},
    {"setup_kept", setup_kept, METH_VARARGS,
     "setup_kept(deque, OrderedDict, max_traces, max_spans)"},
    {"keep_aside", (PyCFunction)(void (*)(void))keep_aside, METH_FASTCALL,
     "keep_aside(deferred, traces, trace_id, span) -> True (kept), False (the trace has a "
     "run) or None (the Python path decides)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_span_end",
    "Optional accelerator of what the live processor does in span.end().", -1, methods};

PyMODINIT_FUNC
PyInit__span_end(void)
{
    s_llm = PyUnicode_InternFromString("llm");
    s_LLM = PyUnicode_InternFromString("LLM");
    s_tool = PyUnicode_InternFromString("tool");
    s_TOOL = PyUnicode_InternFromString("TOOL");
    if (!s_llm || !s_LLM || !s_tool || !s_TOOL)
        return NULL;
    return PyModule_Create(&module);
}
