/* The optional C decoder of OTLP protobuf trace requests (otel_loopguard.otlp._proto), and of
 * the span records of parsed OTLP/JSON requests (otel_loopguard.otlp._json; json_spans, below).
 *
 * decode_spans(body, SpanRecord) reads a serialized ExportTraceServiceRequest straight from its
 * bytes and returns the list of SpanRecord that decode_proto_spans gives for the parsed message
 * (no payloads), or None. The Python path (protobuf's parser, then _proto.py) is the definition
 * and stays the reference (tests/test_wire.py): this file handles the well-formed requests
 * exporters send and answers None for anything else, so that the Python path gives its exact
 * result, partial success or error message. None is the answer to:
 *
 * - a span the Python path would reject: an id of the wrong length (a link's too), a value
 *   nested MAX_VALUE_DEPTH levels or more (in any attributes it reads: resource, scope, span,
 *   event, link);
 * - what protobuf's parser refuses or treats specially: truncated input, invalid UTF-8 in any
 *   string field, groups and unknown wire types, varints longer than protobuf reads them,
 *   messages nested more than MAX_MESSAGE_DEPTH (protobuf stops at 100);
 * - anything the decoder does not read: a field this file does not know (a newer schema's, an
 *   unknown one, the string-table indexes), a known field with another wire type, a singular
 *   field given twice (protobuf merges or overwrites; both are rare enough to leave to it), an
 *   AnyValue with more than one member.
 *
 * The body is only read, under the GIL; an error while decoding (even a MemoryError) is cleared
 * and answered with None, so that the Python path decides.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#define MAX_VALUE_DEPTH 32   /* otel_loopguard.otlp._spans.MAX_VALUE_DEPTH */
#define MAX_MESSAGE_DEPTH 64 /* well below protobuf's recursion limit of 100 */
#define REMOTE_PARENT 0x300  /* otel_loopguard.otlp._spans.REMOTE_PARENT: both bits set */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

typedef struct {
    const uint8_t *p, *end;
} reader_t;

typedef struct {
    uint32_t number;
    int type;
    uint64_t num;        /* a varint or fixed-width value */
    const uint8_t *data; /* a length-delimited value */
    Py_ssize_t len;
} field_t;

typedef struct {
    PyObject *record; /* the SpanRecord class */
    PyObject *out;    /* the records, in message order */
} ctx_t;

/* --- records ------------------------------------------------------------------------------ */
#define FIELDS 13
static const char *const field_names[FIELDS] = {
    "trace_id", "span_id", "parent_span_id", "name", "start_time_ns", "end_time_ns",
    "attributes", "status_code", "status_message", "scope_name", "resource", "events",
    "parent_is_remote"};

/* Where a plain slotted dataclass with SpanRecord's fields keeps each one, to fill a new
 * instance directly: its generated __init__ only assigns them, and calling it is a quarter of
 * the decoder's cost per span. For any other class (a __post_init__, other fields, fields that
 * are not plain slots) `layout_of` stays NULL and the class is called. */
static PyObject *layout_of; /* the class the offsets are for (a strong reference) */
static Py_ssize_t offsets[FIELDS];

/* 1 when type is such a class; its offsets are then in found. */
static int plain_record(PyObject *type, Py_ssize_t *found) {
    PyObject *fields = NULL;
    int plain = 0;
    if (!PyType_Check(type) || ((PyTypeObject *)type)->tp_new != PyBaseObject_Type.tp_new ||
        PyObject_HasAttrString(type, "__post_init__") ||
        (fields = PyObject_GetAttrString(type, "__dataclass_fields__")) == NULL ||
        !PyDict_Check(fields) || PyDict_GET_SIZE(fields) != FIELDS)
        goto done;
    PyObject *dict = ((PyTypeObject *)type)->tp_dict;
    Py_ssize_t pos = 0, i = 0;
    if (dict == NULL) goto done;
    PyObject *key, *value;
    while (PyDict_Next(fields, &pos, &key, &value)) { /* in declaration order */
        if (!PyUnicode_Check(key) || PyUnicode_CompareWithASCIIString(key, field_names[i]))
            goto done;
        PyObject *member = PyDict_GetItemWithError(dict, key);
        if (member == NULL || !Py_IS_TYPE(member, &PyMemberDescr_Type)) goto done;
        PyMemberDef *def = ((PyMemberDescrObject *)member)->d_member;
        if (def->type != T_OBJECT_EX || (def->flags & READONLY)) goto done;
        found[i++] = def->offset;
    }
    plain = 1;
done:
    PyErr_Clear();
    Py_XDECREF(fields);
    return plain;
}

/* A new record of the 13 values in args (references stolen, even on failure). */
static PyObject *new_record(PyObject *type, PyObject **args) {
    PyObject *record = NULL;
    Py_ssize_t found[FIELDS];
    if (type != layout_of && plain_record(type, found)) {
        memcpy(offsets, found, sizeof offsets);
        Py_INCREF(type);
        Py_XSETREF(layout_of, type);
    }
    if (type == layout_of) {
        record = ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 0);
        if (record != NULL) {
            for (int i = 0; i < FIELDS; i++) *(PyObject **)((char *)record + offsets[i]) = args[i];
            return record;
        }
    } else {
        record = PyObject_Vectorcall(type, args, FIELDS, NULL);
    }
    for (int i = 0; i < FIELDS; i++) Py_DECREF(args[i]);
    return record;
}

/* A varint of at most `max` bytes (protobuf reads 10 for values, 5 for tags and lengths). */
static int varint(reader_t *r, int max, uint64_t *out) {
    uint64_t value = 0;
    for (int i = 0; i < max; i++) {
        if (r->p >= r->end) return -1;
        uint8_t c = *r->p++;
        if (i == 9 && c > 1) return -1; /* past 64 bits */
        value |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80)) {
            *out = value;
            return 0;
        }
    }
    return -1;
}

static uint64_t little_endian(const uint8_t *p, int size) {
    uint64_t value = 0;
    for (int i = size - 1; i >= 0; i--) value = (value << 8) | p[i];
    return value;
}

