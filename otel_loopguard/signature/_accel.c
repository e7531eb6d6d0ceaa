/* The optional C accelerator of the signatures (otel_loopguard.signature._native).
 *
 * First part: the canonical form of a plain-text tool result, in one pass over its characters.
 * otel_loopguard.signature._text.canonical_text is the definition; this file computes the same
 * string, for ASCII text (_VOLATILE_ASCII_RE) and for any other (_VOLATILE_TEXT_RE: re's
 * Unicode classes and case-insensitive letters). tests/test_accel.py checks that the two agree
 * on random texts and on every text result of the development corpus.
 *
 * The form: the tokens that change between identical runs (date-times, times of day, durations,
 * memory addresses, UUIDs, hex or decimal ids of 12+ characters; the pattern
 * _VOLATILE_ASCII_RE in _volatile.py) each become '#', unless the text is a single word; then
 * runs of whitespace become one space and the ends are trimmed, as " ".join(text.split()) does.
 *
 * Python's re engine pays about 30 ns per character to find where such a token may start; the
 * scan below pays a table lookup, which is what makes a 1 KB text cost a few microseconds
 * instead of fifty. Each alternative of the pattern is matched by hand with the pattern's
 * backtracking order, and \b is tested on the original text, as re.sub does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define C_DIGIT 1
#define C_HEX 2   /* 0-9 a-f A-F */
#define C_WORD 4  /* A-Z a-z 0-9 _ (re.ASCII \w) */
#define C_SPACE 8 /* what str.split() splits ASCII text on */
#define C_WRITTEN 16 /* not copied as it is into a JSON string: whitespace, '"', '\\', controls */

static unsigned char cls[256];

static void init_classes(void) {
    for (int c = '0'; c <= '9'; c++) cls[c] |= C_DIGIT | C_HEX | C_WORD;
    for (int c = 'a'; c <= 'z'; c++) cls[c] |= C_WORD;
    for (int c = 'A'; c <= 'Z'; c++) cls[c] |= C_WORD;
    for (int c = 'a'; c <= 'f'; c++) cls[c] |= C_HEX;
    for (int c = 'A'; c <= 'F'; c++) cls[c] |= C_HEX;
    cls['_'] |= C_WORD;
    for (int c = 0; c <= ' '; c++) cls[c] |= C_WRITTEN;
    cls['"'] |= C_WRITTEN;
    cls['\\'] |= C_WRITTEN;
    const char *space = " \t\n\r\f\v\x1c\x1d\x1e\x1f";
    for (const char *p = space; *p; p++) cls[(unsigned char)*p] |= C_SPACE;
}

/* A text as the scanner reads it: any kind of str; ASCII text reads through the table only. */
typedef struct {
    const void *data;
    int kind;
    Py_ssize_t n;
} text_t;

static inline Py_UCS4 ch(const text_t *t, Py_ssize_t i) {
    return t->kind == PyUnicode_1BYTE_KIND ? ((const Py_UCS1 *)t->data)[i]
           : t->kind == PyUnicode_2BYTE_KIND ? ((const Py_UCS2 *)t->data)[i]
                                             : ((const Py_UCS4 *)t->data)[i];
}

/* The classes of re's Unicode mode for characters past ASCII: \d is a decimal digit, \w an
 * alphanumeric character or '_', \s what str.split() splits on; hex digits are ASCII only. */
static inline int unicode_is(Py_UCS4 c, int mask) {
    return ((mask & C_DIGIT) && Py_UNICODE_ISDECIMAL(c))
           || ((mask & C_WORD) && Py_UNICODE_ISALNUM(c))
           || ((mask & C_SPACE) && Py_UNICODE_ISSPACE(c));
}

static inline int char_is(Py_UCS4 c, int mask) {
    return c < 128 ? (cls[c] & mask) != 0 : unicode_is(c, mask);
}

