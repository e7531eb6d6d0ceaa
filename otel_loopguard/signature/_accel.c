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
 * A line that starts with _text.SCREEN_TEXT ends the form (a web agent's transcription of its
 * screenshot follows it: volatile).
 *
 * Python's re engine pays about 30 ns per character to find where such a token may start; the
 * scan below pays a table lookup, which is what makes a 1 KB text cost a few microseconds
 * instead of fifty. Each alternative of the pattern is matched by hand with the pattern's
 * backtracking order, and \b is tested on the original text, as re.sub does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <float.h>
#include <stdint.h>
#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#define WIDE 1 /* 16 bytes at a time (wide_run) */
#else
#define WIDE 0
#endif

/* The scans that read 8 characters at a time (SWAR) take them as one little-endian integer:
 * its low byte first, the borrows of a subtraction running from a byte to the next one. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__GNUC__)
#define SWAR 1
#else
#define SWAR 0
#endif

/* short_decimal needs doubles computed as doubles (SSE2, not x87's extended precision) */
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
#define SHORT_DECIMALS 1
#else
#define SHORT_DECIMALS 0
#endif

#define C_DIGIT 1
#define C_HEX 2   /* 0-9 a-f A-F */
#define C_WORD 4  /* A-Z a-z 0-9 _ (re.ASCII \w) */
#define C_SPACE 8 /* what str.split() splits ASCII text on */
#define C_WRITTEN 16 /* not copied as it is into a JSON string: whitespace, '"', '\\', controls */
#define C_STRING 32 /* ends a run of plain characters in a JSON text's string: a space, '"', '\\',
                       a control character, or a byte past ASCII */
#define C_LETTER 64 /* A-Z a-z _: a word character that is not a digit */
#define C_UNIT 128 /* m u n s h, either case: the letters an ASCII unit of a duration starts with */

static unsigned char cls[256];
static char hex_pairs[512]; /* "000102...ff": a byte's two hex digits */

static void init_classes(void) {
    for (int c = 0; c < 256; c++) {
        hex_pairs[2 * c] = "0123456789abcdef"[c >> 4];
        hex_pairs[2 * c + 1] = "0123456789abcdef"[c & 15];
    }
    for (int c = '0'; c <= '9'; c++) cls[c] |= C_DIGIT | C_HEX | C_WORD;
    for (int c = 'a'; c <= 'z'; c++) cls[c] |= C_WORD;
    for (int c = 'A'; c <= 'Z'; c++) cls[c] |= C_WORD;
    for (int c = 'a'; c <= 'f'; c++) cls[c] |= C_HEX;
    for (int c = 'A'; c <= 'F'; c++) cls[c] |= C_HEX;
    cls['_'] |= C_WORD | C_LETTER;
    for (int c = 'a'; c <= 'z'; c++) cls[c] |= C_LETTER;
    for (int c = 'A'; c <= 'Z'; c++) cls[c] |= C_LETTER;
    for (const char *u = "mnshuMNSHU"; *u; u++) cls[(unsigned char)*u] |= C_UNIT;
    for (int c = 0; c <= ' '; c++) cls[c] |= C_WRITTEN;
    cls['"'] |= C_WRITTEN;
    cls['\\'] |= C_WRITTEN;
    for (int c = 0; c < 256; c++)
        if (c <= ' ' || c == '"' || c == '\\' || c >= 0x80) cls[c] |= C_STRING;
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

/* (?:\d{1,2}:\d\d|\d+)(?:[.,]\d+)?\s?(?:units)\b for the digits from start to p: a clock
 * (Maven's "02:55 min") when there are one or two and ':' and two digits follow (nothing else
 * after the digits can be ':'); then the optional parts, longest first. */
static Py_ssize_t duration_from(const text_t *t, Py_ssize_t start, Py_ssize_t p) {
    if (p - start <= 2 && at(t, p, ':') && digits(t, p + 1, 2)) p += 3;
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

/* \b(?:\d+m\s?)?(?:\d{1,2}:\d\d|\d+)(?:[.,]\d+)?\s?(?:units)\b: \d+ takes the whole run (a shorter
 * one is followed by a digit, which nothing after it matches); minutes first (Go's and
 * Gradle's "1m2.5s", "1m 23s"), else the duration from the digits. */
static Py_ssize_t duration(const text_t *t, Py_ssize_t i) {
    if (!starts_word(t, i)) return -1;
    Py_ssize_t p = run_of(t, i, C_DIGIT);
    if (p < t->n && letter(ch(t, p), 'm')) {
        Py_ssize_t q = p + 1 + is(t, p + 1, C_SPACE);
        if (is(t, q, C_DIGIT)) {
            Py_ssize_t e = duration_from(t, q, run_of(t, q, C_DIGIT));
            if (e >= 0) return e;
        }
    }
    return duration_from(t, i, p);
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

/* Whether the ASCII characters s[0:len] end just before t[i], case-sensitive. */
static int preceded_by(const text_t *t, Py_ssize_t i, const char *s, Py_ssize_t len) {
    if (i < len) return 0;
    for (Py_ssize_t k = 0; k < len; k++)
        if (ch(t, i - len + k) != (Py_UCS4)(unsigned char)s[k]) return 0;
    return 1;
}

/* (?<=Cell In\[)\d+(?=\])|(?<=ipython-input-)\d+(?=-): an IPython traceback's execution
 * counter; (?<=Process Group PGID: )\d+: the process group Gemini CLI's shell tool ran a
 * command in (the last alternatives of _volatile's patterns), case-sensitive. */
static Py_ssize_t cell_counter(const text_t *t, Py_ssize_t i) {
    Py_ssize_t e = run_of(t, i, C_DIGIT);
    if (at(t, e, ']') && preceded_by(t, i, "Cell In[", 8)) return e;
    if (at(t, e, '-') && preceded_by(t, i, "ipython-input-", 14)) return e;
    if (preceded_by(t, i, "Process Group PGID: ", 20)) return e;
    return -1;
}

/* The end of the volatile token that starts at i, or -1 (the pattern's alternatives in order).
 * A token starts with a digit or a hex letter. */
static Py_ssize_t token_at(const text_t *t, Py_ssize_t i) {
    Py_ssize_t e;
    int digit = is(t, i, C_DIGIT);
    if (digit) {
        if ((e = iso_datetime(t, i)) >= 0) return e;
        if ((e = time_of_day(t, i)) >= 0) return e;
        if ((e = duration(t, i)) >= 0) return e;
        if ((e = address(t, i)) >= 0) return e;
    } else if (!(is(t, i, C_HEX) && starts_word(t, i) && hexes(t, i + 1, 7))) {
        return -1;
    }
    if ((e = uuid(t, i)) >= 0) return e;
    if ((e = hex_id(t, i)) >= 0 || !digit) return e;
    return cell_counter(t, i);
}

/* How many of the characters s[i:i + most] are hex digits, counted from i (ASCII text). */
static inline Py_ssize_t hex_run(const unsigned char *s, Py_ssize_t n, Py_ssize_t i,
                                 Py_ssize_t most) {
    Py_ssize_t k = i;
    while (k < n && k - i < most && (cls[s[k]] & C_HEX)) k++;
    return k - i;
}

/* Whether a token may start at the digit s[i] of ASCII text: what follows its digits allows
 * one of the pattern's alternatives (token_at decides). A date-time's 4 digits are followed by
 * '-'; the other alternatives start a word: a time of day's 1 or 2 digits are followed by ':',
 * a duration's by '.' or ',' and a digit, or by its unit's first letter (m u n s h) after at
 * most one space, an address's 0 by x, an IPython counter's by ']' or '-' after its prefix; a
 * UUID or a hex id starts with 8 hex digits or more.
 * Most numbers of a text (a line's number, a count) are none of these: token_at, which reads
 * the text through its kind, is not called for them. */
static inline int digit_may_start(const unsigned char *s, Py_ssize_t n, Py_ssize_t i) {
    Py_ssize_t d = i;
    while (d < n && (cls[s[d]] & C_DIGIT)) d++;
    unsigned char next = d < n ? s[d] : 0, after = d + 1 < n ? s[d + 1] : 0;
    if (d - i == 4 && next == '-') return 1;
    if (i > 0 && (cls[s[i - 1]] & C_WORD)) return 0; /* no \b before i */
    if ((d - i <= 2 && next == ':') || (cls[next] & C_UNIT)
        || ((next == '.' || next == ',') && (cls[after] & C_DIGIT))
        || ((cls[next] & C_SPACE) && (cls[after] & C_UNIT))
        || (d - i == 1 && s[i] == '0' && (next == 'x' || next == 'X'))
        || (next == ']' && i >= 8 && memcmp(s + i - 8, "Cell In[", 8) == 0)
        || (next == '-' && i >= 14 && memcmp(s + i - 14, "ipython-input-", 14) == 0)
        || (i >= 20 && s[i - 2] == ':' && memcmp(s + i - 20, "Process Group PGID: ", 20) == 0))
        return 1;
    return hex_run(s, n, i, 8) == 8;
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* The high bit of each byte of x (8 ASCII characters) that is between lo and hi; the other
 * bits 0. Each byte plus a constant below 0x80 stays below 0x100: no carry between bytes. */
static inline uint64_t ascii_between(uint64_t x, unsigned char lo, unsigned char hi) {
    const uint64_t ones = ONES;
    return (x + ones * (0x80 - lo)) & ~(x + ones * (0x7F - hi)) & (ones * 0x80);
}

/* The index of the first byte (in memory order) whose high bit is set in mask (not 0). */
static inline Py_ssize_t first_byte(uint64_t mask) {
#if SWAR
    return (Py_ssize_t)(__builtin_ctzll(mask) >> 3);
#else
    (void)mask; /* not called */
    return 0;
#endif
}

/* Whether the 8 ASCII characters at s are hex digits (a UUID's first group, a hex id's start). */
static inline int hex8(const unsigned char *s) {
    uint64_t x;
    memcpy(&x, s, 8);
    const uint64_t highs = HIGHS;
    return (ascii_between(x, '0', '9') | ascii_between(x | 0x2020202020202020ULL, 'a', 'f'))
           == highs;
}

/* How many of the 16 ASCII characters at s, copied to w, ascii_form copies as they are after
 * a word character: letters and '_', and single spaces before a word that starts no token (its
 * first letter g to z, or a to f with a character that is not a hex digit among its first 8,
 * in these 16). Why SSE2: words are short, and finding each one's end, then testing the space
 * and the letter after it, costs some 40 instructions a word; this tests 16 characters in
 * about 30. */
static inline Py_ssize_t plain_words(const unsigned char *s, unsigned char *w) {
#if WIDE
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)s);
    _mm_storeu_si128((__m128i *)(void *)w, x);
    __m128i lower = _mm_or_si128(x, _mm_set1_epi8(0x20));
    __m128i past_a = _mm_cmpgt_epi8(lower, _mm_set1_epi8('a' - 1));
    unsigned letter = (unsigned)_mm_movemask_epi8(_mm_or_si128(
        _mm_and_si128(past_a, _mm_cmplt_epi8(lower, _mm_set1_epi8('z' + 1))),
        _mm_cmpeq_epi8(x, _mm_set1_epi8('_'))));
    unsigned hex = (unsigned)_mm_movemask_epi8(_mm_or_si128(
        _mm_and_si128(past_a, _mm_cmplt_epi8(lower, _mm_set1_epi8('f' + 1))),
        _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8('0' - 1)),
                      _mm_cmplt_epi8(x, _mm_set1_epi8('9' + 1)))));
    unsigned space = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8(' ')));
    unsigned other = ~hex & 0xFFFF; /* then bit k: one that is not a hex digit in k..k+7 */
    other |= other >> 1;
    other |= other >> 2;
    other |= other >> 4;
    /* a space stops where the letter after it may start a token: what is copied ends with a
     * letter, as ascii_form's loop expects */
    unsigned stop = ~(letter | space) | (space & ~(letter >> 1)) | (space & (hex & ~other) >> 1);
    return (Py_ssize_t)__builtin_ctz(stop);