/* Read the next field into f: 1 when read, 0 at the end, -1 when malformed or a group. */
static int next_field(reader_t *r, field_t *f) {
    uint64_t tag, size;
    if (r->p >= r->end) return 0;
    if (varint(r, 5, &tag) < 0 || tag > 0xffffffffu || (tag >> 3) == 0) return -1;
    f->number = (uint32_t)(tag >> 3);
    f->type = (int)(tag & 7);
    switch (f->type) {
    case WT_VARINT:
        return varint(r, 10, &f->num) < 0 ? -1 : 1;
    case WT_I64:
    case WT_I32: {
        int width = f->type == WT_I64 ? 8 : 4;
        if (r->end - r->p < width) return -1;
        f->num = little_endian(r->p, width);
        r->p += width;
        return 1;
    }
    case WT_LEN:
        if (varint(r, 5, &size) < 0 || size > 0x7fffffffu ||
            size > (uint64_t)(r->end - r->p))
            return -1;
        f->data = r->p;
        f->len = (Py_ssize_t)size;
        r->p += size;
        return 1;
    default:
        return -1;
    }
}

/* --- strings and values ---------------------------------------------------------------- */
static PyObject *text(const uint8_t *data, Py_ssize_t len) {
    return PyUnicode_DecodeUTF8((const char *)data, len, NULL);
}

/* 0 when a string field the records do not keep is valid UTF-8 (protobuf checks it). */
static int check_text(const uint8_t *data, Py_ssize_t len) {
    Py_ssize_t i = 0;
    while (i < len && data[i] < 0x80) i++;
    if (i == len) return 0;
    PyObject *s = text(data, len);
    if (s == NULL) return -1;
    Py_DECREF(s);
    return 0;
}

/* Short ASCII strings seen before (attribute keys, span names, values such as a tool's name),
 * the same objects each time: no copy, no new hash, and records that share their keys. A slot
 * per hash of the bytes, replaced on collision; at most CACHE_SLOTS strings of CACHED bytes. */
#define CACHE_SLOTS 1024
#define CACHED 48
static PyObject *cache[CACHE_SLOTS];

static PyObject *short_text(const uint8_t *data, Py_ssize_t len) {
    if (len > CACHED || len == 0) return text(data, len);
    uint32_t hash = 2166136261u; /* FNV-1a */
    for (Py_ssize_t i = 0; i < len; i++) hash = (hash ^ data[i]) * 16777619u;
    PyObject **slot = &cache[(hash ^ (hash >> 16)) & (CACHE_SLOTS - 1)];
    PyObject *s = *slot;
    if (s != NULL && PyUnicode_GET_LENGTH(s) == len && memcmp(PyUnicode_1BYTE_DATA(s), data,
                                                              (size_t)len) == 0) {
        Py_INCREF(s);
        return s;
    }
    s = text(data, len);
    if (s != NULL && PyUnicode_IS_ASCII(s)) { /* its bytes are its characters */
        Py_INCREF(s);
        Py_XSETREF(*slot, s);
    }
    return s;
}

static PyObject *hex(const uint8_t *data, Py_ssize_t len) {
    static const char digits[] = "0123456789abcdef";
    PyObject *s = PyUnicode_New(2 * len, 127);
    if (s == NULL) return NULL;
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(s);
    for (Py_ssize_t i = 0; i < len; i++) {
        out[2 * i] = (Py_UCS1)digits[data[i] >> 4];
        out[2 * i + 1] = (Py_UCS1)digits[data[i] & 15];
    }
    return s;
}

static int put_pair(PyObject *dict, const uint8_t *data, Py_ssize_t len, int depth, int level);

/* An AnyValue at value depth `depth`, message level `level`: a new reference or NULL. */
static PyObject *any_value(const uint8_t *data, Py_ssize_t len, int depth, int level) {
    reader_t r = {data, data + len};
    field_t f, member = {0};
    int got, seen = 0;
    if (level > MAX_MESSAGE_DEPTH) return NULL;
    while ((got = next_field(&r, &f)) > 0) {
        static const int wire[8] = {-1, WT_LEN, WT_VARINT, WT_VARINT, WT_I64,
                                    WT_LEN, WT_LEN, WT_LEN};
        if (seen || f.number > 7 || wire[f.number] != f.type) return NULL;
        member = f;
        seen = 1;
    }
    if (got < 0) return NULL;
    if (!seen) Py_RETURN_NONE;
    switch (member.number) {
    case 1:
        return short_text(member.data, member.len);
    case 2:
        return PyBool_FromLong(member.num != 0);
    case 3:
        return PyLong_FromLongLong((long long)(int64_t)member.num);
    case 4: {
        double value;
        memcpy(&value, &member.num, sizeof value);
        return PyFloat_FromDouble(value);
    }
    case 7:
        return hex(member.data, member.len);
    }
    if (depth >= MAX_VALUE_DEPTH) return NULL; /* the Python path rejects the span */
    r.p = member.data;
    r.end = member.data + member.len;
    if (member.number == 6) { /* KeyValueList */
        PyObject *dict = PyDict_New();
        if (dict == NULL) return NULL;
        while ((got = next_field(&r, &f)) > 0) {
            if (f.number != 1 || f.type != WT_LEN ||
                put_pair(dict, f.data, f.len, depth + 1, level + 2) < 0)
                break;
        }
        if (got != 0) Py_CLEAR(dict);
        return dict;
    }
    Py_ssize_t count = 0; /* ArrayValue: count the items, then decode them */
    while ((got = next_field(&r, &f)) > 0) {
        if (f.number != 1 || f.type != WT_LEN) return NULL;
        count++;
    }
    if (got < 0) return NULL;
    PyObject *items = PyTuple_New(count);
    if (items == NULL) return NULL;
    r.p = member.data;
    for (Py_ssize_t i = 0; i < count; i++) {
        next_field(&r, &f);
        PyObject *item = any_value(f.data, f.len, depth + 1, level + 2);
        if (item == NULL) {
            Py_DECREF(items);
            return NULL;
        }
        PyTuple_SET_ITEM(items, i, item);
    }
    return items;
}