static inline int is(const text_t *t, Py_ssize_t i, int mask) {
    return i >= 0 && i < t->n && char_is(ch(t, i), mask);
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

static inline int at(const text_t *t, Py_ssize_t i, char c) {
    return i < t->n && ch(t, i) == (Py_UCS4)(unsigned char)c;
}

/* Whether c matches the pattern's letter under re.IGNORECASE in Unicode mode: both cases,
 * and the three letters with more (s: U+017F; i: U+0130, U+0131; the micro sign: U+039C,
 * U+03BC). */
static inline int letter(Py_UCS4 c, char lower) {
    if (c < 128) return (c | 0x20) == (Py_UCS4)(unsigned char)lower;
    if (lower == 's') return c == 0x17F;
    if (lower == 'i') return c == 0x130 || c == 0x131;
    return 0;
}

/* \d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:[zZ]|[+-]\d\d:?\d\d)? */
static Py_ssize_t iso_datetime(const text_t *t, Py_ssize_t i) {
    if (!(digits(t, i, 4) && at(t, i + 4, '-') && digits(t, i + 5, 2) && at(t, i + 7, '-')
          && digits(t, i + 8, 2)
          && (at(t, i + 10, 'T') || at(t, i + 10, 't') || at(t, i + 10, ' '))
          && digits(t, i + 11, 2) && at(t, i + 13, ':') && digits(t, i + 14, 2)))
        return -1;
    Py_ssize_t e = i + 16;
    if (at(t, e, ':') && digits(t, e + 1, 2)) {
        e += 3;
        if ((at(t, e, '.') || at(t, e, ',')) && is(t, e + 1, C_DIGIT))
            e = run_of(t, e + 1, C_DIGIT);
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

/* (?:ms|µs|us|ns|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?)\b, case-insensitive, in the
 * order the pattern tries them (a greedy ? tries the longer spelling first); '\xb5' stands for
 * the micro sign (the ASCII pattern has no µs, and no ASCII text has one). */
static const char *const units[] = {
    "ms", "\xb5s", "us", "ns", "s", "secs", "sec", "seconds", "second", "mins", "min", "minutes",
    "minute", "h", "hrs", "hr", "hours", "hour", NULL};

static Py_ssize_t unit_at(const text_t *t, Py_ssize_t p) {
    if (p >= t->n) return -1;
    Py_UCS4 first = ch(t, p);
    if (!(letter(first, 'm') || letter(first, 'u') || letter(first, 'n') || letter(first, 's')
          || letter(first, 'h') || first == 0xB5 || first == 0x39C || first == 0x3BC))
        return -1; /* no unit starts with it: most numbers are followed by something else */
    for (const char *const *u = units; *u; u++) {
        Py_ssize_t k = 0;
        for (; (*u)[k]; k++) {
            if (p + k >= t->n) break;
            Py_UCS4 c = ch(t, p + k);
            unsigned char want = (unsigned char)(*u)[k];
            if (want == 0xB5 ? !(c == 0xB5 || c == 0x39C || c == 0x3BC) : !letter(c, (char)want))
                break;
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

/* The end of the volatile token that starts at i, or -1 (the pattern's alternatives in order).
 * A token starts with a digit or a hex letter. */
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
    while (i < t->n && !char_is(ch(t, i), C_SPACE)) i++;
    return run_of(t, i, C_SPACE) < t->n;
}

static PyObject *canonical_text(PyObject *module, PyObject *arg) {
    (void)module;
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "canonical_text() takes a str");
        return NULL;
    }
    text_t t = {PyUnicode_DATA(arg), PyUnicode_KIND(arg), PyUnicode_GET_LENGTH(arg)};
    int mask = several_words(&t);
    int kind = t.kind;
    void *out = PyMem_Malloc((size_t)(t.n > 0 ? t.n : 1) * (size_t)kind);
    if (out == NULL) return PyErr_NoMemory();
    Py_ssize_t o = 0, i = 0;
    int space = 0;
    if (PyUnicode_IS_ASCII(arg)) { /* the same loop on bytes: one table lookup per character */
        const unsigned char *const s = t.data;
        unsigned char *const w = out;
        const Py_ssize_t n = t.n; /* locals: stores through w may alias anything else */
        while (i < n) {
            unsigned char c = s[i], f = cls[c];
            if (f & C_SPACE) {
                space = 1;
                i++;
                continue;
            }
            if (space && o > 0) w[o++] = ' ';
            space = 0;
            /* A token starts at a digit, or at a hex letter that starts a word. */
            if (mask && ((f & C_DIGIT) || ((f & C_HEX) && !(i > 0 && (cls[s[i - 1]] & C_WORD))))) {
                Py_ssize_t e = token_at(&t, i);
                if (e > i) {
                    w[o++] = '#';
                    i = e;
                    continue;
                }
            }
            w[o++] = c;
            i++;
        }
    }
    while (i < t.n) {
        Py_UCS4 c = ch(&t, i);
        if (char_is(c, C_SPACE)) {
            space = 1;
            i++;
            continue;
        }
        if (space && o > 0) PyUnicode_WRITE(kind, out, o++, ' ');
        space = 0;
        Py_ssize_t e = (mask && char_is(c, C_HEX | C_DIGIT)) ? token_at(&t, i) : -1;
        if (e > i) {
            PyUnicode_WRITE(kind, out, o++, '#');
            i = e;
        } else {
            PyUnicode_WRITE(kind, out, o++, c);
            i++;
        }
    }
    /* The result may need a narrower kind than the text (what made it wide was masked or
     * folded away): FromKindAndData finds the widest character left. */
    PyObject *result = PyUnicode_FromKindAndData(kind, out, o);
    PyMem_Free(out);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* The canonical form of parsed JSON (a result or arguments), in one walk.
 *
 * Optional accelerator of otel_loopguard.signature._form: the volatile keys of a result are
 * deleted in place (as VolatileMatcher.strip does), and the canonical text is written in the same
 * walk: keys sorted, compact, whitespace inside strings folded, strings that are a whole ISO
 * date-time masked in results. The text is not byte for byte the Python path's (a float is
 * written as its 64 bits, keys are sorted by code point), but two values get the same text
 * where the Python path gives them the same text, except that the Python path also folds a
 * literal backslash escape such as "\n" typed into a string, which this walk keeps as written;
 * tests/test_accel.py checks random pairs of values and every corpus's findings. Whatever the
 * Python path treats apart (a string over max_chars, a container 32 levels down or of more than
 * 2,048 items, a " at 0x" address, a lone surrogate) returns None, and the caller takes the
 * Python path on a fresh parse (the walk may have deleted some volatile keys by then).
 */

#define MAX_DEPTH 32
#define MAX_ITEMS 2048

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} buf_t;

static int grow(buf_t *b, Py_ssize_t more) {
    if (b->len + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap * 2 + more + 64;
    char *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline int put(buf_t *b, const char *s, Py_ssize_t n) {
    if (grow(b, n) < 0) return -1;
    memcpy(b->data + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

static inline int putc1(buf_t *b, char c) {
    if (b->len >= b->cap && grow(b, 1) < 0) return -1;
    b->data[b->len++] = c;
    return 0;
}

typedef struct {
    PyObject *cache;    /* key -> 0 kept, 1 volatile, 2 volatile when its value has a time;
                           NULL: no key is volatile */
    PyObject *classify; /* key -> that class, filling cache */
    Py_ssize_t max_chars;
    int result; /* mask the strings that are a whole date-time */
    int bail; /* set when the Python path must sign the value */
} walk_t;

static inline int dig(const unsigned char *u, Py_ssize_t n, Py_ssize_t i, int count) {
    for (int k = 0; k < count; k++)
        if (i + k >= n || u[i + k] < '0' || u[i + k] > '9') return 0;
    return 1;
}

/* Whether u[0:n] (a folded string, as written) is exactly a date-time of
 * \d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:Z|[+-]\d{2}:?\d{2})?
 * (case-insensitive), as _DATETIME_IN_JSON_RE masks a whole quoted string. */
static int whole_datetime(const unsigned char *u, Py_ssize_t n) {
    if (!(n >= 16 && dig(u, n, 0, 4) && u[4] == '-' && dig(u, n, 5, 2) && u[7] == '-'
          && dig(u, n, 8, 2) && (u[10] == 'T' || u[10] == 't' || u[10] == ' ')
          && dig(u, n, 11, 2) && u[13] == ':' && dig(u, n, 14, 2)))
        return 0;
    Py_ssize_t e = 16;
    if (e < n && u[e] == ':' && dig(u, n, e + 1, 2)) {
        e += 3;
        if (e + 1 < n && (u[e] == '.' || u[e] == ',') && dig(u, n, e + 1, 1)) {
            e++;
            while (e < n && u[e] >= '0' && u[e] <= '9') e++;
        }
    }
    if (e < n && u[e] == ' ') e++; /* \s*: folded, at most one space; it gives back nothing */
    if (e == n) return 1;
    if ((u[e] == 'Z' || u[e] == 'z') && e + 1 == n) return 1;
    if ((u[e] == '+' || u[e] == '-') && dig(u, n, e + 1, 2)) {
        if (e + 6 == n && u[e + 3] == ':' && dig(u, n, e + 4, 2)) return 1;
        if (e + 5 == n && dig(u, n, e + 3, 2)) return 1;
    }
    return 0;
}

/* Whether str holds \d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2} anywhere (_DATETIME_RE.search). */
static int has_datetime(PyObject *str) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(str);
    int kind = PyUnicode_KIND(str);
    const void *data = PyUnicode_DATA(str);
    for (Py_ssize_t i = 0; i + 16 <= n; i++) {
        unsigned char c[16];
        int ok = 1;
        for (int k = 0; k < 16 && ok; k++) {
            Py_UCS4 ch = PyUnicode_READ(kind, data, i + k);
            if (ch > 127 || (k == 0 && (ch < '0' || ch > '9'))) ok = 0;
            c[k] = (unsigned char)ch;
        }
        if (ok && dig(c, 16, 0, 4) && c[4] == '-' && dig(c, 16, 5, 2) && c[7] == '-'
            && dig(c, 16, 8, 2) && (c[10] == 'T' || c[10] == 't' || c[10] == ' ')
            && dig(c, 16, 11, 2) && c[13] == ':' && dig(c, 16, 14, 2))
            return 1;
    }
    return 0;
}

static inline void put_char(unsigned char *out, Py_ssize_t *o, Py_UCS4 c) {
    if (c == '"' || c == '\\') {
        out[(*o)++] = '\\';
        out[(*o)++] = (unsigned char)c;
    } else if (c < 0x20) {
        static const char hex[] = "0123456789abcdef";
        memcpy(out + *o, "\\u00", 4);
        out[*o + 4] = (unsigned char)hex[c >> 4];
        out[*o + 5] = (unsigned char)hex[c & 15];
        *o += 6;
    } else if (c < 0x80) {
        out[(*o)++] = (unsigned char)c;
    } else if (c < 0x800) {
        out[(*o)++] = (unsigned char)(0xC0 | (c >> 6));
        out[(*o)++] = (unsigned char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out[(*o)++] = (unsigned char)(0xE0 | (c >> 12));
        out[(*o)++] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        out[(*o)++] = (unsigned char)(0x80 | (c & 0x3F));
    } else {
        out[(*o)++] = (unsigned char)(0xF0 | (c >> 18));
        out[(*o)++] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
        out[(*o)++] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        out[(*o)++] = (unsigned char)(0x80 | (c & 0x3F));
    }
}

/* Whether ASCII text is written as it is: no whitespace but single spaces between words, no
 * quote, backslash or control character (most strings: they are copied whole). */
static int plain_ascii(const unsigned char *u, Py_ssize_t n) {
    if (n == 0) return 1;
    if (u[0] == ' ' || u[n - 1] == ' ') return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (cls[u[i]] & C_WRITTEN) { /* a space, another whitespace, '"', '\\' or a control */
            if (u[i] != ' ' || u[i + 1] == ' ') return 0; /* u[i + 1] exists: u[n - 1] != ' ' */
        }
    }
    return 1;
}

/* Write str as a quoted string in one pass: whitespace folded (" ".join(str.split())), '"' '\'
 * and control characters escaped, UTF-8; then a whole date-time of a result becomes
 * <datetime>, and a string holding " at 0x" stops the walk (the Python path masks addresses). */
static int put_string(walk_t *w, buf_t *b, PyObject *str) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(str);
    if (grow(b, n * 6 + 2) < 0) return -1;
    unsigned char *out = (unsigned char *)b->data;
    Py_ssize_t start = b->len, o = start + 1;
    out[start] = '"';
    int space = 0;
    if (PyUnicode_IS_ASCII(str) && plain_ascii(PyUnicode_1BYTE_DATA(str), n)) {
        memcpy(out + o, PyUnicode_1BYTE_DATA(str), (size_t)n);
        o += n;
    } else if (PyUnicode_IS_ASCII(str)) {
        const unsigned char *u = PyUnicode_1BYTE_DATA(str);
        for (Py_ssize_t i = 0; i < n; i++) {
            unsigned char c = u[i];
            if (cls[c] & C_SPACE) {
                space = 1;
                continue;
            }
            if (space && o > start + 1) out[o++] = ' ';
            space = 0;
            if (c >= 0x20 && c != '"' && c != '\\') out[o++] = c;
            else put_char(out, &o, c);
        }
    } else {
        int kind = PyUnicode_KIND(str);
        const void *data = PyUnicode_DATA(str);
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (c < 128 ? (cls[c] & C_SPACE) != 0 : Py_UNICODE_ISSPACE(c)) {
                space = 1;
                continue;
            }
            if (c >= 0xD800 && c <= 0xDFFF) { /* a lone surrogate: the Python path signs it */
                w->bail = 1;
                return 0;
            }
            if (space && o > start + 1) out[o++] = ' ';
            space = 0;
            put_char(out, &o, c);
        }
    }
    const unsigned char *content = out + start + 1;
    Py_ssize_t m = o - start - 1;
    for (const unsigned char *x = memchr(content, 'x', (size_t)m); x != NULL;
         x = memchr(x + 1, 'x', (size_t)(content + m - x - 1))) {
        if (x - content >= 5 && memcmp(x - 5, " at 0x", 6) == 0) {
            w->bail = 1;
            return 0;
        }
    }
    if (w->result && whole_datetime(content, m)) {
        memcpy(out + start, "\"<datetime>\"", 12);
        b->len = start + 12;
        return 0;
    }
    out[o++] = '"';
    b->len = o;
    return 0;
}

static int put_value(walk_t *w, buf_t *b, PyObject *value, int depth);

/* The class of a result's key: 0 kept, 1 volatile, 2 volatile when the value has a time. */
static int key_class(walk_t *w, PyObject *key) {
    PyObject *hit = PyDict_GetItemWithError(w->cache, key);
    if (hit == NULL) {
        if (PyErr_Occurred()) return -1;
        hit = PyObject_CallOneArg(w->classify, key);
        if (hit == NULL) return -1;
        long found = PyLong_AsLong(hit);
        Py_DECREF(hit);
        return (int)found;
    }
    return (int)PyLong_AsLong(hit);
}

typedef struct {
    PyObject *key, *value;
} pair_t;

static inline int key_order(PyObject *a, PyObject *b) {
    if (PyUnicode_IS_ASCII(a) && PyUnicode_IS_ASCII(b)) { /* code point order, as memcmp */
        Py_ssize_t na = PyUnicode_GET_LENGTH(a), nb = PyUnicode_GET_LENGTH(b);
        int c = memcmp(PyUnicode_1BYTE_DATA(a), PyUnicode_1BYTE_DATA(b),
                       (size_t)(na < nb ? na : nb));
        return c ? c : (na < nb ? -1 : na > nb);
    }
    return PyUnicode_Compare(a, b);
}

static int by_key(const void *a, const void *b) {
    /* Keys of one mapping differ, so this never returns 0. */
    return key_order(((const pair_t *)a)->key, ((const pair_t *)b)->key);
}

/* Sort a mapping's pairs by key: insertion sort for the few keys of most mappings. */
static void sort_pairs(pair_t *pairs, Py_ssize_t n) {
    if (n > 16) {
        qsort(pairs, (size_t)n, sizeof(pair_t), by_key);
        return;
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        pair_t item = pairs[i];
        Py_ssize_t j = i;
        while (j > 0 && key_order(pairs[j - 1].key, item.key) > 0) {
            pairs[j] = pairs[j - 1];
            j--;
        }
        pairs[j] = item;
    }
}

static int put_dict(walk_t *w, buf_t *b, PyObject *dict, int depth) {
    Py_ssize_t n = PyDict_GET_SIZE(dict);
    if (depth >= MAX_DEPTH || n > MAX_ITEMS) {
        w->bail = 1;
        return 0;
    }
    pair_t stack[32];
    pair_t *pairs = n <= 32 ? stack : PyMem_Malloc(sizeof(pair_t) * (size_t)(n ? n : 1));
    if (pairs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t pos = 0, kept = 0, dropped = 0;
    PyObject *key, *value;
    int rc = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            w->bail = 1;
            break;
        }
        if (w->cache != NULL) {
            int found = key_class(w, key);
            if (found < 0) {
                rc = -1;
                break;
            }
            if (found == 1 || (found == 2 && PyUnicode_CheckExact(value) && has_datetime(value))) {
                pairs[n - 1 - dropped++].key = key; /* volatile: kept from the end, deleted below */
                continue;
            }
        }
        pairs[kept].key = key;
        pairs[kept++].value = value;
    }
    if (rc == 0 && !w->bail) {
        if (kept > 1) sort_pairs(pairs, kept);
        if (PyErr_Occurred()) rc = -1;
    }
    if (rc == 0 && !w->bail) rc = putc1(b, '{');
    for (Py_ssize_t i = 0; i < kept && rc == 0 && !w->bail; i++) {
        if (i) rc = putc1(b, ',');
        if (rc == 0) rc = put_string(w, b, pairs[i].key);
        if (rc == 0) rc = putc1(b, ':');
        if (rc == 0 && !w->bail) rc = put_value(w, b, pairs[i].value, depth + 1);
    }
    if (rc == 0 && !w->bail) rc = putc1(b, '}');
    /* Delete the volatile keys, as VolatileMatcher.strip does: the result's facts are read
     * from the stripped value. */
    for (Py_ssize_t i = 0; i < dropped && rc == 0; i++) {
        PyObject *gone = pairs[n - 1 - i].key;
        Py_INCREF(gone);
        rc = PyDict_DelItem(dict, gone);
        Py_DECREF(gone);
    }
    if (pairs != stack) PyMem_Free(pairs);
    return rc;
}

static int put_value(walk_t *w, buf_t *b, PyObject *value, int depth) {
    if (w->bail) return 0;
    PyTypeObject *type = Py_TYPE(value);
    if (type == &PyUnicode_Type) {
        if (PyUnicode_GET_LENGTH(value) > w->max_chars) {
            w->bail = 1;
            return 0;
        }
        return put_string(w, b, value);
    }
    if (type == &PyDict_Type) return put_dict(w, b, value, depth);
    if (type == &PyList_Type) {
        Py_ssize_t n = PyList_GET_SIZE(value);
        if (depth >= MAX_DEPTH || n > MAX_ITEMS) {
            w->bail = 1;
            return 0;
        }
        if (putc1(b, '[') < 0) return -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value) && !w->bail; i++) {
            if (i && putc1(b, ',') < 0) return -1;
            if (put_value(w, b, PyList_GET_ITEM(value, i), depth + 1) < 0) return -1;
        }
        return putc1(b, ']');
    }
    if (value == Py_None) return put(b, "null", 4);
    if (value == Py_True) return put(b, "true", 4);
    if (value == Py_False) return put(b, "false", 5);
    if (type == &PyLong_Type) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow == 0) {
            if (v == -1 && PyErr_Occurred()) return -1;
            char s[24];
            int k = 24;
            unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
            do {
                s[--k] = (char)('0' + u % 10);
                u /= 10;
            } while (u);
            if (v < 0) s[--k] = '-';
            return put(b, s + k, 24 - k);
        }
        PyObject *text = PyObject_Str(value); /* up to 2**64 - 1 */
        if (text == NULL) return -1;
        Py_ssize_t k;
        const char *s = PyUnicode_AsUTF8AndSize(text, &k);
        int rc = s == NULL ? -1 : put(b, s, k);
        Py_DECREF(text);
        return rc;
    }
    if (type == &PyFloat_Type) {
        /* A float as its 64 bits in hex after '~': one text per value (-0.0 apart from 0.0, as
         * the Python path writes them), never the text of an int, and no float formatting. */
        double d = PyFloat_AS_DOUBLE(value);
        unsigned long long bits;
        memcpy(&bits, &d, sizeof bits);
        static const char hex[] = "0123456789abcdef";
        char s[17];
        s[0] = '~';
        for (int k = 16; k >= 1; k--) {
            s[k] = hex[bits & 15];
            bits >>= 4;
        }
        return put(b, s, 17);
    }
    w->bail = 1; /* not something a JSON parser returns */
    return 0;
}