#else
    (void)s;
    (void)w;
    return 0;
#endif
}

/* True when the text has two words or more (a text of one word is not masked). */
static int several_words(const text_t *t) {
    Py_ssize_t i = run_of(t, 0, C_SPACE);
    while (i < t->n && !char_is(ch(t, i), C_SPACE)) i++;
    return run_of(t, i, C_SPACE) < t->n;
}

/* _text.SCREEN_TEXT: the line before a web agent's transcription of its screenshot. The
 * canonical form of a text keeps what comes before it and the line itself, and stops there
 * (_text.without_screen_text): where a whitespace run that ends with '\n' is followed by it. */
static const char screen_text[] =
    "Automatic OCR of the page screenshot has detected the following text:";
#define SCREEN_TEXT_LEN ((Py_ssize_t)(sizeof screen_text - 1))

/* Whether screen_text starts at t[i], in a text of any kind. Its canonical form is itself (one
 * space between words, no token in it). */
static int screen_text_at(const text_t *t, Py_ssize_t i) {
    if (t->n - i < SCREEN_TEXT_LEN) return 0;
    if (t->kind == PyUnicode_1BYTE_KIND)
        return memcmp((const unsigned char *)t->data + i, screen_text, SCREEN_TEXT_LEN) == 0;
    for (Py_ssize_t k = 0; k < SCREEN_TEXT_LEN; k++)
        if (ch(t, i + k) != (Py_UCS4)(unsigned char)screen_text[k]) return 0;
    return 1;
}

/* The canonical form of ASCII text t (see canonical_text) written to w, which has room for
 * t->n + 8 bytes; returns its length. One table lookup per character: runs of whitespace are
 * skipped whole, and the letters after a word character are found first and copied in one go
 * (8 bytes at a time: w has room past the form for the last copy). */
static Py_ssize_t ascii_form(const text_t *t, unsigned char *w) {
    const unsigned char *const s = t->data;
    const Py_ssize_t n = t->n; /* locals: stores through w may alias anything else */
    const int mask = several_words(t);
    Py_ssize_t o = 0, i = 0;
    while (i < n) {
        unsigned char c = s[i], f = cls[c];
        if (f & C_SPACE) {
            do i++;
            while (i < n && (cls[s[i]] & C_SPACE));
            if (i < n && o > 0) w[o++] = ' '; /* between words only: the ends are trimmed */
            if (s[i - 1] == '\n' && i < n && s[i] == 'A' && screen_text_at(t, i)) {
                memcpy(w + o, screen_text, (size_t)SCREEN_TEXT_LEN); /* o + LEN <= n */
                return o + SCREEN_TEXT_LEN;
            }
            continue;
        }
        /* A token starts at a digit, or at a hex letter that starts a word and is followed
         * by 7 more (a UUID's first group; a hex id has 12): token_at tests that too, this
         * spares the call for most words that start with a to f, and digit_may_start for
         * most numbers. */
        if (mask && ((f & C_DIGIT) ? digit_may_start(s, n, i)
                     : ((f & C_HEX) && !(i > 0 && (cls[s[i - 1]] & C_WORD))
                        && (SWAR ? i + 8 <= n && hex8(s + i) : hex_run(s, n, i, 8) == 8)))) {
            Py_ssize_t e = token_at(t, i);
            if (e > i) {
                w[o++] = '#';
                i = e;
                continue;
            }
        }
        w[o++] = c;
        i++;
        /* The letters that follow a word character, up to a space, a digit or anything
         * else, start no token (a hex letter inside a word starts none): copied as they are.
         * After any other character, the loop tests the next one. */
        while (f & C_WORD) {
            while (WIDE && i + 16 <= n) { /* w has room: the form is never longer */
                Py_ssize_t k = plain_words(s + i, w + o);
                i += k;
                o += k;
                if (k < 16) break;
            }
            while (SWAR && !WIDE && i + 8 <= n) { /* 8 bytes at a time: copied, then how many are letters */
                uint64_t x;
                memcpy(&x, s + i, 8);
                memcpy(w + o, &x, 8); /* w has room for 8 past the form */
                uint64_t other = ~ascii_between(x | 0x2020202020202020ULL, 'a', 'z') & HIGHS;
                if (other) {
                    Py_ssize_t k = first_byte(other);
                    i += k;
                    o += k;
                    break;
                }
                i += 8;
                o += 8;
            }
            while (i < n && (cls[s[i]] & C_LETTER)) w[o++] = s[i++]; /* '_', the last bytes */
            /* A space alone, then a word whose first letter starts no token (g to z, '_'): the
             * space and the word are copied in the same run, most words of a text so. */
            if (!(i + 1 < n && s[i] == ' ' && (cls[s[i + 1]] & (C_LETTER | C_HEX)) == C_LETTER))
                break;
            w[o++] = ' ';
            w[o++] = s[i + 1];
            i += 2;
        }
    }
    return o;
}