/* Add one KeyValue to dict (left out when its key is empty, as the Python path does). */
static int put_pair(PyObject *dict, const uint8_t *data, Py_ssize_t len, int depth, int level) {
    reader_t r = {data, data + len};
    field_t f, key = {0}, value = {0};
    int got, has_key = 0, has_value = 0;
    if (level > MAX_MESSAGE_DEPTH) return -1;
    while ((got = next_field(&r, &f)) > 0) {
        if (f.type != WT_LEN) return -1;
        if (f.number == 1 && !has_key) {
            key = f;
            has_key = 1;
        } else if (f.number == 2 && !has_value) {
            value = f;
            has_value = 1;
        } else {
            return -1;
        }
    }
    if (got < 0) return -1;
    PyObject *decoded = NULL;
    if (has_value) {
        decoded = any_value(value.data, value.len, depth, level + 1);
        if (decoded == NULL) return -1;
    }
    if (key.len == 0) { /* OTLP requires a key; the SDK drops such a pair too */
        Py_XDECREF(decoded);
        return 0;
    }
    PyObject *name = short_text(key.data, key.len);
    int failed = name == NULL || PyDict_SetItem(dict, name, decoded ? decoded : Py_None) < 0;
    Py_XDECREF(name);
    Py_XDECREF(decoded);
    return failed ? -1 : 0;
}

/* --- spans ------------------------------------------------------------------------------ */
#define SEEN(bit)                  \
    do {                           \
        if (seen & (1u << (bit))) \
            goto fail;             \
        seen |= 1u << (bit);       \
    } while (0)

/* Read an Event (name_at 2, after its time) or an InstrumentationScope (name_at 1, before its
 * version, which is checked): the name into *name, the attributes (field 3) into attributes. */
static int named(const uint8_t *data, Py_ssize_t len, uint32_t name_at, field_t *name,
                 PyObject *attributes, int level) {
    reader_t r = {data, data + len};
    field_t f;
    unsigned seen = 0;
    int got;
    while ((got = next_field(&r, &f)) > 0) {
        if (f.number == name_at && f.type == WT_LEN) {
            SEEN(name_at);
            *name = f;
        } else if (f.number == 1 && name_at == 2 && f.type == WT_I64) {
            SEEN(1);
        } else if (f.number == 2 && name_at == 1 && f.type == WT_LEN) {
            SEEN(2);
            if (check_text(f.data, f.len) < 0) goto fail;
        } else if (f.number == 3 && f.type == WT_LEN) {
            if (put_pair(attributes, f.data, f.len, 0, level + 1) < 0) goto fail;
        } else if (f.number == 4 && f.type == WT_VARINT) {
            SEEN(4);
        } else {
            goto fail;
        }
    }
    return got;
fail:
    return -1;
}

/* (name, attributes) of a Span.Event. */
static PyObject *event(const uint8_t *data, Py_ssize_t len, int level) {
    field_t name = {0};
    PyObject *attributes = PyDict_New(), *pair = NULL, *text_name = NULL;
    if (attributes == NULL || named(data, len, 2, &name, attributes, level) < 0 ||
        (text_name = text(name.data, name.len)) == NULL || (pair = PyTuple_New(2)) == NULL) {
        Py_XDECREF(attributes);
        Py_XDECREF(text_name);
        return NULL;
    }
    PyTuple_SET_ITEM(pair, 0, text_name);
    PyTuple_SET_ITEM(pair, 1, attributes);
    return pair;
}

/* 0 when a Span.Link is one the Python path accepts (its ids, trace state, attributes). */
static int check_link(const uint8_t *data, Py_ssize_t len, int level) {
    reader_t r = {data, data + len};
    field_t f;
    unsigned seen = 0;
    int got;
    PyObject *attributes = PyDict_New();
    if (attributes == NULL) return -1;
    while ((got = next_field(&r, &f)) > 0) {
        if (f.number == 1 && f.type == WT_LEN && f.len == 16) {
            SEEN(1);
        } else if (f.number == 2 && f.type == WT_LEN && f.len == 8) {
            SEEN(2);
        } else if (f.number == 3 && f.type == WT_LEN) {
            SEEN(3);
            if (check_text(f.data, f.len) < 0) goto fail;
        } else if (f.number == 4 && f.type == WT_LEN) {
            if (put_pair(attributes, f.data, f.len, 0, level + 1) < 0) goto fail;
        } else if ((f.number == 5 && f.type == WT_VARINT) || (f.number == 6 && f.type == WT_I32)) {
            SEEN(f.number);
        } else {
            goto fail;
        }
    }
    if (got < 0 || (seen & 6) != 6) goto fail; /* both ids are required */
    Py_DECREF(attributes);
    return 0;
fail:
    Py_DECREF(attributes);
    return -1;
}

/* The status code and message of a Status. */
static int status(const uint8_t *data, Py_ssize_t len, long *code, field_t *message) {
    reader_t r = {data, data + len};
    field_t f;
    unsigned seen = 0;
    int got;
    while ((got = next_field(&r, &f)) > 0) {
        if (f.number == 2 && f.type == WT_LEN) {
            SEEN(2);
            *message = f;
        } else if (f.number == 3 && f.type == WT_VARINT && (int64_t)f.num >= INT32_MIN &&
                   (int64_t)f.num <= INT32_MAX) {
            SEEN(3);
            *code = (long)(int64_t)f.num;
        } else {
            goto fail;
        }
    }
    return got;
fail:
    return -1;
}