static PyObject *canonical_json(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "canonical_json(value, cache, classify, max_chars, "
                                         "result) takes 5 arguments");
        return NULL;
    }
    walk_t w = {args[1], args[2], PyLong_AsSsize_t(args[3]), PyObject_IsTrue(args[4]), 0};
    if (w.max_chars == -1 && PyErr_Occurred()) return NULL;
    if (w.cache == Py_None) w.cache = NULL;
    if (w.cache != NULL && !PyDict_CheckExact(w.cache)) {
        PyErr_SetString(PyExc_TypeError, "canonical_json(): cache must be a dict or None");
        return NULL;
    }
    buf_t b = {NULL, 0, 0};
    if (grow(&b, 1024) < 0) return NULL;
    int rc = put_value(&w, &b, args[0], 0);
    PyObject *out = NULL;
    if (rc == 0) {
        if (w.bail) {
            out = Py_None;
            Py_INCREF(out);
        } else {
            out = PyUnicode_DecodeUTF8(b.data, b.len, "strict");
        }
    }
    PyMem_Free(b.data);
    return out;
}

static PyMethodDef methods[] = {
    {"canonical_text", canonical_text, METH_O,
     "canonical_text(text) -> str: the canonical form of a plain-text result."},
    {"canonical_json", (PyCFunction)(void (*)(void))canonical_json, METH_FASTCALL,
     "canonical_json(value, cache, classify, max_chars, result) -> str | None: the canonical "
     "text of parsed JSON, its volatile keys (cache not None) deleted in place; None when the "
     "Python path must sign it."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_accel", "Optional accelerator of the result and argument signatures.",
    -1, methods};

PyMODINIT_FUNC PyInit__accel(void) {
    init_classes();
    return PyModule_Create(&module);
}