static PyObject *canonical_text(PyObject *module, PyObject *arg) {
    (void)module;
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "canonical_text() takes a str");
        return NULL;
    }
    text_t t = {PyUnicode_DATA(arg), PyUnicode_KIND(arg), PyUnicode_GET_LENGTH(arg)};
    int kind = t.kind;
    void *out = PyMem_Malloc((size_t)(t.n + 8) * (size_t)kind);
    if (out == NULL) return PyErr_NoMemory();
    if (PyUnicode_IS_ASCII(arg)) {
        Py_ssize_t o = ascii_form(&t, out);
        PyObject *result = PyUnicode_New(o, 127);
        if (result != NULL) memcpy(PyUnicode_1BYTE_DATA(result), out, (size_t)o);
        PyMem_Free(out);
        return result;
    }
    int mask = several_words(&t), space = 0;
    Py_ssize_t o = 0, i = 0;
    while (i < t.n) {
        Py_UCS4 c = ch(&t, i);
        if (char_is(c, C_SPACE)) {
            space = 1;
            i++;
            continue;
        }
        if (space && o > 0) PyUnicode_WRITE(kind, out, o++, ' ');
        if (space && c == 'A' && ch(&t, i - 1) == '\n' && screen_text_at(&t, i)) {
            for (Py_ssize_t k = 0; k < SCREEN_TEXT_LEN; k++)
                PyUnicode_WRITE(kind, out, o++, (Py_UCS4)(unsigned char)screen_text[k]);
            break;
        }
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

/* The text a walk writes: in the caller's stack array (BUF_STACK bytes, most texts) until it
 * needs more, then on the heap (heap set). */
typedef struct {
    char *data;
    Py_ssize_t len, cap;
    int heap;
} buf_t;

#define BUF_STACK 4096
#define BUF_ON(array) {array, 0, (Py_ssize_t)sizeof array, 0}

static int grow(buf_t *b, Py_ssize_t more) {
    if (b->len + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap * 2 + more + 64;
    char *data = b->heap ? PyMem_Realloc(b->data, (size_t)cap) : PyMem_Malloc((size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (!b->heap) memcpy(data, b->data, (size_t)b->len);
    b->data = data;
    b->cap = cap;
    b->heap = 1;
    return 0;
}

static inline void buf_free(buf_t *b) {
    if (b->heap) PyMem_Free(b->data);
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
    int wide; /* a character past ASCII may have been written */
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

/* Characters of a str, or of a part of one: a JSON text's string read in place, or decoded
 * from its escapes. ascii: every character is below 128. */
typedef struct {
    const void *data;
    int kind, ascii;
    Py_ssize_t n;
    int plain; /* known to be ASCII written as it is (see plain_ascii) */
} span_t;

static inline span_t span_of(PyObject *str) {
    span_t s = {PyUnicode_DATA(str), PyUnicode_KIND(str), PyUnicode_IS_ASCII(str),
                PyUnicode_GET_LENGTH(str), 0};
    return s;
}

/* Whether s holds a time of day after a date, \d[Tt ]\d{1,2}:\d\d, anywhere
 * (_TIME_OF_DAY_RE.search): what makes a `date` member volatile. */
static int has_datetime(const span_t *s) {
    Py_ssize_t n = s->n;
    int kind = s->kind;
    const void *data = s->data;
    for (Py_ssize_t i = 0; i + 5 <= n; i++) {
        unsigned char c[7];
        Py_ssize_t m = n - i < 7 ? n - i : 7;
        for (Py_ssize_t k = 0; k < m; k++) {
            Py_UCS4 ch = PyUnicode_READ(kind, data, i + k);
            c[k] = ch > 127 ? 0 : (unsigned char)ch; /* \d and [Tt ] are ASCII */
        }
        if (!dig(c, m, 0, 1) || !(c[1] == 'T' || c[1] == 't' || c[1] == ' ') || !dig(c, m, 2, 1))
            continue;
        if ((c[3] == ':' && dig(c, m, 4, 2))                        /* 9:05 */
            || (dig(c, m, 3, 1) && m > 4 && c[4] == ':' && dig(c, m, 5, 2))) /* 10:05 */
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

/* Where the run of plain characters of a JSON string at s[j] ends, read 16 bytes at a time:
 * at the first '"', '\\', control character or byte past ASCII, or where fewer than 16 bytes
 * are left (read_string's 8-byte and 1-byte scans go on from there). *plain is cleared when
 * two spaces in a row are among the bytes passed (s[j - 1] is in the text: the quote, at
 * first). Why SSE2: a result's strings are most of its text, and the 8-byte scan pays about
 * 30 instructions per 8 bytes for what SSE2 tests in about 12 per 16; on every x86-64. */
static inline Py_ssize_t wide_run(const unsigned char *s, Py_ssize_t j, Py_ssize_t n,
                                  int *plain) {
#if WIDE
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'),
                  control = _mm_set1_epi8(0x20), space = _mm_set1_epi8(' ');
    unsigned before = s[j - 1] == ' ';
    while (j + 16 <= n) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + j));
        /* signed: a byte past ASCII is below 0x20 too */
        unsigned stops = (unsigned)_mm_movemask_epi8(_mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
            _mm_cmplt_epi8(x, control)));
        unsigned spaces = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, space));
        unsigned doubled = spaces & ((spaces << 1) | before);
        if (stops) {
            unsigned k = (unsigned)__builtin_ctz(stops);
            if (doubled & ((1u << k) - 1)) *plain = 0;
            return j + (Py_ssize_t)k;
        }
        if (doubled) *plain = 0;
        before = spaces >> 15;
        j += 16;
    }
#else
    (void)s;
    (void)n;
    (void)plain;
#endif
    return j;
}

/* Whether ASCII text is written as it is: no whitespace but single spaces between words, no
 * quote, backslash or control character (most strings: they are copied whole). */
static int plain_ascii(const unsigned char *u, Py_ssize_t n) {
    if (n == 0) return 1;
    if (u[0] == ' ' || u[n - 1] == ' ') return 0;
    int plain = 1;
    Py_ssize_t from = wide_run(u, 1, n, &plain); /* u[0] is not a space: u[1:] is read */
    if (!plain || from + 16 <= n) return 0; /* two spaces, or it stopped at '"', '\\'... */
    for (Py_ssize_t i = from - 1; i < n; i++) { /* from - 1: a space there and one at from */
        if (cls[u[i]] & C_WRITTEN) { /* a space, another whitespace, '"', '\\' or a control */
            if (u[i] != ' ' || u[i + 1] == ' ') return 0; /* u[i + 1] exists: u[n - 1] != ' ' */
        }
    }
    return 1;
}

/* Whether text[0:n] holds " at 0x" (an object repr's address, which the Python path masks).
 * In canonical JSON text it can only be inside a string: a walk may look for it once in its
 * whole text instead of in each string. */
static int has_address(const char *text, Py_ssize_t n) {
    for (const char *x = memchr(text, 'x', (size_t)n); x != NULL;
         x = memchr(x + 1, 'x', (size_t)(text + n - x - 1)))
        if (x - text >= 5 && memcmp(x - 5, " at 0x", 6) == 0) return 1;
    return 0;
}

/* Write plain ASCII u[0:n] (plain_ascii) as put_span does: quoted, copied whole, or as
 * <datetime> when it is a result's whole date-time. readable: how many bytes u has (at least
 * n): a string of up to 16 characters with 16 readable is copied as 16 bytes, a fixed size the
 * compiler copies without a call to memcpy (most keys and short values). */
static inline int put_plain(const walk_t *w, buf_t *b, const unsigned char *u, Py_ssize_t n,
                            Py_ssize_t readable) {
    if (grow(b, n + 18) < 0) return -1;
    char *out = b->data + b->len;
    if (w->result && n >= 16 && u[0] <= '9' && whole_datetime(u, n)) {
        memcpy(out, "\"<datetime>\"", 12);
        b->len += 12;
        return 0;
    }
    out[0] = '"';
    if (n <= 16 && readable >= 16) memcpy(out + 1, u, 16); /* the room: n + 18 */
    else memcpy(out + 1, u, (size_t)n);
    out[n + 1] = '"';
    b->len += n + 2;
    return 0;
}

/* Write str as a quoted string in one pass: whitespace folded (" ".join(str.split())), '"' '\'
 * and control characters escaped, UTF-8; then a whole date-time of a result becomes
 * <datetime>. A string holding " at 0x" (an object repr's address, which the Python path
 * masks) is found by has_address in the walk's whole text, at its end. */
static int put_span(walk_t *w, buf_t *b, const span_t *str) {
    Py_ssize_t n = str->n;
    int ascii = str->ascii && str->kind == PyUnicode_1BYTE_KIND;
    if (str->plain || (ascii && plain_ascii(str->data, n)))
        return put_plain(w, b, str->data, n, n);
    if (grow(b, n * 6 + 2) < 0) return -1;
    unsigned char *out = (unsigned char *)b->data;
    Py_ssize_t start = b->len, o = start + 1;
    out[start] = '"';
    int space = 0;
    if (ascii) {
        const unsigned char *u = str->data;
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
        int kind = str->kind;
        const void *data = str->data;
        w->wide = 1;
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
    if (w->result && whole_datetime(content, m)) {
        memcpy(out + start, "\"<datetime>\"", 12);
        b->len = start + 12;
        return 0;
    }
    out[o++] = '"';
    b->len = o;
    return 0;
}

static inline int put_string(walk_t *w, buf_t *b, PyObject *str) {
    span_t s = span_of(str);
    return put_span(w, b, &s);
}

/* Whether ASCII s[0:n] holds a digit, '-' or '\n', 8 bytes at a time: every volatile token
 * has a digit but a UUID's (which has '-'), and a screenshot's transcription follows a '\n'.
 * Most strings of words have none of them and are not scanned further. */
static int may_hold_token(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (SWAR && i + 8 <= n) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        if (ascii_between(x, '0', '9') | ascii_between(x, '-', '-') | ascii_between(x, '\n', '\n'))
            return 1;
        i += 8;
    }
    for (; i < n; i++)
        if ((cls[s[i]] & C_DIGIT) || s[i] == '-' || s[i] == '\n') return 1;
    return 0;
}

/* Whether canonical_text changes text t beyond its whitespace: it has several words and a
 * volatile token, or a screenshot's transcription. Tested at each character as canonical_text
 * tests it, so the first token found is one canonical_text masks. */
static int has_volatile_text(const text_t *t, int ascii) {
    if (ascii) { /* as ascii_form finds a token: where one may start, the rest of a word skipped */
        const unsigned char *s = t->data;
        const Py_ssize_t n = t->n;
        if (!may_hold_token(s, n) || !several_words(t)) return 0;
        for (Py_ssize_t i = 0; i < n;) {
            unsigned char c = s[i], f = cls[c];
            if (f & C_DIGIT) {
                if (token_at(t, i) > i) return 1;
                i++;
            } else if (f & C_LETTER) {
                if ((f & C_HEX) && !(i > 0 && (cls[s[i - 1]] & C_WORD))
                    && hex_run(s, n, i, 8) == 8 && token_at(t, i) > i)
                    return 1;
                do i++; /* the letters after a word character start no token */
                while (i < n && (cls[s[i]] & C_LETTER));
            } else {
                if (c == '\n' && screen_text_at(t, i + 1)) return 1;
                i++;
            }
        }
        return 0;
    }
    if (!several_words(t)) return 0;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        Py_UCS4 c = ch(t, i);
        if (c == '\n') {
            if (screen_text_at(t, i + 1)) return 1;
        } else if (char_is(c, C_HEX | C_DIGIT) && token_at(t, i) > i) {
            return 1;
        }
    }
    return 0;
}

/* Write a result's string value s in its text form when that masks something (as
 * _form._text_values reads a string of several words: canonical_text). Returns 1 when s needs
 * no masking (the caller writes it as it is), 0 when written, -1 on an error. */
static int put_form(walk_t *w, buf_t *b, const span_t *s) {
    text_t t = {s->data, s->kind, s->n};
    if (!w->result || !has_volatile_text(&t, s->ascii && s->kind == PyUnicode_1BYTE_KIND))
        return 1;
    PyObject *str = PyUnicode_FromKindAndData(s->kind, s->data, s->n);
    if (str == NULL) return -1;
    PyObject *form = canonical_text(NULL, str);
    Py_DECREF(str);
    if (form == NULL) return -1;
    int rc = put_string(w, b, form);
    Py_DECREF(form);
    return rc;
}

static int put_value(walk_t *w, buf_t *b, PyObject *value, int depth);

static inline int has_datetime_str(PyObject *str) {
    span_t s = span_of(str);
    return has_datetime(&s);
}

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
            if (found == 1 || (found == 2 && PyUnicode_CheckExact(value) && has_datetime_str(value))) {
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

/* A float as its 64 bits in hex after '~': one text per value (-0.0 apart from 0.0, as the
 * Python path writes them), never the text of an int, and no float formatting. */
static int put_float(buf_t *b, double d) {
    unsigned long long bits;
    memcpy(&bits, &d, sizeof bits);
    char s[17];
    s[0] = '~';
    for (int k = 15; k >= 1; k -= 2) { /* a byte's two hex digits at a time */
        memcpy(s + k, hex_pairs + 2 * (bits & 0xFF), 2);
        bits >>= 8;
    }
    return put(b, s, 17);
}

static int put_value(walk_t *w, buf_t *b, PyObject *value, int depth) {
    if (w->bail) return 0;
    PyTypeObject *type = Py_TYPE(value);
    if (type == &PyUnicode_Type) {
        if (PyUnicode_GET_LENGTH(value) > w->max_chars) {
            w->bail = 1;
            return 0;
        }
        if (w->result) {
            span_t s = span_of(value);
            int rc = put_form(w, b, &s);
            return rc == 1 ? put_span(w, b, &s) : rc;
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
    if (type == &PyFloat_Type) return put_float(b, PyFloat_AS_DOUBLE(value));
    w->bail = 1; /* not something a JSON parser returns */
    return 0;
}

/* *out = the int bound (max_chars), as a Py_ssize_t: one past what a str's length can reach
 * stands for itself (PY_SSIZE_T_MAX or MIN), as Python compares lengths with it. */
static int bound_of(PyObject *value, Py_ssize_t *out) {
    int overflow = 0;
    long long bound = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (bound == -1 && PyErr_Occurred()) return -1;
    *out = overflow > 0 || bound > PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX
           : overflow < 0 || bound < PY_SSIZE_T_MIN ? PY_SSIZE_T_MIN : (Py_ssize_t)bound;
    return 0;
}

/* The str of the text a walk wrote into b (wide: it may hold UTF-8 past ASCII). */
static PyObject *buf_text(const buf_t *b, int wide) {
    if (wide) return PyUnicode_DecodeUTF8(b->data, b->len, "strict");
    PyObject *out = PyUnicode_New(b->len, 127); /* ASCII: copied, not decoded */
    if (out != NULL) memcpy(PyUnicode_1BYTE_DATA(out), b->data, (size_t)b->len);
    return out;
}

/* The canonical text of value as canonical_json gives it, or None: the walk of w. */
static PyObject *walk_text(walk_t *w, PyObject *value) {
    char stack[BUF_STACK];
    buf_t b = BUF_ON(stack);
    int rc = put_value(w, &b, value, 0);
    if (rc == 0 && !w->bail && has_address(b.data, b.len)) w->bail = 1; /* see put_span */
    PyObject *out = NULL;
    if (rc == 0 && w->bail) {
        out = Py_None;
        Py_INCREF(out);
    } else if (rc == 0) {
        out = buf_text(&b, w->wide);
    }
    buf_free(&b);
    return out;
}

static PyObject *canonical_json(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "canonical_json(value, cache, classify, max_chars, "
                                         "result) takes 5 arguments");
        return NULL;
    }
    walk_t w = {args[1], args[2], 0, PyObject_IsTrue(args[4]), 0, 0};
    if (bound_of(args[3], &w.max_chars) < 0) return NULL;
    if (w.cache == Py_None) w.cache = NULL;
    if (w.cache != NULL && !PyDict_CheckExact(w.cache)) {
        PyErr_SetString(PyExc_TypeError, "canonical_json(): cache must be a dict or None");
        return NULL;
    }
    return walk_text(&w, args[0]);
}

/* Parse text, a JSON object's text, with loads and append its canonical text to b: the parsed
 * dict (a new reference); Py_None (a new reference) where the Python path must sign it (not an
 * object's text, one loads rejects with a ValueError, or one the walk leaves to Python); NULL
 * with an exception set on an error. */
static PyObject *args_into(walk_t *w, buf_t *b, PyObject *text, PyObject *loads) {
    if (!PyUnicode_CheckExact(text)) Py_RETURN_NONE;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (n == 0 || (n + 15) / 16 > w->max_chars || PyUnicode_READ_CHAR(text, 0) != '{')
        Py_RETURN_NONE; /* as canonical_args: up to max_chars * 16, which may overflow */
    PyObject *parsed = PyObject_CallOneArg(loads, text);
    if (parsed == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError)) return NULL;
        PyErr_Clear(); /* orjson.JSONDecodeError: the Python path reads it its way */
        Py_RETURN_NONE;
    }
    Py_ssize_t start = b->len;
    int rc = PyDict_CheckExact(parsed) ? put_value(w, b, parsed, 0) : (w->bail = 1, 0);
    if (rc == 0 && !w->bail && has_address(b->data + start, b->len - start))
        w->bail = 1; /* see put_span */
    if (rc < 0 || w->bail) {
        Py_DECREF(parsed);
        if (rc < 0) return NULL;
        Py_RETURN_NONE;
    }
    return parsed;
}