static int span(ctx_t *ctx, const uint8_t *data, Py_ssize_t len, PyObject *resource,
                PyObject *scope, int level) {
    static const uint8_t zero_id[8] = {0};
    reader_t r = {data, data + len};
    field_t f, trace_id = {0}, span_id = {0}, parent = {0}, name = {0}, message = {0};
    uint64_t start = 0, end = 0, flags = 0;
    long code = 0;
    unsigned seen = 0;
    int got;
    PyObject *args[FIELDS] = {NULL};
    PyObject *attributes = PyDict_New(), *events = NULL, *record = NULL; /* events: when any */
    if (attributes == NULL) goto fail;
    while ((got = next_field(&r, &f)) > 0) {
        switch (f.number) {
        case 1: case 2: case 3: case 4: case 5: case 15:
            if (f.type != WT_LEN) goto fail;
            SEEN(f.number);
            if (f.number == 1) trace_id = f;
            else if (f.number == 2) span_id = f;
            else if (f.number == 3) { if (check_text(f.data, f.len) < 0) goto fail; }
            else if (f.number == 4) parent = f;
            else if (f.number == 5) name = f;
            else if (status(f.data, f.len, &code, &message) < 0) goto fail;
            break;
        case 6: case 10: case 12: case 14:
            if (f.type != WT_VARINT) goto fail;
            SEEN(f.number);
            break;
        case 7: case 8:
            if (f.type != WT_I64) goto fail;
            SEEN(f.number);
            if (f.number == 7) start = f.num;
            else end = f.num;
            break;
        case 16:
            if (f.type != WT_I32) goto fail;
            SEEN(f.number);
            flags = f.num;
            break;
        case 9:
            if (f.type != WT_LEN || put_pair(attributes, f.data, f.len, 0, level + 1) < 0)
                goto fail;
            break;
        case 11: {
            if (f.type != WT_LEN) goto fail;
            PyObject *one = event(f.data, f.len, level + 1);
            if (one == NULL) goto fail;
            if (events == NULL && (events = PyList_New(0)) == NULL) {
                Py_DECREF(one);
                goto fail;
            }
            int failed = PyList_Append(events, one);
            Py_DECREF(one);
            if (failed) goto fail;
            break;
        }
        case 13:
            if (f.type != WT_LEN || check_link(f.data, f.len, level + 1) < 0) goto fail;
            break;
        default:
            goto fail;
        }
    }
    if (got < 0 || trace_id.len != 16 || span_id.len != 8 || (parent.len && parent.len != 8))
        goto fail;
    args[0] = hex(trace_id.data, 16);
    args[1] = hex(span_id.data, 8);
    if (parent.len && memcmp(parent.data, zero_id, 8) != 0) {
        args[2] = hex(parent.data, 8);
    } else {
        args[2] = Py_None;
        Py_INCREF(Py_None);
    }
    args[3] = short_text(name.data, name.len);
    args[4] = PyLong_FromUnsignedLongLong(start);
    args[5] = PyLong_FromUnsignedLongLong(end);
    args[6] = attributes;
    attributes = NULL;
    args[7] = PyLong_FromLong(code);
    args[8] = text(message.data, message.len);
    args[9] = scope;
    Py_INCREF(scope);
    args[10] = resource;
    Py_INCREF(resource);
    args[11] = events != NULL ? PyList_AsTuple(events) : PyTuple_New(0); /* () is shared */
    Py_CLEAR(events);
    /* a root has no parent to be remote, whatever its flags say (as the SDK span it becomes) */
    args[12] = Py_NewRef(args[2] != Py_None && (flags & REMOTE_PARENT) == REMOTE_PARENT
                         ? Py_True : Py_False);
    for (int i = 0; i < FIELDS; i++)
        if (args[i] == NULL) goto fail;
    record = new_record(ctx->record, args); /* takes the values */
    if (record == NULL) return -1;
    got = PyList_Append(ctx->out, record);
    Py_DECREF(record);
    return got;
fail:
    for (int i = 0; i < FIELDS; i++) Py_XDECREF(args[i]);
    Py_XDECREF(attributes);
    Py_XDECREF(events);
    return -1;
}

/* --- scopes and resources ----------------------------------------------------------------- */
/* The scope's name; its version and attributes are checked as the Python path checks them. */
static PyObject *scope_name(const uint8_t *data, Py_ssize_t len, int level) {
    field_t name = {0};
    PyObject *attributes = PyDict_New(); /* forwarded, not kept: checked only */
    if (attributes == NULL) return NULL;
    int got = named(data, len, 1, &name, attributes, level);
    Py_DECREF(attributes);
    return got < 0 ? NULL : text(name.data, name.len);
}

/* A message holding one singular message field (1), repeated messages (2) and a schema URL
 * (3): ResourceSpans and ScopeSpans. Finds the singular one (it may come last) and checks the
 * URL. */
static int outer(const uint8_t *data, Py_ssize_t len, field_t *single) {
    reader_t r = {data, data + len};
    field_t f;
    unsigned seen = 0;
    int got;
    while ((got = next_field(&r, &f)) > 0) {
        if (f.type != WT_LEN || f.number < 1 || f.number > 3) goto fail;
        if (f.number == 1) {
            SEEN(1);
            *single = f;
        } else if (f.number == 3) {
            SEEN(3);
            if (check_text(f.data, f.len) < 0) goto fail;
        }
    }
    return got;
fail:
    return -1;
}

static int scope_spans(ctx_t *ctx, const uint8_t *data, Py_ssize_t len, PyObject *resource,
                       int level) {
    reader_t r = {data, data + len};
    field_t f, scope = {0};
    int got;
    if (outer(data, len, &scope) < 0) return -1;
    PyObject *name = scope_name(scope.data, scope.len, level + 1);
    if (name == NULL) return -1;
    while ((got = next_field(&r, &f)) > 0) {
        if (f.number == 2 && span(ctx, f.data, f.len, resource, name, level + 1) < 0) {
            got = -1;
            break;
        }
    }
    Py_DECREF(name);
    return got;
}

static int resource_spans(ctx_t *ctx, const uint8_t *data, Py_ssize_t len) {
    reader_t r = {data, data + len};
    field_t f, resource = {0};
    unsigned seen = 0;
    int got;
    if (outer(data, len, &resource) < 0) return -1;
    PyObject *attributes = PyDict_New(); /* shared by the spans of this ResourceSpans */
    if (attributes == NULL) return -1;
    reader_t fields = {resource.data, resource.data + resource.len};
    while ((got = next_field(&fields, &f)) > 0) {
        if (f.number == 1 && f.type == WT_LEN) {
            if (put_pair(attributes, f.data, f.len, 0, 3) < 0) goto fail;
        } else if (f.number == 2 && f.type == WT_VARINT) {
            SEEN(2);
        } else {
            goto fail; /* entity_refs included: left to the Python path */
        }
    }
    if (got < 0) goto fail;
    while ((got = next_field(&r, &f)) > 0)
        if (f.number == 2 && scope_spans(ctx, f.data, f.len, attributes, 2) < 0) goto fail;
    if (got < 0) goto fail;
    Py_DECREF(attributes);
    return 0;
fail:
    Py_DECREF(attributes);
    return -1;
}

