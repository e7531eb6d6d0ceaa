/* The canonical form of a plain-text tool result, in one pass over its characters.
 *
 * Optional accelerator of otel_loopguard.signature._text.canonical_text, which is the
 * definition; this file computes the same string for ASCII text, and returns None for any other
 * text (the caller then takes the Python path). tests/test_textscan.py checks that the two agree
 * on random texts and on every text result of the development corpus.
 *
 * The form: the tokens that change between identical runs (date-times, times of day, durations,
 * memory addresses, UUIDs, hex or decimal ids of 12+ characters; the pattern
 * _VOLATILE_ASCII_RE in _volatile.py) each become '#', unless the text is a single word; then
 * runs of whitespace become one space and the ends are trimmed, as " ".join(text.split()) does.
 *
 * Python's re engine pays about 30 ns per character to find where such a token may start; the
 * scan below pays a table lookup, which is what makes a 1 KB text cost a microsecond instead of
 * fifty. Each alternative of the pattern is matched by hand with the pattern's backtracking
 * order, and \b is tested on the original text, as re.sub does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define C_DIGIT 1
#define C_HEX 2   /* 0-9 a-f A-F */
#define C_WORD 4  /* A-Z a-z 0-9 _ (re.ASCII \w) */
#define C_SPACE 8 /* what str.split() splits ASCII text on */

static unsigned char cls[256];

static void init_classes(void) {
    for (int c = '0'; c <= '9'; c++) cls[c] |= C_DIGIT | C_HEX | C_WORD;
    for (int c = 'a'; c <= 'z'; c++) cls[c] |= C_WORD;
    for (int c = 'A'; c <= 'Z'; c++) cls[c] |= C_WORD;
    for (int c = 'a'; c <= 'f'; c++) cls[c] |= C_HEX;
    for (int c = 'A'; c <= 'F'; c++) cls[c] |= C_HEX;
    cls['_'] |= C_WORD;
    const char *space = " \t\n\r\f\v\x1c\x1d\x1e\x1f";
    for (const char *p = space; *p; p++) cls[(unsigned char)*p] |= C_SPACE;
}

typedef struct {
    const unsigned char *s;
    Py_ssize_t n;
} text_t;

static inline int is(const text_t *t, Py_ssize_t i, int mask) {
    return i >= 0 && i < t->n && (cls[t->s[i]] & mask);
}

/* \b at i for a word character at i: the character before is not a word character. */
static inline int starts_word(const text_t *t, Py_ssize_t i) { return !is(t, i - 1, C_WORD); }

/* \b at i after a word character at i - 1: the character at i is not a word character. */
static inline int ends_word(const text_t *t, Py_ssize_t i) { return !is(t, i, C_WORD); }

static inline int digits(const text_t *t, Py_ssize_t i, int count) {
    for (int k = 0; k < count; k++)
        if (!is(t, i + k, C_DIGIT)) return 0;
    return 1;
}

static inline Py_ssize_t run_of(const text_t *t, Py_ssize_t i, int mask) {
    while (is(t, i, mask)) i++;
    return i;
}

static inline int at(const text_t *t, Py_ssize_t i, char c) { return i < t->n && t->s[i] == c; }

/* \d{4}-\d\d-\d\d[Tt ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:[zZ]|[+-]\d\d:?\d\d)? */
static Py_ssize_t iso_datetime(const text_t *t, Py_ssize_t i) {
    if (!(digits(t, i, 4) && at(t, i + 4, '-') && digits(t, i + 5, 2) && at(t, i + 7, '-')
          && digits(t, i + 8, 2)
          && (at(t, i + 10, 'T') || at(t, i + 10, 't') || at(t, i + 10, ' '))
          && digits(t, i + 11, 2) && at(t, i + 13, ':') && digits(t, i + 14, 2)))
        return -1;
    Py_ssize_t e = i + 16;
    if (at(t, e, ':') && digits(t, e + 1, 2)) {
        e += 3;
        if ((at(t, e, '.') || at(t, e, ',')) && is(t, e + 1, C_DIGIT)) e = run_of(t, e + 1, C_DIGIT);
    }
    if (at(t, e, 'z') || at(t, e, 'Z')) {
        e += 1;
    } else if ((at(t, e, '+') || at(t, e, '-')) && digits(t, e + 1, 2)) {
        if (at(t, e + 3, ':') && digits(t, e + 4, 2)) e += 6;
        else if (digits(t, e + 3, 2)) e += 5;
    }
    return e;
}

/* \b\d{1,2}:\d\d:\d\d(?:[.,]\d+)?\b */
static Py_ssize_t time_of_day(const text_t *t, Py_ssize_t i) {
    if (!starts_word(t, i)) return -1;
    Py_ssize_t p = i + (is(t, i + 1, C_DIGIT) ? 2 : 1); /* \d{1,2}: only the longer can match */
    if (!(at(t, p, ':') && digits(t, p + 1, 2) && at(t, p + 3, ':') && digits(t, p + 4, 2)))
        return -1;
    p += 6;
    if ((at(t, p, '.') || at(t, p, ',')) && is(t, p + 1, C_DIGIT)) {
        Py_ssize_t q = run_of(t, p + 1, C_DIGIT);
        if (ends_word(t, q)) return q;
    }
    return ends_word(t, p) ? p : -1;
}

/* (?:ms|us|ns|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?)\b, case-insensitive, in the
 * order the pattern tries them (a greedy ? tries the longer spelling first). */
static const char *const units[] = {
    "ms", "us", "ns", "s", "secs", "sec", "seconds", "second", "mins", "min", "minutes", "minute",
    "h", "hrs", "hr", "hours", "hour", NULL};