/* (a, b) with the references to a and b stolen (both released when the tuple is not made). */
static PyObject *pair_of(PyObject *a, PyObject *b) {
    PyObject *pair = a == NULL || b == NULL ? NULL : PyTuple_New(2);
    if (pair == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        return NULL;
    }
    PyTuple_SET_ITEM(pair, 0, a);
    PyTuple_SET_ITEM(pair, 1, b);
    return pair;
}

/* _args.canonical_args of a JSON object's text, in one call: (loads(text), its canonical text),
 * or None where the Python path must sign it (see args_into). */
static PyObject *canonical_args(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "canonical_args(text, max_chars, loads) takes 3 "
                                         "arguments");
        return NULL;
    }
    walk_t w = {NULL, NULL, 0, 0, 0, 0};
    if (bound_of(args[1], &w.max_chars) < 0) return NULL;
    char stack[BUF_STACK];
    buf_t b = BUF_ON(stack);
    PyObject *parsed = args_into(&w, &b, args[0], args[2]);
    PyObject *out = parsed == NULL || parsed == Py_None ? parsed
                    : pair_of(parsed, buf_text(&b, w.wide));
    buf_free(&b);
    return out;
}

/* Whether a dict of arguments of two keys or more has a key of _args.NARRATION_KEYS (the same
 * list: tests/test_accel.py checks it). Such arguments are signed in Python, which drops the
 * narration beside an action (without_narration); the rest, most, cost this one pass over
 * the keys' lengths. */
static int narrates(PyObject *dict) {
    if (PyDict_GET_SIZE(dict) < 2) return 0;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key) || !PyUnicode_IS_ASCII(key)) continue;
        const char *s = (const char *)PyUnicode_DATA(key);
        switch (PyUnicode_GET_LENGTH(key)) {
        case 4: if (memcmp(s, "step", 4) == 0) return 1; break;
        case 7: if (memcmp(s, "thought", 7) == 0) return 1; break;
        case 8: if (memcmp(s, "thoughts", 8) == 0) return 1; break;
        case 9:
            if (memcmp(s, "reasoning", 9) == 0 || memcmp(s, "rationale", 9) == 0) return 1;
            break;
        case 11: if (memcmp(s, "explanation", 11) == 0) return 1; break;
        case 13: if (memcmp(s, "justification", 13) == 0) return 1; break;
        default: break;
        }
    }
    return 0;
}

/* _args.call_signature of a tool and a JSON object's text, in one call: (loads(text), the
 * digest of the tool's name, a NUL and the text's canonical text), the same digest as hashing
 * the UTF-8 of tool + "\0" + canonical_args(text)[1]; None where the Python path must sign it
 * (a tool that is not a str, what canonical_args leaves to it, and arguments that narrates). */
static PyObject *sign_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "sign_call(tool, text, max_chars, loads, hexdigest) "
                                         "takes 5 arguments");
        return NULL;
    }
    PyObject *tool = args[0];
    walk_t w = {NULL, NULL, 0, 0, 0, 0};
    if (bound_of(args[2], &w.max_chars) < 0) return NULL;
    if (!PyUnicode_CheckExact(tool)) Py_RETURN_NONE;
    PyObject *encoded = NULL; /* a non-ASCII name's UTF-8, lone surrogates passed through */
    const char *name = (const char *)PyUnicode_DATA(tool);
    Py_ssize_t name_len = PyUnicode_GET_LENGTH(tool);
    if (!PyUnicode_IS_ASCII(tool)) {
        encoded = PyUnicode_AsEncodedString(tool, "utf-8", "surrogatepass");
        if (encoded == NULL) return NULL;
        name = PyBytes_AS_STRING(encoded);
        name_len = PyBytes_GET_SIZE(encoded);
    }
    char stack[BUF_STACK];
    buf_t b = BUF_ON(stack);
    PyObject *parsed = NULL, *digest = NULL;
    if (put(&b, name, name_len) == 0 && putc1(&b, '\0') == 0)
        parsed = args_into(&w, &b, args[1], args[3]);
    Py_XDECREF(encoded);
    if (parsed == NULL || parsed == Py_None) {
        buf_free(&b);
        return parsed;
    }
    if (narrates(parsed)) {
        Py_DECREF(parsed);
        buf_free(&b);
        Py_RETURN_NONE;
    }
    Py_ssize_t start = name_len + 1;
    PyObject *check = w.wide ? PyUnicode_DecodeUTF8(b.data + start, b.len - start, "strict")
                             : NULL; /* canonical_args's text: fails where it fails */
    PyObject *raw = !w.wide || check != NULL ? PyBytes_FromStringAndSize(b.data, b.len) : NULL;
    Py_XDECREF(check);
    if (raw != NULL) {
        digest = PyObject_CallOneArg(args[4], raw);
        Py_DECREF(raw);
    }
    buf_free(&b);
    return pair_of(parsed, digest);
}

/* ------------------------------------------------------------------------------------------ */
/* A result's canonical text and facts straight from its JSON text, in one pass.
 *
 * sign_result (below) reads a result's JSON object or array and writes what orjson.loads
 * followed by canonical_json(..., result=True) would write, without building the Python
 * objects: the volatile keys' members are checked and skipped, the others written with their
 * keys sorted. In the same pass it finds whether the result is empty (the rules of
 * _results._is_empty, on the value without its volatile keys) and where the top-level members
 * that the result's other facts read (error, status, state...) are in the text, so that only
 * those are parsed in Python. Anything orjson would not read as this walk does (a syntax
 * error, an escaped surrogate pair gone wrong, an integer of 19 digits or more, a float
 * orjson reads as infinity, a key given twice), and anything the walk of parsed values leaves
 * to the Python path, returns None: the caller takes that path, which gives the same signature
 * as before. tests/test_accel.py compares the two on random texts and on every corpus result.
 */

#define QUIET_MAX_DEPTH 1000 /* a dropped member's nesting: orjson stops at 1024 */

typedef struct {
    walk_t w;
    const unsigned char *s; /* the text: a str of one byte per character (Latin-1) */
    Py_ssize_t n, i;
    Py_UCS4 *scratch; /* a string decoded from its escapes */
    Py_ssize_t scap;
    int quiet;        /* inside a dropped member: read, write nothing, judge nothing */
    struct memo *memo; /* the classes of keys seen before, or NULL */
    PyObject *facts;  /* (key, start, end) of the top-level members the facts read */
    PyObject *matcher; /* the VolatileMatcher: w.cache and w.classify are its own, fetched
                          (new references) when the memo does not know a key */
} parse_t;

typedef struct {
    const unsigned char *key;
    Py_ssize_t len;
    Py_ssize_t from, to; /* its ',"key":value' in the output; from == -1: dropped */
    int ascii, plain; /* as read_string found the key (span_t) */
    uint64_t head; /* its first 8 bytes, zeros past its end, first byte highest: keys whose
                      heads differ sort as their heads do */
} member_t;

/* --- the classes of keys, by their bytes ---
 * A VolatileMatcher's cache maps a key to its class; reaching it from bytes means a str per key
 * and its hash. A memo per cache (it holds a reference, so the cache's identity stays its own)
 * answers from the bytes: at most MEMOS caches, MEMO_KEYS keys each, in MEMO_BYTES of text. */
#define MEMOS 4
#define MEMO_SLOTS 8192
#define MEMO_KEYS 4096
#define MEMO_BYTES 65536

typedef struct memo {
    PyObject *owner;
    Py_ssize_t keys, used;
    struct {
        unsigned long long hash;
        uint64_t first; /* the key's first 8 bytes (key_word) */
        int off, len, cls; /* len == -1: empty */
    } slot[MEMO_SLOTS];
    unsigned char bytes[MEMO_BYTES];
} memo_t;

static memo_t *memos[MEMOS];

static memo_t *memo_for(PyObject *owner) {
    for (int k = 0; k < MEMOS; k++) {
        if (memos[k] == NULL) {
            memo_t *m = PyMem_Calloc(1, sizeof(memo_t));
            if (m == NULL) return NULL; /* no memo: the keys are looked up in the cache */
            for (int j = 0; j < MEMO_SLOTS; j++) m->slot[j].len = -1;
            Py_INCREF(owner);
            m->owner = owner;
            memos[k] = m;
            return m;
        }
        if (memos[k]->owner == owner) return memos[k];
    }
    return NULL;
}

#define MEMO_BITS 13 /* MEMO_SLOTS == 1 << MEMO_BITS */

/* x with its bytes in the other order: a little-endian word's first byte becomes its highest. */
static inline uint64_t byte_swap(uint64_t x) {
#if defined(__GNUC__)
    return __builtin_bswap64(x);
#else
    uint64_t y = 0;
    for (int k = 0; k < 8; k++, x >>= 8) y = y << 8 | (x & 0xFF);
    return y;
#endif
}