static PyObject *decode_spans(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer body;
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "decode_spans(body, record_type) takes 2 arguments");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &body, PyBUF_SIMPLE) < 0) return NULL;
    ctx_t ctx = {args[1], PyList_New(0)};
    reader_t r = {(const uint8_t *)body.buf, (const uint8_t *)body.buf + body.len};
    field_t f;
    int got = ctx.out == NULL ? -1 : 0;
    while (got == 0 && (got = next_field(&r, &f)) > 0)
        got = f.number == 1 && f.type == WT_LEN ? resource_spans(&ctx, f.data, f.len) : -1;
    PyBuffer_Release(&body);
    if (got < 0) {
        PyErr_Clear();
        Py_XDECREF(ctx.out);
        Py_RETURN_NONE;
    }
    return ctx.out;
}

/* --- sizes ---------------------------------------------------------------------------------
 * span_sizes(records) gives otel_loopguard.receiver._size.span_bytes(record) of each record
 * (the Python function stays the definition: tests/test_wire.py compares them), or None when a
 * record holds anything but the plain values the decoders build (exact dicts, tuples, lists,
 * str, bytes, int, float, bool, None), for the Python function to count. serve asks it of
 * every span it buffers; walking the values in C costs a tenth of the Python walk. */
#define SPAN_COST 160 /* _size._SPAN_COST */
#define VALUE_COST 16 /* _size._VALUE_COST */
#define MAX_SIZE_DEPTH 64 /* _size._MAX_DEPTH */

static Py_ssize_t text_size(PyObject *s) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(s);
    return PyUnicode_IS_ASCII(s) ? len : 4 * len;
}

static Py_ssize_t mapping_size(PyObject *dict, int depth);

/* _size._value; -1 for a value it leaves to Python. */
static Py_ssize_t value_size(PyObject *value, int depth) {
    if (value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value) ||
        PyFloat_CheckExact(value))
        return VALUE_COST;
    if (PyUnicode_CheckExact(value)) return text_size(value);
    if (PyBytes_CheckExact(value)) return PyBytes_GET_SIZE(value);
    int dict = PyDict_CheckExact(value), tuple = PyTuple_CheckExact(value);
    if (!dict && !tuple && !PyList_CheckExact(value)) return -1;
    if (depth >= MAX_SIZE_DEPTH) return VALUE_COST;
    if (dict) {
        Py_ssize_t inner = mapping_size(value, depth + 1);
        return inner < 0 ? -1 : VALUE_COST + inner;
    }
    Py_ssize_t size = VALUE_COST, count = tuple ? PyTuple_GET_SIZE(value) : PyList_GET_SIZE(value);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = tuple ? PyTuple_GET_ITEM(value, i) : PyList_GET_ITEM(value, i);
        Py_ssize_t one = value_size(item, depth + 1);
        if (one < 0) return -1;
        size += VALUE_COST + one;
    }
    return size;
}

/* _size._mapping of an exact dict with str keys; -1 for anything else. */
static Py_ssize_t mapping_size(PyObject *dict, int depth) {
    Py_ssize_t pos = 0, size = VALUE_COST * PyDict_GET_SIZE(dict);
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) return -1;
        size += text_size(key);
        Py_ssize_t one = PyUnicode_CheckExact(value) ? text_size(value) : value_size(value, depth);
        if (one < 0) return -1;
        size += one;
    }
    return size;
}

static PyObject *s_name, *s_attributes, *s_status_message, *s_events;

/* span_bytes(record) without a payload; -1 when left to Python (no exception set). */
static Py_ssize_t record_size(PyObject *record) {
    Py_ssize_t size = -1;
    PyObject *name = PyObject_GetAttr(record, s_name);
    PyObject *attributes = PyObject_GetAttr(record, s_attributes);
    PyObject *message = PyObject_GetAttr(record, s_status_message);
    PyObject *events = PyObject_GetAttr(record, s_events);
    if (name == NULL || attributes == NULL || message == NULL || events == NULL ||
        !PyUnicode_CheckExact(name) || !PyDict_CheckExact(attributes) ||
        !PyUnicode_CheckExact(message) || !PyTuple_CheckExact(events))
        goto done;
    Py_ssize_t inner = mapping_size(attributes, 0);
    if (inner < 0) goto done;
    Py_ssize_t total = SPAN_COST + text_size(name) + inner + text_size(message);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(events); i++) {
        PyObject *event = PyTuple_GET_ITEM(events, i);
        if (!PyTuple_CheckExact(event) || PyTuple_GET_SIZE(event) != 2 ||
            !PyUnicode_CheckExact(PyTuple_GET_ITEM(event, 0)) ||
            !PyDict_CheckExact(PyTuple_GET_ITEM(event, 1)))
            goto done;
        inner = mapping_size(PyTuple_GET_ITEM(event, 1), 0);
        if (inner < 0) goto done;
        total += VALUE_COST + text_size(PyTuple_GET_ITEM(event, 0)) + inner;
    }
    size = total;
done:
    PyErr_Clear();
    Py_XDECREF(name);
    Py_XDECREF(attributes);
    Py_XDECREF(message);
    Py_XDECREF(events);
    return size;
}

static PyObject *span_sizes(PyObject *module, PyObject *records) {
    (void)module;
    if (!PyList_CheckExact(records)) Py_RETURN_NONE;
    Py_ssize_t count = PyList_GET_SIZE(records);
    PyObject *out = PyList_New(count);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t size = record_size(PyList_GET_ITEM(records, i));
        PyObject *number = size < 0 ? NULL : PyLong_FromSsize_t(size);
        if (number == NULL) {
            PyErr_Clear();
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        PyList_SET_ITEM(out, i, number);
    }
    return out;
}