static Py_ssize_t unit_at(const text_t *t, Py_ssize_t p) {
    for (const char *const *u = units; *u; u++) {
        Py_ssize_t k = 0;
        for (; (*u)[k]; k++) {
            if (p + k >= t->n) break;
            unsigned char c = t->s[p + k];
            if (c >= 'A' && c <= 'Z') c = (unsigned char)(c + 32);
            if (c != (unsigned char)(*u)[k]) break;
        }
        if (!(*u)[k] && ends_word(t, p + k)) return p + k;
    }
    return -1;
}

/* \b\d+(?:[.,]\d+)?\s?(?:units)\b: \d+ takes the whole run (a shorter one is followed by a
 * digit, which nothing after it matches), then the optional parts, longest first. */
static Py_ssize_t duration(const text_t *t, Py_ssize_t i) {
    if (!starts_word(t, i)) return -1;
    Py_ssize_t p = run_of(t, i, C_DIGIT);
    Py_ssize_t starts[2];
    int count = 0;
    if ((at(t, p, '.') || at(t, p, ',')) && is(t, p + 1, C_DIGIT))
        starts[count++] = run_of(t, p + 1, C_DIGIT);
    starts[count++] = p;
    for (int k = 0; k < count; k++) {
        Py_ssize_t q = starts[k];
        if (is(t, q, C_SPACE)) {
            Py_ssize_t e = unit_at(t, q + 1);
            if (e >= 0) return e;
        }
        Py_ssize_t e = unit_at(t, q);
        if (e >= 0) return e;
    }
    return -1;
}

/* \b0[xX][0-9a-fA-F]{4,}\b */
static Py_ssize_t address(const text_t *t, Py_ssize_t i) {
    if (!(starts_word(t, i) && at(t, i, '0') && (at(t, i + 1, 'x') || at(t, i + 1, 'X'))))
        return -1;
    Py_ssize_t e = run_of(t, i + 2, C_HEX);
    return (e - i - 2 >= 4 && ends_word(t, e)) ? e : -1;
}

static inline int hexes(const text_t *t, Py_ssize_t i, int count) {
    for (int k = 0; k < count; k++)
        if (!is(t, i + k, C_HEX)) return 0;
    return 1;
}

/* \b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b */
static Py_ssize_t uuid(const text_t *t, Py_ssize_t i) {
    if (!(starts_word(t, i) && hexes(t, i, 8) && at(t, i + 8, '-') && hexes(t, i + 9, 4)
          && at(t, i + 13, '-') && hexes(t, i + 14, 4) && at(t, i + 18, '-')
          && hexes(t, i + 19, 4) && at(t, i + 23, '-') && hexes(t, i + 24, 12)))
        return -1;
    return ends_word(t, i + 36) ? i + 36 : -1;
}

/* \b(?=[a-fA-F]*\d)[0-9a-fA-F]{12,}\b */
static Py_ssize_t hex_id(const text_t *t, Py_ssize_t i) {
    if (!starts_word(t, i)) return -1;
    Py_ssize_t p = i;
    while (is(t, p, C_HEX) && !is(t, p, C_DIGIT)) p++;
    if (!is(t, p, C_DIGIT)) return -1;
    Py_ssize_t e = run_of(t, i, C_HEX);
    return (e - i >= 12 && ends_word(t, e)) ? e : -1;
}

/* The end of the volatile token that starts at i, or -1 (the pattern's alternatives in order). */
static Py_ssize_t token_at(const text_t *t, Py_ssize_t i) {
    Py_ssize_t e;
    if (is(t, i, C_DIGIT)) {
        if ((e = iso_datetime(t, i)) >= 0) return e;
        if ((e = time_of_day(t, i)) >= 0) return e;
        if ((e = duration(t, i)) >= 0) return e;
        if ((e = address(t, i)) >= 0) return e;
    } else if (!(is(t, i, C_HEX) && starts_word(t, i) && hexes(t, i + 1, 7))) {
        return -1;
    }
    if ((e = uuid(t, i)) >= 0) return e;
    return hex_id(t, i);
}

/* True when the text has two words or more (a text of one word is not masked). */
static int several_words(const text_t *t) {
    Py_ssize_t i = run_of(t, 0, C_SPACE);
    while (i < t->n && !(cls[t->s[i]] & C_SPACE)) i++;
    return run_of(t, i, C_SPACE) < t->n;
}

static PyObject *canonical_text(PyObject *module, PyObject *arg) {
    (void)module;
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "canonical_text() takes a str");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(arg)) Py_RETURN_NONE;
    text_t t = {PyUnicode_1BYTE_DATA(arg), PyUnicode_GET_LENGTH(arg)};
    int mask = several_words(&t);
    unsigned char *out = PyMem_Malloc(t.n > 0 ? (size_t)t.n : 1);
    if (out == NULL) return PyErr_NoMemory();
    Py_ssize_t o = 0, i = 0;
    int space = 0;
    while (i < t.n) {
        unsigned char c = t.s[i];
        if (cls[c] & C_SPACE) {
            space = 1;
            i++;
            continue;
        }
        if (space && o > 0) out[o++] = ' ';
        space = 0;
        Py_ssize_t e = (mask && (cls[c] & C_HEX)) ? token_at(&t, i) : -1;
        if (e > i) {
            out[o++] = '#';
            i = e;
        } else {
            out[o++] = c;
            i++;
        }
    }
    PyObject *result = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, out, o);
    PyMem_Free(out);
    return result;
}

static PyMethodDef methods[] = {
    {"canonical_text", canonical_text, METH_O,
     "canonical_text(text) -> str | None: the canonical form of an ASCII plain-text result "
     "(None for other text)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_textscan",
                                    "Optional accelerator of the text-result signature.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__textscan(void) {
    init_classes();
    return PyModule_Create(&module);
}