/* The bytes b[k:k + 8] of a key b[0:n] (k < n) in the text, as a little-endian word with
 * zeros past n: 8 bytes read at once where the text has them, one at a time near its end. */
static inline uint64_t key_word(const parse_t *p, const unsigned char *b, Py_ssize_t k,
                                Py_ssize_t n) {
    Py_ssize_t left = n - k;
    uint64_t w = 0;
    if (SWAR && b + k + 8 <= p->s + p->n) {
        memcpy(&w, b + k, 8);
        return left < 8 ? w & ((1ULL << (8 * left)) - 1) : w;
    }
    for (Py_ssize_t j = (left < 8 ? left : 8) - 1; j >= 0; j--) w = w << 8 | b[k + j];
    return w;
}

/* A key's hash, from its first word (key_word) and the next ones: the memo's slots are its
 * top MEMO_BITS bits. */
static inline unsigned long long key_hash(const parse_t *p, const unsigned char *b,
                                          Py_ssize_t n, uint64_t first) {
    const unsigned long long odd = 0x9E3779B97F4A7C15ULL;
    unsigned long long h = (first ^ (unsigned long long)n) * odd;
    for (Py_ssize_t k = 8; k < n; k += 8) h = (h ^ (h >> 29) ^ key_word(p, b, k, n)) * odd;
    return h;
}

/* Whether the memo's slot j holds the key b[0:n] of first word first and hash h. */
static inline int memo_holds(const memo_t *m, Py_ssize_t j, const unsigned char *b,
                             Py_ssize_t n, uint64_t first, unsigned long long h) {
    return m->slot[j].hash == h && m->slot[j].len == n && m->slot[j].first == first
           && (n <= 8 || memcmp(m->bytes + m->slot[j].off + 8, b + 8, (size_t)(n - 8)) == 0);
}

/* The class of the key b[0:n] (Latin-1, in the text; first: key_word(p, b, 0, n)): from the
 * memo, else from the cache (filling both). */
static int class_of(parse_t *p, const unsigned char *b, Py_ssize_t n, uint64_t first) {
    memo_t *m = p->memo;
    unsigned long long h = key_hash(p, b, n, first);
    if (m != NULL) {
        for (Py_ssize_t j = (Py_ssize_t)(h >> (64 - MEMO_BITS));; j = (j + 1) & (MEMO_SLOTS - 1)) {
            if (m->slot[j].len < 0) break;
            if (memo_holds(m, j, b, n, first, h)) return m->slot[j].cls;
        }
    }
    if (p->w.cache == NULL) {
        p->w.cache = PyObject_GetAttrString(p->matcher, "cache");
        if (p->w.cache == NULL) return -1;
        p->w.classify = PyObject_GetAttrString(p->matcher, "classify");
        if (p->w.classify == NULL) return -1;
        if (!PyDict_CheckExact(p->w.cache)) {
            PyErr_SetString(PyExc_TypeError, "sign_result(): the matcher's cache is not a dict");
            return -1;
        }
    }
    PyObject *key = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, b, n);
    if (key == NULL) return -1;
    int found = key_class(&p->w, key);
    Py_DECREF(key);
    if (found < 0 || m == NULL || m->keys >= MEMO_KEYS || m->used + n > MEMO_BYTES) return found;
    /* classify may have run Python code: probe again before taking a slot */
    for (Py_ssize_t j = (Py_ssize_t)(h >> (64 - MEMO_BITS));; j = (j + 1) & (MEMO_SLOTS - 1)) {
        if (m->slot[j].len < 0) {
            memcpy(m->bytes + m->used, b, (size_t)n);
            m->slot[j].hash = h;
            m->slot[j].first = first;
            m->slot[j].off = (int)m->used;
            m->slot[j].len = (int)n;
            m->slot[j].cls = found;
            m->used += n;
            m->keys++;
            break;
        }
        if (memo_holds(m, j, b, n, first, h)) break;
    }
    return found;
}

/* --- reading --- */
static inline unsigned char at_(const parse_t *p, Py_ssize_t i) { return i < p->n ? p->s[i] : 0; }

static inline void skip_ws(parse_t *p) {
    const unsigned char *s = p->s;
    Py_ssize_t i = p->i, n = p->n;
    if (i < n && s[i] > ' ') return; /* compact JSON: no whitespace between tokens */
    while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) i++;
    p->i = i;
}

static int hex4(const parse_t *p, Py_ssize_t i, Py_UCS4 *out) {
    Py_UCS4 v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char c = at_(p, i + k);
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        v = v * 16 + (Py_UCS4)d;
    }
    *out = v;
    return 1;
}

/* The high bit of each byte of x that is 0, and perhaps of some bytes above one that is 0
 * (bytes 0x01 there): exact as to whether x has a 0 byte, and never missing one. */
static inline uint64_t zero_bytes(uint64_t x) { return (x - ONES) & ~x & HIGHS; }

/* The bytes of x that end a run of plain characters in a JSON string (the bytes of C_STRING
 * but the space: '"', '\\', a control character, or a byte past ASCII), as zero_bytes marks
 * them: the first one marked is the first one, and none is missed. */
static inline uint64_t string_stops(uint64_t x) {
    return zero_bytes(x ^ (ONES * '"')) | zero_bytes(x ^ (ONES * '\\'))
           | ((x - ONES * 0x20) & ~x & HIGHS) | (x & HIGHS);
}

/* Read the string at p->i (its opening quote) into *s: the text itself when it has no escape,
 * else its characters decoded into p->scratch (valid until the next string is read). Returns
 * -1 on an error, 0 with w.bail set when orjson would not read it, 1 when read. */
static int read_any_string(parse_t *p, span_t *out) {
    const unsigned char *s = p->s;
    Py_ssize_t start = ++p->i, j = start, n = p->n;
    int escaped = 0, high = 0, plain = 1;
    while (1) {
        j = wide_run(s, j, n, &plain); /* at a byte that ends the run, or near the end */
        /* 8 bytes at a time while none ends the run: two spaces in a row make it not plain */
        while (SWAR && (!WIDE || j + 16 > n) && j + 8 <= n) {
            uint64_t x;
            memcpy(&x, s + j, 8);
            uint64_t spaces = zero_bytes(x ^ (ONES * ' ')), stops = string_stops(x);
            uint64_t doubled = spaces & ((spaces << 8) | (s[j - 1] == ' ' ? 0x80 : 0));
            if (stops) { /* its first byte is the first that ends the run */
                Py_ssize_t k = first_byte(stops);
                if (doubled & ((1ULL << (8 * k)) - 1)) plain = 0;
                j += k;
                break;
            }
            if (doubled) plain = 0;
            j += 8;
        }
        while (j < n && !(cls[s[j]] & C_STRING)) j++;
        if (j >= n) goto bail;
        unsigned char c = s[j];
        if (c == ' ') { /* plain: single spaces between words */
            if (j == start || s[j - 1] == ' ') plain = 0;
            j++;
            continue;
        }
        if (c == '"') break;
        if (c < 0x20) goto bail; /* orjson rejects a raw control character */
        if (c >= 0x80) {
            high = 1;
            j++;
            continue;
        }
        escaped = 1; /* a backslash */
        unsigned char e = at_(p, j + 1);
        Py_UCS4 v;
        if (e == 'u') {
            if (!hex4(p, j + 2, &v)) goto bail;
            j += 6;
            if (v >= 0xDC00 && v <= 0xDFFF) goto bail;
            if (v >= 0xD800 && v <= 0xDBFF) {
                Py_UCS4 low;
                if (at_(p, j) != '\\' || at_(p, j + 1) != 'u' || !hex4(p, j + 2, &low)
                    || low < 0xDC00 || low > 0xDFFF)
                    goto bail;
                j += 6;
            }
            continue;
        }
        if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r'
            && e != 't')
            goto bail;
        j += 2;
    }
    if (j > start && (s[j - 1] == ' ' || s[start] == ' ')) plain = 0;
    p->i = j + 1;
    if (!escaped) {
        out->data = s + start;
        out->kind = PyUnicode_1BYTE_KIND;
        out->n = j - start;
        out->ascii = !high;
        out->plain = !high && plain;
        return 1;
    }
    if (j - start > p->scap) {
        Py_UCS4 *more = PyMem_Realloc(p->scratch, sizeof(Py_UCS4) * (size_t)(j - start));
        if (more == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->scratch = more;
        p->scap = j - start;
    }
    Py_ssize_t o = 0;
    for (Py_ssize_t k = start; k < j;) {
        Py_UCS4 c = s[k];
        if (c != '\\') {
            p->scratch[o++] = c;
            k++;
            continue;
        }
        unsigned char e = s[k + 1];
        Py_UCS4 v = 0;
        if (e == 'u') {
            hex4(p, k + 2, &v);
            k += 6;
            if (v >= 0xD800 && v <= 0xDBFF) {
                Py_UCS4 low = 0;
                hex4(p, k + 2, &low);
                v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
                k += 6;
            }
        } else {
            v = e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r'
              : e == 't' ? '\t' : e;
            k += 2;
        }
        if (v > 127) high = 1;
        p->scratch[o++] = v;
    }
    out->data = p->scratch;
    out->kind = PyUnicode_4BYTE_KIND;
    out->n = o;
    out->ascii = !high;
    out->plain = 0;
    return 1;
bail:
    p->w.bail = 1;
    return 0;
}

/* read_any_string of most strings: ASCII with no escape, read 16 bytes at a time up to their
 * closing quote. */
static inline int read_string(parse_t *p, span_t *out) {
    const unsigned char *s = p->s;
    Py_ssize_t start = p->i + 1, n = p->n;
    int plain = 1;
    Py_ssize_t j = wide_run(s, start, n, &plain);
    if (!(j < n && s[j] == '"')) return read_any_string(p, out);
    out->data = s + start;
    out->kind = PyUnicode_1BYTE_KIND;
    out->n = j - start;
    out->ascii = 1;
    out->plain = plain && !(j > start && (s[j - 1] == ' ' || s[start] == ' '));
    p->i = j + 1;
    return 1;
}

static const char *const empty_texts[] = {
    "", "none", "null", "no results", "no result", "no results found", "nothing found",
    "not found", "0 results", "no matches", "no match", "no data", "empty", "[]", "{}",
    "no files found", "no matches found", "no files matched", "no files matched the pattern",
    "no matching files", "no matching files found", NULL};
#define EMPTY_TEXT_MAX 28 /* the longest of them */

static inline int stripped(Py_UCS4 c) { return c == ' ' || c == '.' || c == '!'; }

/* _results._is_empty of a string: shorter than 40 and, stripped of " .!" and lowered, one of
 * _EMPTY_TEXTS. A string with a character past ASCII is never one (of those, only the Kelvin
 * sign lowers to an ASCII letter, k, and no empty text has a k). */