/* --- OTLP/JSON spans -------------------------------------------------------------------------
 * json_spans(spans, resource, scope, SpanRecord) reads the spans of one scope of an OTLP/JSON
 * request as orjson or json parsed them (a list of dicts) and returns (records, holes): the
 * list of the record otlp._json._span builds for each span, with None where it leaves a span to
 * that function (holes: how many), or None for the whole list when it is not a list. _span stays
 * the definition (tests/test_wire_json.py compares them over every corpus): this handles what
 * exporters write (lowerCamelCase keys, ids in hex, times as decimal strings, string, boolean,
 * integer, double and string-array attribute values, events, no links) and answers None for a
 * span with anything else, an error in it included, so that _span decides and words it. */
static PyObject *k_trace_id, *k_span_id, *k_parent_span_id, *k_parent_span_id_snake, *k_name,
    *k_start, *k_end, *k_attributes, *k_status, *k_code, *k_message, *k_events, *k_kind,
    *k_trace_state, *k_trace_state_snake, *k_flags, *k_links, *k_key, *k_value, *k_string_value,
    *k_bool_value, *k_int_value, *k_double_value, *k_array_value, *k_values, *k_status_names[3],
    *k_kind_names, *k_time, *k_time_snake, *k_empty;

static PyObject *last_trace_in, *last_trace_out; /* the latest trace id read, and its text */

/* The field `key` of an exact dict (borrowed), or NULL when absent (no exception kept). */
static PyObject *field(PyObject *obj, PyObject *key) {
    PyObject *value = PyDict_GetItemWithError(obj, key);
    if (value == NULL) PyErr_Clear();
    return value;
}

static int is_hex(Py_UCS1 c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* An id of `size` bytes given as hex, in lower case (a new reference); NULL to leave it. */
static PyObject *hex_id(PyObject *value, Py_ssize_t size) {
    if (!PyUnicode_CheckExact(value) || !PyUnicode_IS_ASCII(value) ||
        PyUnicode_GET_LENGTH(value) != 2 * size)
        return NULL;
    const Py_UCS1 *text = PyUnicode_1BYTE_DATA(value);
    int lower = 1;
    for (Py_ssize_t i = 0; i < 2 * size; i++) {
        if (!is_hex(text[i])) return NULL;
        if (text[i] >= 'A' && text[i] <= 'F') lower = 0;
    }
    if (lower) return Py_NewRef(value);
    PyObject *out = PyUnicode_New(2 * size, 127);
    if (out == NULL) return NULL;
    Py_UCS1 *to = PyUnicode_1BYTE_DATA(out);
    for (Py_ssize_t i = 0; i < 2 * size; i++)
        to[i] = text[i] >= 'A' && text[i] <= 'F' ? (Py_UCS1)(text[i] + 32) : text[i];
    return out;
}

/* The trace id: the spans of a request share theirs, each its own copy of the text. */
static PyObject *trace_id(PyObject *value) {
    if (last_trace_in != NULL && PyUnicode_CheckExact(value) &&
        PyUnicode_GET_LENGTH(value) == 32 && PyUnicode_IS_ASCII(value) &&
        memcmp(PyUnicode_1BYTE_DATA(value), PyUnicode_1BYTE_DATA(last_trace_in), 32) == 0)
        return Py_NewRef(last_trace_out);
    PyObject *out = hex_id(value, 16);
    if (out != NULL) {
        Py_INCREF(value);
        Py_XSETREF(last_trace_in, value);
        Py_INCREF(out);
        Py_XSETREF(last_trace_out, out);
    }
    return out;
}

/* A time in nanoseconds written as 1 to 19 ASCII digits (a new reference); NULL to leave it. */
static PyObject *decimal_time(PyObject *value) {
    if (value == NULL || !PyUnicode_CheckExact(value) || !PyUnicode_IS_ASCII(value)) return NULL;
    Py_ssize_t len = PyUnicode_GET_LENGTH(value);
    if (len < 1 || len > 19) return NULL;
    const Py_UCS1 *text = PyUnicode_1BYTE_DATA(value);
    unsigned long long number = 0;
    for (Py_ssize_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9') return NULL;
        number = number * 10 + (unsigned long long)(text[i] - '0');
    }
    return PyLong_FromUnsignedLongLong(number);
}

/* An int that fits in `lo`..`hi` (not a bool). */
static int int_in(PyObject *value, long long lo, long long hi) {
    if (!PyLong_CheckExact(value)) return 0;
    int overflow;
    long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (number == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return !overflow && number >= lo && number <= hi;
}

/* intValue as _int_value reads it: an int64, or its decimal text. */
static PyObject *int_value(PyObject *raw) {
    if (PyLong_CheckExact(raw)) return int_in(raw, INT64_MIN, INT64_MAX) ? Py_NewRef(raw) : NULL;
    if (!PyUnicode_CheckExact(raw) || !PyUnicode_IS_ASCII(raw)) return NULL;
    Py_ssize_t len = PyUnicode_GET_LENGTH(raw);
    const Py_UCS1 *text = PyUnicode_1BYTE_DATA(raw);
    if (len < 1 || len > 20) return NULL;
    for (Py_ssize_t i = text[0] == '-' ? 1 : 0; i < len; i++)
        if (text[i] < '0' || text[i] > '9') return NULL;
    if (len == 1 && text[0] == '-') return NULL;
    PyObject *number = PyLong_FromString((const char *)text, NULL, 10);
    if (number == NULL || !int_in(number, INT64_MIN, INT64_MAX)) {
        PyErr_Clear();
        Py_XDECREF(number);
        return NULL;
    }
    return number;
}

/* An AnyValue with one member as _Values.value decodes it (string arrays as _strings);
 * NULL to leave it. */
static PyObject *one_value(PyObject *raw) {
    Py_ssize_t pos = 0;
    PyObject *member, *inner;
    if (!PyDict_Next(raw, &pos, &member, &inner)) return NULL;
    if (member == k_bool_value || PyUnicode_Compare(member, k_bool_value) == 0)
        return PyBool_Check(inner) ? Py_NewRef(inner) : NULL;
    if (member == k_int_value || PyUnicode_Compare(member, k_int_value) == 0)
        return int_value(inner);
    if (member == k_double_value || PyUnicode_Compare(member, k_double_value) == 0) {
        if (PyFloat_CheckExact(inner))
            return isfinite(PyFloat_AS_DOUBLE(inner)) ? Py_NewRef(inner) : NULL;
        if (!PyLong_CheckExact(inner)) return NULL;
        double number = PyLong_AsDouble(inner);
        if (number == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return NULL;
        }
        return PyFloat_FromDouble(number);
    }
    if (member != k_array_value && PyUnicode_Compare(member, k_array_value) != 0) return NULL;
    PyObject *values = PyDict_CheckExact(inner) ? field(inner, k_values) : NULL;
    if (values == NULL || !PyList_CheckExact(values)) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(values);
    PyObject *out = PyTuple_New(count);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(values, i);
        PyObject *text = PyDict_CheckExact(item) && PyDict_GET_SIZE(item) == 1
                             ? field(item, k_string_value) : NULL;
        if (text == NULL || !PyUnicode_CheckExact(text)) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, Py_NewRef(text));
    }
    return out;
}