static int string_empty(const span_t *s) {
    if (s->n >= 40 || !s->ascii) return 0;
    if (s->n) { /* what an empty text, its " .!" stripped, starts with (most strings not) */
        Py_UCS4 c = PyUnicode_READ(s->kind, s->data, 0) | 0x20; /* '[' as '{', N as n */
        if (c != ' ' && c != '.' && c != '!' && c != 'n' && c != 'e' && c != '0' && c != '{')
            return 0;
    }
    Py_ssize_t a = 0, z = s->n;
    while (a < z && stripped(PyUnicode_READ(s->kind, s->data, a))) a++;
    while (z > a && stripped(PyUnicode_READ(s->kind, s->data, z - 1))) z--;
    if (z - a > EMPTY_TEXT_MAX) return 0;
    if (z > a) { /* every empty text starts with n, e, 0, '[' or '{' (lowered: | 0x20) */
        Py_UCS4 first = PyUnicode_READ(s->kind, s->data, a) | 0x20;
        if (first != 'n' && first != 'e' && first != '0' && first != '{') return 0;
    }
    char low[EMPTY_TEXT_MAX];
    for (Py_ssize_t k = a; k < z; k++) {
        Py_UCS4 c = PyUnicode_READ(s->kind, s->data, k);
        low[k - a] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    for (const char *const *t = empty_texts; *t; t++)
        if ((*t)[0] == (z > a ? low[0] : 0) && (Py_ssize_t)strlen(*t) == z - a
            && memcmp(*t, low, (size_t)(z - a)) == 0)
            return 1;
    return 0;
}

static const struct {
    const char *key;
    Py_ssize_t len;
} fact_keys[] = {
#define FACT(k) {k, sizeof k - 1}
    FACT("error"), FACT("status"), FACT("status_code"), FACT("statusCode"), FACT("code"),
    FACT("ok"), FACT("success"), FACT("message"), FACT("detail"), FACT("error_message"),
    FACT("state"), FACT("phase"), {NULL, 0}};
#undef FACT

static int is_fact_key(const unsigned char *k, Py_ssize_t n) {
    if (n < 2 || !strchr("cdemops", k[0])) return 0; /* what the fact keys start with */
    for (int t = 0; fact_keys[t].key; t++)
        if (fact_keys[t].len == n && memcmp(fact_keys[t].key, k, (size_t)n) == 0) return 1;
    return 0;
}

static int parse_value(parse_t *p, buf_t *b, int depth, int in_mapping, int *empty);

/* The double nearest the decimal u[0:n] (digits and one '.', 15 digits at most), without
 * strtod: the digits as an integer and the power of ten are both exact doubles (below 2**53
 * and 1e22), and IEEE division rounds their quotient correctly (Clinger's fast path). A
 * result's scores and prices are such numbers. */
static double short_decimal(const unsigned char *u, Py_ssize_t n) {
    static const double tens[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
                                  1e11, 1e12, 1e13, 1e14, 1e15};
    uint64_t digits = 0;
    int fraction = 0, after = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (u[k] == '.') {
            after = 1;
            continue;
        }
        digits = digits * 10 + (uint64_t)(u[k] - '0');
        fraction += after;
    }
    return (double)digits / tens[fraction];
}

/* A number, written as the walk writes what orjson reads: an integer in decimal (-0 as 0), a
 * float as its 64 bits. Integers of 19 digits or more, and floats that overflow, bail. */
static int parse_number(parse_t *p, buf_t *b, int in_mapping, int *empty) {
    const unsigned char *s = p->s;
    Py_ssize_t start = p->i, j = start;
    if (at_(p, j) == '-') j++;
    Py_ssize_t first = j;
    if (at_(p, j) == '0') j++;
    else if (at_(p, j) >= '1' && at_(p, j) <= '9') while (at_(p, j) >= '0' && at_(p, j) <= '9') j++;
    else goto bail;
    Py_ssize_t digits = j - first;
    int real = 0;
    if (at_(p, j) == '.') {
        real = 1;
        j++;
        if (!(at_(p, j) >= '0' && at_(p, j) <= '9')) goto bail;
        while (at_(p, j) >= '0' && at_(p, j) <= '9') j++;
    }
    Py_ssize_t plain_end = j; /* where the digits and the fraction end */
    if (at_(p, j) == 'e' || at_(p, j) == 'E') {
        real = 1;
        j++;
        if (at_(p, j) == '+' || at_(p, j) == '-') j++;
        if (!(at_(p, j) >= '0' && at_(p, j) <= '9')) goto bail;
        while (at_(p, j) >= '0' && at_(p, j) <= '9') j++;
    }
    p->i = j;
    if (!real) {
        if (digits > 18) goto bail; /* orjson reads up to 2**64 - 1 as int, beyond as float */
        int zero = digits == 1 && s[first] == '0';
        *empty = in_mapping && zero;
        if (p->quiet) return 0;
        return zero ? putc1(b, '0') : put(b, (const char *)s + start, j - start);
    }
    double d;
    if (SHORT_DECIMALS && plain_end == j && j - first <= 16) {
        d = short_decimal(s + first, j - first);
        if (first > start) d = -d; /* -0.0 too, as orjson reads it */
    } else {
        char lit[64];
        if (j - start >= (Py_ssize_t)sizeof lit) goto bail;
        memcpy(lit, s + start, (size_t)(j - start));
        lit[j - start] = 0;
        d = PyOS_string_to_double(lit, NULL, NULL);
        if (d == -1.0 && PyErr_Occurred()) return -1;
    }
    if (Py_IS_INFINITY(d)) goto bail; /* orjson: "number is infinity when parsed as double" */
    *empty = in_mapping && d == 0.0;
    return p->quiet ? 0 : put_float(b, d);
bail:
    p->w.bail = 1;
    return 0;
}

static int literal(parse_t *p, const char *word, Py_ssize_t n) {
    if (p->i + n > p->n || memcmp(p->s + p->i, word, (size_t)n) != 0) {
        p->w.bail = 1;
        return 0;
    }
    p->i += n;
    return 1;
}

/* Keys in code point order: their bytes are Latin-1, so byte order; their heads first. */
static inline int key_cmp(const member_t *a, const member_t *b) {
    if (a->head != b->head) return a->head < b->head ? -1 : 1;
    Py_ssize_t least = a->len < b->len ? a->len : b->len;
    int c = least > 8 ? memcmp(a->key + 8, b->key + 8, (size_t)(least - 8)) : 0;
    return c ? c : (a->len < b->len ? -1 : a->len > b->len);
}

static int by_member(const void *a, const void *b) { return key_cmp(a, b); }

static void sort_members(member_t *m, Py_ssize_t n) {
    if (n > 16) {
        qsort(m, (size_t)n, sizeof(member_t), by_member);
        return;
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        member_t item = m[i];
        Py_ssize_t j = i;
        while (j > 0 && key_cmp(&m[j - 1], &item) > 0) {
            m[j] = m[j - 1];
            j--;
        }
        m[j] = item;
    }
}

/* Write an object's kept members, each in b[start:] as ',"key":value' in the text's order, in
 * the order of their keys, with '{' and '}' around them. A key given twice (orjson keeps its
 * last value) bails. */
static int order_members(parse_t *p, buf_t *b, Py_ssize_t start, member_t *m, Py_ssize_t n) {
    int sorted = 1;
    for (Py_ssize_t k = 1; k < n && sorted; k++)
        if (key_cmp(&m[k - 1], &m[k]) >= 0) sorted = 0;
    if (!sorted) {
        sort_members(m, n);
        for (Py_ssize_t k = 1; k < n; k++)
            if (key_cmp(&m[k - 1], &m[k]) == 0) {
                p->w.bail = 1;
                return 0;
            }
    }
    Py_ssize_t kept = 0, last = -1;
    int in_place = 1;
    for (Py_ssize_t k = 0; k < n; k++)
        if (m[k].from >= 0) {
            if (m[k].from < last) in_place = 0;
            last = m[k].from;
            kept++;
        }
    if (kept == 0) {
        b->len = start;
        return put(b, "{}", 2);
    }
    if (!in_place) {
        Py_ssize_t size = b->len - start;
        char stack[1024];
        char *copy = size <= (Py_ssize_t)sizeof stack ? stack : PyMem_Malloc((size_t)size);
        if (copy == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(copy, b->data + start, (size_t)size);
        Py_ssize_t o = start;
        for (Py_ssize_t k = 0; k < n; k++) {
            if (m[k].from < 0) continue;
            Py_ssize_t len = m[k].to - m[k].from;
            memcpy(b->data + o, copy + (m[k].from - start), (size_t)len);
            o += len;
        }
        if (copy != stack) PyMem_Free(copy);
    }
    b->data[start] = '{';
    return putc1(b, '}');
}

/* Note where a top-level member the result's facts read is, for the caller to parse it. */
static int note_fact(parse_t *p, const member_t *m, Py_ssize_t start) {
    PyObject *key = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, m->key, m->len);
    if (key == NULL) return -1;
    PyObject *where = Py_BuildValue("(Nnn)", key, start, p->i);
    if (where == NULL) return -1;
    int rc = PyList_Append(p->facts, where);
    Py_DECREF(where);
    return rc;
}

/* Write ',"key":' for a kept member. */
static int put_key(parse_t *p, buf_t *b, const member_t *m) {
    span_t k = {m->key, PyUnicode_1BYTE_KIND, m->ascii, m->len, m->plain};
    if (putc1(b, ',') < 0
        || (m->plain ? put_plain(&p->w, b, m->key, m->len, p->s + p->n - m->key)
                     : put_span(&p->w, b, &k)) < 0)
        return -1;
    return p->w.bail ? 0 : putc1(b, ':');
}

/* After an item of a container: 1 when a ',' announces another, 0 at its end (close) or,
 * with w.bail set, at anything else. */
static int more_items(parse_t *p, unsigned char close) {
    skip_ws(p);
    unsigned char c = at_(p, p->i++);
    if (c == ',') {
        skip_ws(p);
        return 1;
    }
    if (c != close) p->w.bail = 1;
    return 0;
}

static int parse_object(parse_t *p, buf_t *b, int depth, int *empty) {
    if (depth >= (p->quiet ? QUIET_MAX_DEPTH : MAX_DEPTH)) {
        p->w.bail = 1;
        return 0;
    }
    p->i++;
    skip_ws(p);
    if (at_(p, p->i) == '}') {
        p->i++;
        *empty = 1;
        return p->quiet ? 0 : put(b, "{}", 2);
    }
    Py_ssize_t start = b->len, n = 0, cap = 32, kept = 0;
    member_t stack[32], *m = stack;
    int rc = 0, all_empty = 1;
    while (1) {
        if (at_(p, p->i) != '"') {
            p->w.bail = 1;
            break;
        }
        span_t key;
        rc = read_string(p, &key);
        if (rc <= 0) break;
        rc = 0;
        int found = 0;
        if (!p->quiet) {
            if (key.kind != PyUnicode_1BYTE_KIND) { /* an escape in a key: rare, left to Python */
                p->w.bail = 1;
                break;
            }
            if (n == cap) {
                member_t *more = PyMem_Malloc(sizeof(member_t) * (size_t)(cap * 2));
                if (more == NULL) {
                    PyErr_NoMemory();
                    rc = -1;
                    break;
                }
                memcpy(more, m, sizeof(member_t) * (size_t)n);
                if (m != stack) PyMem_Free(m);
                m = more;
                cap *= 2;
            }
            m[n].key = key.data;
            m[n].len = key.n;
            m[n].ascii = key.ascii;
            m[n].plain = key.plain;
            m[n].from = m[n].to = -1;
            uint64_t first = key_word(p, key.data, 0, key.n);
            m[n].head = byte_swap(first);
            if (++n > MAX_ITEMS) {
                p->w.bail = 1;
                break;
            }
            found = class_of(p, key.data, key.n, first);
            if (found < 0) {
                rc = -1;
                break;
            }
        }
        skip_ws(p);
        if (at_(p, p->i) != ':') {
            p->w.bail = 1;
            break;
        }
        p->i++;
        skip_ws(p);
        Py_ssize_t from = b->len, value_at = p->i;
        int item_empty = 1, keep = 1;
        if (p->quiet || found == 1) {
            int quiet = p->quiet;
            p->quiet = 1;
            rc = parse_value(p, b, depth + 1, 1, &item_empty);
            p->quiet = quiet;
            keep = 0;
        } else if (found == 2 && at_(p, p->i) == '"') {
            span_t value;
            rc = read_string(p, &value);
            if (rc <= 0) break;
            rc = 0;
            if (has_datetime(&value)) keep = 0; /* a date member holding a time: volatile */
            else if (value.n > p->w.max_chars) p->w.bail = 1;
            else {
                rc = put_key(p, b, &m[n - 1]);
                if (rc == 0 && !p->w.bail && (rc = put_form(&p->w, b, &value)) == 1)
                    rc = put_span(&p->w, b, &value);
                item_empty = string_empty(&value);
            }
        } else {
            rc = put_key(p, b, &m[n - 1]);
            if (rc == 0 && !p->w.bail) rc = parse_value(p, b, depth + 1, 1, &item_empty);
        }
        if (rc < 0 || p->w.bail) break;
        if (keep) {
            m[n - 1].from = from;
            m[n - 1].to = b->len;
            kept++;
            all_empty &= item_empty;
            if (depth == 0 && is_fact_key(m[n - 1].key, m[n - 1].len)
                && (rc = note_fact(p, &m[n - 1], value_at)) < 0)
                break;
        }
        if (!more_items(p, '}')) break;
    }
    if (rc == 0 && !p->w.bail && !p->quiet) {
        rc = order_members(p, b, start, m, n);
        /* _is_empty: a mapping two levels down is empty when it has no member left */
        *empty = depth >= 2 ? kept == 0 : all_empty;
    }
    if (m != stack) PyMem_Free(m);
    return rc;
}

static int parse_array(parse_t *p, buf_t *b, int depth, int *empty) {
    if (depth >= (p->quiet ? QUIET_MAX_DEPTH : MAX_DEPTH)) goto bail;
    p->i++;
    skip_ws(p);
    if (!p->quiet && putc1(b, '[') < 0) return -1;
    Py_ssize_t items = 0;
    int all_empty = 1;
    if (at_(p, p->i) == ']') {
        p->i++;
        *empty = 1;
        return p->quiet ? 0 : putc1(b, ']');
    }
    while (1) {
        if (items && !p->quiet && putc1(b, ',') < 0) return -1;
        int item_empty = 1;
        if (parse_value(p, b, depth + 1, 0, &item_empty) < 0) return -1;
        if (p->w.bail) return 0;
        all_empty &= item_empty;
        if (++items > MAX_ITEMS && !p->quiet) goto bail;
        if (!more_items(p, ']')) {
            if (p->w.bail) return 0;
            break;
        }
    }
    *empty = depth >= 2 ? items == 0 : all_empty;
    return p->quiet ? 0 : putc1(b, ']');
bail:
    p->w.bail = 1;
    return 0;
}

/* One value at p->i. depth: its container's depth, plus one (the top-level value is 0);
 * in_mapping: it is a member's value. *empty: whether _results._all_empty counts it empty. */
static int parse_value(parse_t *p, buf_t *b, int depth, int in_mapping, int *empty) {
    unsigned char c = at_(p, p->i);
    *empty = 0;
    if (c == '"') {
        span_t s;
        int rc = read_string(p, &s);
        if (rc <= 0 || p->quiet) return rc < 0 ? -1 : 0;
        if (s.n > p->w.max_chars) {
            p->w.bail = 1;
            return 0;
        }
        *empty = string_empty(&s);
        if (p->w.result && (rc = put_form(&p->w, b, &s)) != 1) return rc;
        return s.plain ? put_plain(&p->w, b, s.data, s.n, p->s + p->n - (const unsigned char *)s.data)
                       : put_span(&p->w, b, &s);
    }
    if (c == '{') return parse_object(p, b, depth, empty);
    if (c == '[') return parse_array(p, b, depth, empty);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, b, in_mapping, empty);
    if (c == 't') return literal(p, "true", 4) && !p->quiet ? put(b, "true", 4) : 0;
    if (c == 'f') return literal(p, "false", 5) && !p->quiet ? put(b, "false", 5) : 0;
    if (c == 'n') {
        *empty = 1;
        return literal(p, "null", 4) && !p->quiet ? put(b, "null", 4) : 0;
    }
    p->w.bail = 1;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* A result's signature and facts in one call (otel_loopguard.signature._results.analyze_result).
 *
 * A str result is read here whole: a JSON object or array as above, plain ASCII text as
 * canonical_text forms it; its digest is hexdigest (xxh3_64_hexdigest) of what the Python path
 * hashes, and its ResultInfo is built here. What the Python path alone signs returns None. */

static const char *const in_progress_words[] = {
    "in progress", "in_progress", "pending", "processing", "queued", "running", "started",
    "waiting", NULL};

/* _results._in_progress of a plain-text form (ASCII, no leading whitespace): its first 40
 * characters, lowered, start with one of the words. */
static int text_in_progress(const unsigned char *form, Py_ssize_t n) {
    for (const char *const *word = in_progress_words; *word; word++) {
        Py_ssize_t len = (Py_ssize_t)strlen(*word), k = 0;
        if (len > n) continue;
        while (k < len && (form[k] >= 'A' && form[k] <= 'Z' ? form[k] + 32 : form[k])
                              == (unsigned char)(*word)[k])
            k++;
        if (k == len) return 1;
    }
    return 0;
}

/* The slots of the ResultInfo type last seen (new references), in its fields' order: set
 * when the type is a class of exactly these four slots and no __post_init__. */
static const char *const info_names[4] = {"digest", "error", "in_progress", "empty"};
static PyObject *info_known, *info_slots[4];

static int learn_info(PyObject *info_type) {
    Py_CLEAR(info_known);
    for (int k = 0; k < 4; k++) Py_CLEAR(info_slots[k]);
    if (!PyType_Check(info_type)) return 0;
    PyObject *slots = PyObject_GetAttrString(info_type, "__slots__");
    if (slots == NULL) {
        PyErr_Clear();
        return 0;
    }
    int exact = PyTuple_CheckExact(slots) && PyTuple_GET_SIZE(slots) == 4;
    for (int k = 0; k < 4 && exact; k++) {
        PyObject *name = PyTuple_GET_ITEM(slots, k);
        exact = PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, info_names[k]) == 0;
    }
    Py_DECREF(slots);
    if (!exact || PyObject_HasAttrString(info_type, "__post_init__")) return 0;
    for (int k = 0; k < 4; k++) {
        PyObject *slot = PyObject_GetAttrString(info_type, info_names[k]);
        if (slot == NULL) return -1;
        info_slots[k] = slot;
        if (!Py_IS_TYPE(slot, &PyMemberDescr_Type)) {
            for (int j = 0; j <= k; j++) Py_CLEAR(info_slots[j]);
            return 0;
        }
    }
    Py_INCREF(info_type);
    info_known = info_type;
    return 0;
}

/* info_type(*fields). Why not a call: ResultInfo's __init__ is Python code (a dataclass's),
 * about half the instructions of signing a short result; a slotted class with no
 * __post_init__ is the same object made with object.__new__ and its four slots set. */
static PyObject *new_info(PyObject *info_type, PyObject *const fields[4]) {
    static PyObject *seen;
    if (info_type != seen) {
        if (learn_info(info_type) < 0) return NULL;
        seen = info_type; /* compared only; info_known holds the reference */
    }
    if (info_known != info_type) return PyObject_Vectorcall(info_type, fields, 4, NULL);
    PyTypeObject *type = (PyTypeObject *)info_type;
    PyObject *none = PyTuple_New(0);
    if (none == NULL) return NULL;
    PyObject *info = type->tp_new(type, none, NULL);
    Py_DECREF(none);
    for (int k = 0; k < 4 && info != NULL; k++)
        if (Py_TYPE(info_slots[k])->tp_descr_set(info_slots[k], info, fields[k]) < 0)
            Py_CLEAR(info);
    return info;
}

/* ResultInfo(digest, None, in_progress, empty) with digest = hexdigest(data[0:n]). */
static PyObject *result_info(PyObject *info_type, PyObject *hexdigest, const char *data,
                             Py_ssize_t n, int in_progress, int empty) {
    PyObject *raw = PyBytes_FromStringAndSize(data, n);
    if (raw == NULL) return NULL;
    PyObject *digest = PyObject_CallOneArg(hexdigest, raw);
    Py_DECREF(raw);
    if (digest == NULL) return NULL;
    PyObject *fields[4] = {digest, Py_None, in_progress ? Py_True : Py_False,
                           empty ? Py_True : Py_False};
    PyObject *info = new_info(info_type, fields);
    Py_DECREF(digest);
    return info;
}

#define TEXT_PREFIX "\0text:" /* what _results._text_info hashes before the form */
#define TEXT_PREFIX_LEN 6

/* The length of the "Chunk ID: 3f2a9c\n" line that heads Codex CLI's output of a command (a
 * fresh id on every call), or 0: _text.without_chunk_id's line ([0-9A-Za-z]{1,64}, \r?\n). */
static Py_ssize_t chunk_line(const unsigned char *s, Py_ssize_t n) {
    static const char head[] = "Chunk ID: ";
    const Py_ssize_t k = (Py_ssize_t)(sizeof head - 1);
    if (n <= k || memcmp(s, head, (size_t)k) != 0) return 0;
    Py_ssize_t j = k;
    while (j < n && j - k < 64 && (cls[s[j]] & C_WORD) && s[j] != '_') j++;
    if (j == k) return 0;
    if (j < n && s[j] == '\r') j++;
    return j < n && s[j] == '\n' ? j + 1 : 0;
}