/* A KeyValue list as json_attributes decodes it (a new dict); NULL to leave it. */
static PyObject *attributes(PyObject *pairs) {
    PyObject *out = PyDict_New();
    if (out == NULL || pairs == NULL || pairs == Py_None) return out;
    if (!PyList_CheckExact(pairs)) goto leave;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pairs); i++) {
        PyObject *item = PyList_GET_ITEM(pairs, i);
        if (!PyDict_CheckExact(item)) goto leave;
        PyObject *key = field(item, k_key), *raw = field(item, k_value), *value;
        if (key == NULL || raw == NULL || !PyUnicode_CheckExact(key) ||
            PyUnicode_GET_LENGTH(key) == 0 || !PyDict_CheckExact(raw))
            goto leave;
        PyObject *text = field(raw, k_string_value);
        if (text != NULL && PyUnicode_CheckExact(text)) {
            value = Py_NewRef(text);
        } else if (PyDict_GET_SIZE(raw) == 1) {
            if ((value = one_value(raw)) == NULL) goto leave;
        } else {
            goto leave;
        }
        int failed = PyDict_SetItem(out, key, value);
        Py_DECREF(value);
        if (failed) goto leave;
    }
    return out;
leave:
    Py_DECREF(out);
    return NULL;
}

/* The events as _span's _events reads them: a tuple of (name, attributes); NULL to leave
 * them. Their times are only validated. */
static PyObject *json_events(PyObject *events) {
    if (events == NULL || events == Py_None) return PyTuple_New(0);
    if (!PyList_CheckExact(events)) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(events);
    PyObject *out = PyTuple_New(count);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *event = PyList_GET_ITEM(events, i), *time, *name, *pair = NULL;
        if (!PyDict_CheckExact(event)) goto leave;
        time = field(event, k_time);
        if (time == NULL || time == Py_None) {
            if ((time = field(event, k_time_snake)) != NULL && time != Py_None) goto leave;
        } else if (!int_in(time, 0, INT64_MAX)) {
            PyObject *number = decimal_time(time);
            if (number == NULL) goto leave;
            Py_DECREF(number);
        }
        name = field(event, k_name);
        if (name == Py_None) name = NULL;
        if (name != NULL && !PyUnicode_CheckExact(name)) goto leave;
        PyObject *attrs = attributes(field(event, k_attributes));
        if (attrs == NULL) goto leave;
        pair = PyTuple_Pack(2, name != NULL ? name : k_empty, attrs);
        Py_DECREF(attrs);
        if (pair == NULL) goto leave;
        PyTuple_SET_ITEM(out, i, pair);
    }
    return out;
leave:
    Py_DECREF(out);
    return NULL;
}

/* One span's record (a new reference), or NULL to leave the span to _span. */
static PyObject *json_span(PyObject *obj, PyObject *resource, PyObject *scope, PyObject *type) {
    if (!PyDict_CheckExact(obj)) return NULL;
    PyObject *v;
    long code = 0;
    PyObject *message = NULL;
    /* what _span only validates: kind, traceState, flags, links (none) */
    if ((v = field(obj, k_kind)) != NULL && v != Py_None &&
        !int_in(v, INT32_MIN, INT32_MAX) &&
        !(PyUnicode_CheckExact(v) && PyDict_Contains(k_kind_names, v) == 1))
        return NULL;
    if ((v = field(obj, k_trace_state)) != NULL && v != Py_None) {
        if (!PyUnicode_CheckExact(v)) return NULL;
    } else if (field(obj, k_trace_state_snake) != NULL) {
        return NULL;
    }
    int remote = 0; /* as _span reads it: an int with both bits set (an absent flags is 0) */
    if ((v = field(obj, k_flags)) != NULL && v != Py_None) {
        if (!int_in(v, 0, UINT32_MAX)) return NULL;
        remote = (PyLong_AsUnsignedLong(v) & REMOTE_PARENT) == REMOTE_PARENT;
    }
    if ((v = field(obj, k_links)) != NULL && v != Py_None &&
        !(PyList_CheckExact(v) && PyList_GET_SIZE(v) == 0))
        return NULL;
    PyObject *status = field(obj, k_status);
    if (status != NULL && status != Py_None) {
        if (!PyDict_CheckExact(status)) return NULL;
        PyObject *c = field(status, k_code);
        if (c != NULL && c != Py_None) {
            if (int_in(c, INT32_MIN, INT32_MAX)) {
                code = PyLong_AsLong(c);
            } else {
                int i = 0;
                while (i < 3 && !(PyUnicode_CheckExact(c) &&
                                  PyUnicode_Compare(c, k_status_names[i]) == 0))
                    i++;
                if (i == 3) return NULL;
                code = i;
            }
        }
        message = field(status, k_message);
        if (message == Py_None) message = NULL;
        if (message != NULL && !PyUnicode_CheckExact(message)) return NULL;
    }
    PyObject *name = field(obj, k_name);
    if (name == NULL || !PyUnicode_CheckExact(name)) return NULL;
    PyObject *parent = field(obj, k_parent_span_id);
    if (parent == NULL || parent == Py_None) {
        PyObject *snake = field(obj, k_parent_span_id_snake);
        if (snake != NULL && snake != Py_None && PyObject_IsTrue(snake) != 0) return NULL;
        parent = NULL;
    } else if (!PyUnicode_CheckExact(parent)) {
        return NULL;
    } else if (PyUnicode_GET_LENGTH(parent) == 0) {
        parent = NULL;
    }
    PyObject *args[FIELDS] = {NULL};
    PyObject *t = field(obj, k_trace_id), *s = field(obj, k_span_id);
    if (t == NULL || s == NULL || (args[0] = trace_id(t)) == NULL ||
        (args[1] = hex_id(s, 8)) == NULL)
        goto leave;
    if (parent != NULL) {
        if ((args[2] = hex_id(parent, 8)) == NULL) goto leave;
        if (PyUnicode_CompareWithASCIIString(args[2], "0000000000000000") == 0)
            Py_SETREF(args[2], Py_NewRef(Py_None));
    } else {
        args[2] = Py_NewRef(Py_None);
    }
    args[3] = Py_NewRef(name);
    if ((args[4] = decimal_time(field(obj, k_start))) == NULL ||
        (args[5] = decimal_time(field(obj, k_end))) == NULL ||
        (args[6] = attributes(field(obj, k_attributes))) == NULL ||
        (args[7] = PyLong_FromLong(code)) == NULL)
        goto leave;
    args[8] = message != NULL ? Py_NewRef(message) : PyUnicode_New(0, 0);
    args[9] = Py_NewRef(scope);
    args[10] = Py_NewRef(resource);
    args[11] = json_events(field(obj, k_events));
    args[12] = Py_NewRef(remote && args[2] != Py_None ? Py_True : Py_False);
    if (args[8] == NULL || args[11] == NULL) goto leave;
    return new_record(type, args);
leave:
    for (int i = 0; i < FIELDS; i++) Py_XDECREF(args[i]);
    return NULL;
}