static PyObject *sign_text(PyObject *text, Py_ssize_t max_chars, PyObject *info_type,
                           PyObject *hexdigest) {
    text_t t = {PyUnicode_DATA(text), PyUnicode_KIND(text), PyUnicode_GET_LENGTH(text)};
    Py_ssize_t skip = chunk_line(t.data, t.n); /* left out, as _results.analyze_result does */
    t.data = (const unsigned char *)t.data + skip;
    t.n -= skip;
    char stack[4096];
    size_t size = (size_t)t.n + TEXT_PREFIX_LEN + 8;
    char *buf = size <= sizeof stack ? stack : PyMem_Malloc(size);
    if (buf == NULL) return PyErr_NoMemory();
    memcpy(buf, TEXT_PREFIX, TEXT_PREFIX_LEN);
    unsigned char *form = (unsigned char *)buf + TEXT_PREFIX_LEN;
    Py_ssize_t n = ascii_form(&t, form);
    span_t whole = {form, PyUnicode_1BYTE_KIND, 1, n, 0};
    int facts = n <= max_chars; /* a longer text is not a short status */
    PyObject *info = result_info(info_type, hexdigest, buf, n + TEXT_PREFIX_LEN,
                                 facts && text_in_progress(form, n),
                                 facts && string_empty(&whole));
    if (buf != stack) PyMem_Free(buf);
    return info;
}

/* The JSON object or array of text (one byte per character), or None; see the part above. */
static PyObject *sign_json(PyObject *text, PyObject *matcher, Py_ssize_t max_chars,
                           PyObject *info_type, PyObject *hexdigest) {
    parse_t p = {{NULL, NULL, max_chars, 1, 0, 0}, PyUnicode_1BYTE_DATA(text),
                 PyUnicode_GET_LENGTH(text), 0, NULL, 0, 0, memo_for(matcher), NULL, matcher};
    skip_ws(&p);
    unsigned char first = at_(&p, p.i);
    if (first != '{' && first != '[') Py_RETURN_NONE;
    p.facts = first == '{' ? PyList_New(0) : NULL;
    if (first == '{' && p.facts == NULL) return NULL;
    char stack[BUF_STACK];
    buf_t b = BUF_ON(stack);
    PyObject *out = NULL;
    int empty = 0;
    if (grow(&b, p.n + 64) == 0 && parse_value(&p, &b, 0, 0, &empty) == 0) {
        skip_ws(&p);
        if (p.i != p.n) p.w.bail = 1; /* orjson: "unexpected content after document" */
        if (has_address(b.data, b.len)) p.w.bail = 1; /* the walk left this to the end */
        if (p.w.bail) {
            out = Py_None;
            Py_INCREF(out);
        } else if (p.facts == NULL || PyList_GET_SIZE(p.facts) == 0) {
            out = result_info(info_type, hexdigest, b.data, b.len, 0, empty);
        } else { /* the facts' members: parsed in Python (_signed_info) */
            PyObject *raw = PyBytes_FromStringAndSize(b.data, b.len);
            PyObject *digest = raw == NULL ? NULL : PyObject_CallOneArg(hexdigest, raw);
            Py_XDECREF(raw);
            PyObject *facts = digest == NULL ? NULL : PyList_AsTuple(p.facts);
            if (facts != NULL) out = Py_BuildValue("(OON)", digest, empty ? Py_True : Py_False,
                                                   facts);
            Py_XDECREF(digest);
        }
    }
    Py_XDECREF(p.facts);
    Py_XDECREF(p.w.cache);
    Py_XDECREF(p.w.classify);
    buf_free(&b);
    PyMem_Free(p.scratch);
    return out;
}

static PyObject *sign_result(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "sign_result(text: str, matcher, max_chars: int, "
                                         "info_type, hexdigest) takes 5 arguments");
        return NULL;
    }
    PyObject *text = args[0];
    Py_ssize_t max_chars;
    if (bound_of(args[2], &max_chars) < 0) return NULL;
    if (PyUnicode_KIND(text) != PyUnicode_1BYTE_KIND) Py_RETURN_NONE; /* wider: Python */
    const unsigned char *s = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0;
    while (i < n && s[i] < 128 && (cls[s[i]] & C_SPACE)) i++;
    if (i < n && (s[i] == '{' || s[i] == '[')) /* as _json_text tells JSON text */
        return (n + 15) / 16 <= max_chars /* n <= max_chars * 16, which may overflow */
               ? sign_json(text, args[1], max_chars, args[3], args[4])
               : (Py_INCREF(Py_None), Py_None);
    if (!PyUnicode_IS_ASCII(text)) Py_RETURN_NONE;
    return sign_text(text, max_chars, args[3], args[4]);
}

/* ------------------------------------------------------------------------------------------ */
/* Objects of slotted dataclasses, built without their __init__.
 *
 * A dataclass(slots=True)'s __init__ is Python code that sets each field in turn: for the
 * engine's Step (23 fields), built on every tool call, about 3,000 instructions, and 1,500 for
 * a Decision. new_slotted(cls, *values) makes the object cls(*values) makes for a class whose
 * __init__ only sets its __slots__ in order from every field's value (a slotted dataclass
 * without __post_init__, its own __slots__ and __dataclass_fields__ in its __dict__):
 * cls.__new__, and each slot set where its member descriptor would set it. A class of another
 * shape, a call with another number of values, or a class past the few remembered, is
 * called. */
#define SLOTTED_TYPES 4
#define SLOTTED_MAX 32

static struct {
    PyObject *type; /* a reference held for as long as the module lives */
    Py_ssize_t n;   /* its slots; -1: the class is called */
    Py_ssize_t offset[SLOTTED_MAX]; /* where each slot is in an object */
} slotted[SLOTTED_TYPES];

/* Fill entry e for type: where its slots are, in __slots__ order, or n = -1. Each must be a
 * writable object member (a __slots__ entry's descriptor), so that a new object's slot is an
 * empty pointer that new_slotted may set as the descriptor would. */
static int learn_slotted(int e, PyObject *type) {
    Py_INCREF(type);
    slotted[e].type = type;
    slotted[e].n = -1;
    if (!PyType_Check(type) || PyObject_HasAttrString(type, "__post_init__")) return 0;
    PyObject *own = ((PyTypeObject *)type)->tp_dict; /* a dataclass's own slots, not inherited */
    PyObject *names = PyDict_GetItemString(own, "__dataclass_fields__") == NULL ? NULL
                      : PyDict_GetItemString(own, "__slots__");
    if (names == NULL) return 0;
    Py_INCREF(names);
    Py_ssize_t n = PyTuple_CheckExact(names) ? PyTuple_GET_SIZE(names) : SLOTTED_MAX + 1;
    int fits = n <= SLOTTED_MAX;
    for (Py_ssize_t k = 0; k < n && fits; k++) {
        PyObject *name = PyTuple_GET_ITEM(names, k);
        PyObject *slot = PyUnicode_Check(name) ? PyObject_GetAttr(type, name) : NULL;
        if (slot == NULL && PyErr_Occurred()) {
            Py_DECREF(names);
            return -1;
        }
        PyMemberDef *member = slot != NULL && Py_IS_TYPE(slot, &PyMemberDescr_Type)
                              ? ((PyMemberDescrObject *)slot)->d_member : NULL;
        fits = member != NULL && member->type == T_OBJECT_EX && !(member->flags & READONLY);
        if (fits) slotted[e].offset[k] = member->offset;
        Py_XDECREF(slot); /* the class holds it */
    }
    Py_DECREF(names);
    if (fits) slotted[e].n = n;
    return 0;
}

static PyObject *new_slotted(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "new_slotted(cls, *values) takes a class");
        return NULL;
    }
    PyObject *type = args[0];
    int e = 0;
    while (e < SLOTTED_TYPES && slotted[e].type != NULL && slotted[e].type != type) e++;
    if (e < SLOTTED_TYPES && slotted[e].type == NULL && learn_slotted(e, type) < 0) return NULL;
    if (e == SLOTTED_TYPES || slotted[e].n != nargs - 1)
        return PyObject_Vectorcall(type, args + 1, (size_t)(nargs - 1), NULL);
    PyTypeObject *cls = (PyTypeObject *)type;
    PyObject *none = PyTuple_New(0);
    if (none == NULL) return NULL;
    PyObject *made = cls->tp_new(cls, none, NULL);
    Py_DECREF(none);
    if (made == NULL) return NULL;
    for (Py_ssize_t k = 0; k < nargs - 1; k++) { /* as the member descriptor sets it */
        PyObject **slot = (PyObject **)((char *)made + slotted[e].offset[k]);
        Py_XSETREF(*slot, Py_NewRef(args[k + 1]));
    }
    return made;
}

static PyMethodDef methods[] = {
    {"canonical_text", canonical_text, METH_O,
     "canonical_text(text) -> str: the canonical form of a plain-text result."},
    {"canonical_json", (PyCFunction)(void (*)(void))canonical_json, METH_FASTCALL,
     "canonical_json(value, cache, classify, max_chars, result) -> str | None: the canonical "
     "text of parsed JSON, its volatile keys (cache not None) deleted in place; None when the "
     "Python path must sign it."},
    {"canonical_args", (PyCFunction)(void (*)(void))canonical_args, METH_FASTCALL,
     "canonical_args(text, max_chars, loads) -> (dict, str) | None: a JSON object's text "
     "parsed by loads, and its canonical text; None when the Python path must sign it."},
    {"new_slotted", (PyCFunction)(void (*)(void))new_slotted, METH_FASTCALL,
     "new_slotted(cls, *values) -> cls(*values) for a slotted dataclass without __post_init__, "
     "given every field: its slots set without its __init__."},
    {"sign_call", (PyCFunction)(void (*)(void))sign_call, METH_FASTCALL,
     "sign_call(tool, text, max_chars, loads, hexdigest) -> (dict, str) | None: a JSON object's "
     "text parsed by loads, and the digest of the tool's name, a NUL and its canonical text; "
     "None when the Python path must sign it."},
    {"sign_result", (PyCFunction)(void (*)(void))sign_result, METH_FASTCALL,
     "sign_result(text, matcher, max_chars, info_type, hexdigest) -> ResultInfo | tuple | None: "
     "a str result's ResultInfo, or (digest, empty, ((key, start, end), ...)) when the facts "
     "of a JSON object's members must be read in Python; None when Python must sign it."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_accel", "Optional accelerator of the result and argument signatures.",
    -1, methods};

PyMODINIT_FUNC PyInit__accel(void) {
    init_classes();
    return PyModule_Create(&module);
}