static PyObject *json_spans(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "json_spans(spans, resource, scope, record_type) takes 4 arguments");
        return NULL;
    }
    PyObject *spans = args[0];
    if (!PyList_CheckExact(spans)) Py_RETURN_NONE;
    Py_ssize_t count = PyList_GET_SIZE(spans), holes = 0;
    PyObject *out = PyList_New(count);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        /* the list cannot change meanwhile: only a record class with an __init__ of its own
         * runs Python code, and the spans are read from it before that */
        PyObject *record = i < PyList_GET_SIZE(spans)
                               ? json_span(PyList_GET_ITEM(spans, i), args[1], args[2], args[3])
                               : NULL;
        if (record == NULL) {
            PyErr_Clear();
            record = Py_NewRef(Py_None);
            holes++;
        }
        PyList_SET_ITEM(out, i, record);
    }
    return Py_BuildValue("(Nn)", out, holes);
}

static PyMethodDef methods[] = {
    {"decode_spans", (PyCFunction)(void (*)(void))decode_spans, METH_FASTCALL,
     "decode_spans(body, record_type) -> list | None: the records of a serialized OTLP "
     "ExportTraceServiceRequest, or None to leave it to the Python path."},
    {"span_sizes", span_sizes, METH_O,
     "span_sizes(records) -> list | None: span_bytes of each record, or None to leave them "
     "to the Python function."},
    {"json_spans", (PyCFunction)(void (*)(void))json_spans, METH_FASTCALL,
     "json_spans(spans, resource, scope, record_type) -> (list, int) | None: the records of "
     "one scope's OTLP/JSON spans, None for each span left to the Python path, and how many "
     "were left."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_wire", "Optional decoder of OTLP protobuf trace requests and OTLP/JSON span records.", -1,
    methods};

PyMODINIT_FUNC PyInit__wire(void) {
    if ((s_name = PyUnicode_InternFromString("name")) == NULL ||
        (s_attributes = PyUnicode_InternFromString("attributes")) == NULL ||
        (s_status_message = PyUnicode_InternFromString("status_message")) == NULL ||
        (s_events = PyUnicode_InternFromString("events")) == NULL)
        return NULL;
    static const struct { PyObject **to; const char *text; } keys[] = {
        {&k_trace_id, "traceId"}, {&k_span_id, "spanId"}, {&k_parent_span_id, "parentSpanId"},
        {&k_parent_span_id_snake, "parent_span_id"}, {&k_name, "name"},
        {&k_start, "startTimeUnixNano"}, {&k_end, "endTimeUnixNano"},
        {&k_attributes, "attributes"}, {&k_status, "status"}, {&k_code, "code"},
        {&k_message, "message"}, {&k_events, "events"}, {&k_kind, "kind"},
        {&k_trace_state, "traceState"}, {&k_trace_state_snake, "trace_state"},
        {&k_flags, "flags"}, {&k_links, "links"}, {&k_key, "key"}, {&k_value, "value"},
        {&k_string_value, "stringValue"}, {&k_bool_value, "boolValue"},
        {&k_int_value, "intValue"}, {&k_double_value, "doubleValue"},
        {&k_array_value, "arrayValue"}, {&k_values, "values"},
        {&k_status_names[0], "STATUS_CODE_UNSET"}, {&k_status_names[1], "STATUS_CODE_OK"},
        {&k_status_names[2], "STATUS_CODE_ERROR"}, {&k_time, "timeUnixNano"},
        {&k_time_snake, "time_unix_nano"}, {&k_empty, ""}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if ((*keys[i].to = PyUnicode_InternFromString(keys[i].text)) == NULL) return NULL;
    static const char *const kinds[] = {
        "SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT",
        "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"};
    if ((k_kind_names = PyDict_New()) == NULL) return NULL;
    for (int i = 0; i < 6; i++) {
        PyObject *number = PyLong_FromLong(i);
        if (number == NULL || PyDict_SetItemString(k_kind_names, kinds[i], number) < 0)
            return NULL;
        Py_DECREF(number);
    }
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (PyModule_AddIntConstant(m, "MAX_VALUE_DEPTH", MAX_VALUE_DEPTH) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
