/* Optional C accelerator of the shell reader: ``ShellReader.analyze`` (``kinds/_shell.py``).

   ``Reader(rules, tables)`` binds a compiled command table (``compile_rules``) and the
   reader's constants, all defined in Python (``_shell._NATIVE_TABLES``): nothing of the table
   is repeated here. ``Reader.analyze(text, depth)`` returns the (kind, target) that the Python
   code returns for ``text``, or None for any text it leaves to that code, which stays the
   definition (``tests/test_shell_reader_native.py`` compares both on every command of the
   committed corpora and on random texts). It leaves to Python:

   * a text with a character past ASCII once its heredoc bodies are stripped (``re``'s ``\s``
     and ``\w`` and ``str.isspace`` would need Unicode tables there), or whose line opening a
     heredoc has one (a body may hold any character: ``strip_heredocs`` is done here too);
   * a ``case`` statement (``case WORD in`` and the ``;;``, ``;&``, ``;;&`` operators);
   * a table that is not what ``compile_rules`` makes (a rule that is not a tuple of a tuple
     of str, a tuple of str and a str; an index without its ``""`` entry), a kind missing
     from ``RANK``, a negative depth, ``find -exec`` nested more than 64 deep.

   The lexer is ``_lexer.strip_heredocs`` (``str.find`` and ``str.strip`` over the text, the
   ``_HEREDOC`` pattern over a line opening a heredoc), then ``_lexer._TOKEN`` read by hand:
   blanks, a comment, a plain word, a redirection, an operator or any other word (plain runs
   and quoted parts), in that order,
   then ``unquote`` (``_UNQUOTE`` and ``_DQ_ESCAPE``). Every word is a str object of the
   text's characters; the objects made while reading a text are held in one list until its
   outcome is made, so the functions below pass borrowed references. No buffer has a fixed
   size: the scratch buffer of unquoted words is as long as the text, arrays of words are
   allocated to their count. Thread-safe: a Reader holds no mutable state. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define BAIL 1
#define MAX_FIND_NESTING 64

typedef struct {
    PyObject_HEAD
    PyObject *rules;                 /* dict: command word -> index dict */
    PyObject *keywords, *not_commands, *wrappers, *wrapper_value_options, *run_words;
    PyObject *module_runners, *runners, *runner_global_options, *python_value_options;
    PyObject *shells, *special_names, *version_words, *exec_options, *global_value_options;
    PyObject *waits, *preparations, *rank, *writes, *normpath;
    long max_depth, max_nesting;
    unsigned char python_flags[128];
    int ready;                       /* __init__ completed: every table checked */
} Reader;

typedef struct { PyObject **v; Py_ssize_t n; } Args;   /* borrowed words */

typedef struct {
    Reader *r;
    PyObject *keep;      /* list owning every object made while reading */
    void **allocs;       /* arrays to free at the end */
    Py_ssize_t nallocs, capallocs;
    int find_nesting;
} Ctx;

static PyObject *s_mutating, *s_read, *s_poll, *s_default, *s_exempt, *s_wait, *s_empty;
static PyObject *s_python, *s_pip, *s_pypy, *s_heredoc, *s_newline;

/* ---------------------------------------------------------------- helpers */

static int
keep(Ctx *c, PyObject *o)   /* steals o; o stays alive (owned by c->keep) */
{
    if (o == NULL)
        return -1;
    int rc = PyList_Append(c->keep, o);
    Py_DECREF(o);
    return rc;
}

static void *
ctx_alloc(Ctx *c, Py_ssize_t count)   /* an array of count PyObject* freed at the end */
{
    if (c->nallocs == c->capallocs) {
        Py_ssize_t cap = c->capallocs ? c->capallocs * 2 : 16;
        void **grown = PyMem_Realloc(c->allocs, (size_t)cap * sizeof(void *));
        if (grown == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        c->allocs = grown;
        c->capallocs = cap;
    }
    void *p = PyMem_Malloc((size_t)(count > 0 ? count : 1) * sizeof(PyObject *));
    if (p == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    c->allocs[c->nallocs++] = p;
    return p;
}

static PyObject *
ascii_str(const unsigned char *s, Py_ssize_t n)   /* new reference */
{
    PyObject *o = PyUnicode_New(n, 127);
    if (o != NULL && n)
        memcpy(PyUnicode_1BYTE_DATA(o), s, (size_t)n);
    return o;
}

static int
eq(PyObject *a, PyObject *b)   /* two str objects */
{
    if (a == b)
        return 1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    if (n != PyUnicode_GET_LENGTH(b) || PyUnicode_KIND(a) != PyUnicode_KIND(b))
        return 0;
    return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * PyUnicode_KIND(a)) == 0;
}

static int
eq_litn(PyObject *s, const char *lit, size_t n)   /* a str equal to an ASCII literal */
{
    return (size_t)PyUnicode_GET_LENGTH(s) == n && PyUnicode_IS_ASCII(s)
           && memcmp(PyUnicode_1BYTE_DATA(s), lit, n) == 0;
}

#define eq_lit(s, lit) eq_litn((s), "" lit, sizeof(lit) - 1)

static int
starts_lit_at(PyObject *s, Py_ssize_t at, const char *lit)   /* s[at:].startswith(lit) */
{
    size_t n = strlen(lit);
    if (PyUnicode_GET_LENGTH(s) < at + (Py_ssize_t)n)
        return 0;
    int kind = PyUnicode_KIND(s);
    const void *d = PyUnicode_DATA(s);
    for (size_t i = 0; i < n; i++)
        if (PyUnicode_READ(kind, d, at + (Py_ssize_t)i) != (Py_UCS4)(unsigned char)lit[i])
            return 0;
    return 1;
}

static int
starts_lit(PyObject *s, const char *lit)
{
    return starts_lit_at(s, 0, lit);
}

static int
starts_with(PyObject *s, PyObject *prefix)   /* s.startswith(prefix), both str */
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(prefix);
    if (PyUnicode_GET_LENGTH(s) < n)
        return 0;
    int ks = PyUnicode_KIND(s), kp = PyUnicode_KIND(prefix);
    const void *ds = PyUnicode_DATA(s), *dp = PyUnicode_DATA(prefix);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyUnicode_READ(ks, ds, i) != PyUnicode_READ(kp, dp, i))
            return 0;
    return 1;
}

static int
has_char(PyObject *s, Py_UCS4 ch)
{
    int kind = PyUnicode_KIND(s);
    const void *d = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyUnicode_READ(kind, d, i) == ch)
            return 1;
    return 0;
}

static Py_UCS4
first_char(PyObject *s)   /* (Py_UCS4)-1 for "", which no character equals */
{
    return PyUnicode_GET_LENGTH(s) ? PyUnicode_READ_CHAR(s, 0) : (Py_UCS4)-1;
}

static int
contains(PyObject *set, PyObject *key)   /* 1, 0, -1 */
{
    return PySet_Contains(set, key);
}

static int
re_space(Py_UCS4 c)   /* re's \s and str.isspace over ASCII */
{
    return c == ' ' || (c >= 9 && c <= 13) || (c >= 28 && c <= 31);
}

static int
is_alpha(Py_UCS4 c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int
is_digit(Py_UCS4 c)
{
    return c >= '0' && c <= '9';
}

static int
is_word(Py_UCS4 c)   /* \w over ASCII */
{
    return is_alpha(c) || is_digit(c) || c == '_';
}

/* The functions below read words: str objects of ASCII characters (made from an ASCII text,
   or parts and joins of those), read through their 1-byte data. */

#define WDATA(w) ((const unsigned char *)PyUnicode_1BYTE_DATA(w))
#define WLEN(w) PyUnicode_GET_LENGTH(w)

static int
short_group(PyObject *w)   /* _SHORT_GROUP.fullmatch: -[A-Za-z]+ */
{
    if (!PyUnicode_IS_ASCII(w))
        return 0;
    Py_ssize_t n = WLEN(w);
    const unsigned char *s = WDATA(w);
    if (n < 2 || s[0] != '-')
        return 0;
    for (Py_ssize_t i = 1; i < n; i++)
        if (!is_alpha(s[i]))
            return 0;
    return 1;
}

static int
assignment(PyObject *w)   /* _ASSIGNMENT.match: NAME([...])?+?= at the start */
{
    Py_ssize_t n = WLEN(w), i = 0;
    const unsigned char *s = WDATA(w);
    if (n == 0 || !(is_alpha(s[0]) || s[0] == '_'))
        return 0;
    i = 1;
    while (i < n && is_word(s[i]))
        i++;
    if (i < n && s[i] == '[') {
        Py_ssize_t j = i + 1;
        while (j < n && s[j] != ']')
            j++;
        if (j < n) {   /* [..] then +?= ; else the group is skipped */
            Py_ssize_t k = j + 1;
            if (k < n && s[k] == '+')
                k++;
            if (k < n && s[k] == '=')
                return 1;
        }
    }
    if (i < n && s[i] == '+')
        i++;
    return i < n && s[i] == '=';
}

static int
path_like(PyObject *w)   /* _PATH_LIKE.fullmatch and not isdigit() */
{
    Py_ssize_t n = WLEN(w);
    const unsigned char *s = WDATA(w);
    if (n < 1 || n > 1024 || re_space(s[0]) || s[0] == '-')
        return 0;
    int digits = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (re_space(s[i]))
            return 0;
        if (!is_digit(s[i]))
            digits = 0;
    }
    return !digits;
}

static int
is_digits(PyObject *w)   /* str.isdigit over ASCII */
{
    Py_ssize_t n = WLEN(w);
    const unsigned char *s = WDATA(w);
    if (n == 0)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!is_digit(s[i]))
            return 0;
    return 1;
}

static int
relative_path(PyObject *w)   /* _RELATIVE_PATH.fullmatch: [\w.+-]+(?:/[\w.+-]*)* */
{
    Py_ssize_t n = WLEN(w);
    const unsigned char *s = WDATA(w);
    if (n == 0 || s[0] == '/')
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (!(is_word(c) || c == '.' || c == '+' || c == '-' || c == '/'))
            return 0;
    }
    return 1;
}

static PyObject *
substr(Ctx *c, PyObject *w, Py_ssize_t start, Py_ssize_t end)   /* borrowed (kept) */
{
    if (start == 0 && end == WLEN(w))
        return w;
    PyObject *o = ascii_str(WDATA(w) + start, end - start);
    return keep(c, o) < 0 ? NULL : o;
}

static PyObject *
join3(Ctx *c, PyObject *a, const char *mid, PyObject *b)   /* a + mid + b, borrowed (kept) */
{
    Py_ssize_t na = WLEN(a), nm = (Py_ssize_t)strlen(mid), nb = WLEN(b);
    PyObject *o = PyUnicode_New(na + nm + nb, 127);
    if (o == NULL)
        return NULL;
    unsigned char *d = PyUnicode_1BYTE_DATA(o);
    memcpy(d, WDATA(a), (size_t)na);
    memcpy(d + na, mid, (size_t)nm);
    memcpy(d + na + nm, WDATA(b), (size_t)nb);
    return keep(c, o) < 0 ? NULL : o;
}

static Args
slice(Args a, Py_ssize_t start)   /* a[start:] */
{
    Args out;
    if (start > a.n)
        start = a.n;
    out.v = a.v + start;
    out.n = a.n - start;
    return out;
}

/* ---------------------------------------------------------------- lexer */

typedef struct { PyObject *words, *writes; } Seg;   /* owned by c->keep */

typedef struct { Seg *v; Py_ssize_t n, cap; } Segs;

static int
segs_push(Segs *s, Seg seg)
{
    if (s->n == s->cap) {
        Py_ssize_t cap = s->cap ? s->cap * 2 : 8;
        Seg *grown = PyMem_Realloc(s->v, (size_t)cap * sizeof(Seg));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->v = grown;
        s->cap = cap;
    }
    s->v[s->n++] = seg;
    return 0;
}

static int
new_seg(Ctx *c, Seg *seg)
{
    seg->words = PyList_New(0);
    if (keep(c, seg->words) < 0)
        return -1;
    seg->writes = PyList_New(0);
    return keep(c, seg->writes);
}

enum { C_SPACE = 1, C_OPERATOR = 2, C_QUOTE = 4, C_BLANK = 8 };
static unsigned char char_class[128];   /* ASCII character -> C_* bits (set at import) */

static void
init_classes(void)
{
    for (int ch = 0; ch < 128; ch++) {
        unsigned char bits = 0;
        if (re_space((Py_UCS4)ch))
            bits |= C_SPACE | C_OPERATOR;   /* \s */
        if (ch && strchr(";&|()<>", ch))
            bits |= C_OPERATOR;            /* [\s;&|()<>] */
        if (ch && strchr("'\"\\", ch))
            bits |= C_QUOTE;
        if (ch && strchr(" \t\r\f\v", ch))
            bits |= C_BLANK;               /* _TOKEN's blanks before a token */
        char_class[ch] = bits;
    }
}

#define special_char(ch) (char_class[(ch)] & (C_OPERATOR | C_QUOTE))   /* [\s'"\\;&|()<>] */
#define operator_char(ch) (char_class[(ch)] & C_OPERATOR)              /* [\s;&|()<>] */

/* unquote(word) of s[0:n] into out (at most n characters); returns the length. */
static Py_ssize_t
unquote_into(const unsigned char *w, Py_ssize_t m, unsigned char *out)
{
    Py_ssize_t i = 0, o = 0;
    while (i < m) {
        unsigned char ch = w[i];
        if (ch == '\'') {
            i++;
            while (i < m && w[i] != '\'')
                out[o++] = w[i++];
            if (i < m)
                i++;
        } else if (ch == '"') {
            Py_ssize_t start = ++i;
            for (;;) {
                while (i < m && w[i] != '"' && w[i] != '\\')
                    i++;
                if (i < m && w[i] == '\\' && i + 1 < m) {
                    i += 2;
                    continue;
                }
                break;
            }
            for (Py_ssize_t k = start; k < i; k++) {   /* _DQ_ESCAPE */
                if (w[k] == '\\' && k + 1 < i && (w[k + 1] == '$' || w[k + 1] == '`'
                        || w[k + 1] == '"' || w[k + 1] == '\\' || w[k + 1] == '\n')) {
                    out[o++] = w[k + 1];
                    k++;
                } else {
                    out[o++] = w[k];
                }
            }
            if (i < m && w[i] == '"')
                i++;
        } else if (ch == '\\') {
            i++;
            if (i < m)
                out[o++] = w[i++];
        } else {
            out[o++] = ch;
            i++;
        }
    }
    return o;
}

static int
writes_file(const unsigned char *s, Py_ssize_t rs, Py_ssize_t re_, PyObject *word, Ctx *c)
{
    if (starts_lit(word, "/dev/"))
        return 0;
    Py_ssize_t k = rs;
    while (k < re_ && is_digit(s[k]))
        k++;
    PyObject *op = ascii_str(s + k, re_ - k);
    if (op == NULL)
        return -1;
    int in = contains(c->r->writes, op);
    Py_DECREF(op);
    if (in != 0)
        return in;
    return re_ - rs >= 2 && s[re_ - 2] == '>' && s[re_ - 1] == '&' && !is_digits(word)
           && !eq_lit(word, "-");
}

/* The segments of s[0:n] (an ASCII text): 0, BAIL or -1. */
static int
lex(Ctx *c, const unsigned char *s, Py_ssize_t n, Segs *out)
{
    Segs outer = {NULL, 0, 0};
    Seg cur;
    int rc = -1;
    Py_ssize_t pos = 0, rs = 0, rend = 0;   /* the redirection waiting: s[rs:rend] */
    int redirect = 0;
    unsigned char *scratch = PyMem_Malloc((size_t)n + 1);
    if (scratch == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (new_seg(c, &cur) < 0)
        goto done;
    for (;;) {
        while (pos < n && (char_class[s[pos]] & C_BLANK))
            pos++;
        if (pos >= n)
            break;
        unsigned char ch = s[pos];
        if (ch >= 28 && ch <= 31) {   /* \s, but no blank: _TOKEN matches nothing here */
            pos++;
            continue;
        }
        Py_ssize_t start = pos, end;
        PyObject *word = NULL;
        if (ch == '#') {   /* a comment */
            while (pos < n && s[pos] != '\n')
                pos++;
            continue;
        }
        if (!special_char(ch) && !is_digit(ch)) {   /* a plain word? */
            end = pos + 1;
            while (end < n && !special_char(s[end]))
                end++;
            if (end == n || operator_char(s[end])) {
                word = ascii_str(s + start, end - start);
                if (keep(c, word) < 0)
                    goto done;
                pos = end;
                goto got_word;
            }
        }
        {   /* a redirection? */
            Py_ssize_t j = pos;
            while (j < n && is_digit(s[j]))
                j++;
            end = -1;
            if (j < n && s[j] == '>') {
                end = (j + 1 < n && (s[j + 1] == '>' || s[j + 1] == '|' || s[j + 1] == '&'))
                      ? j + 2 : j + 1;
            } else if (j < n && s[j] == '<') {
                if (j + 2 < n && s[j + 1] == '<' && (s[j + 2] == '<' || s[j + 2] == '-'))
                    end = j + 3;
                else if (j + 1 < n && (s[j + 1] == '<' || s[j + 1] == '>' || s[j + 1] == '&'))
                    end = j + 2;
                else
                    end = j + 1;
            } else if (ch == '&' && pos + 1 < n && s[pos + 1] == '>') {
                end = (pos + 2 < n && s[pos + 2] == '>') ? pos + 3 : pos + 2;
            }
            if (end >= 0) {
                redirect = 1;
                rs = start;
                rend = end;
                pos = end;
                continue;
            }
        }
        if (ch == '\n' || ch == '&' || ch == '|' || ch == ';' || ch == '(' || ch == ')') {
            end = pos + 1;   /* an operator */
            if (ch == '&' && end < n && s[end] == '&')
                end++;
            else if (ch == '|' && end < n && (s[end] == '|' || s[end] == '&'))
                end++;
            else if (ch == ';' && end < n && (s[end] == ';' || s[end] == '&')) {
                rc = BAIL;   /* ;; ;& ;;& : the patterns of a case */
                goto done;
            }
            pos = end;
            redirect = 0;
            if (ch == '(' && end - start == 1 && outer.n < c->r->max_nesting) {
                if (segs_push(&outer, cur) < 0 || new_seg(c, &cur) < 0)
                    goto done;
                continue;
            }
            if (PyList_GET_SIZE(cur.words) || PyList_GET_SIZE(cur.writes))
                if (segs_push(out, cur) < 0)
                    goto done;
            if (ch == ')' && end - start == 1 && outer.n) {
                cur = outer.v[--outer.n];
            } else if (PyList_GET_SIZE(cur.words) || PyList_GET_SIZE(cur.writes)) {
                if (new_seg(c, &cur) < 0)
                    goto done;
            }
            continue;
        }
        /* any other word: plain runs and quoted parts */
        end = pos;
        for (;;) {
            while (end < n && !special_char(s[end]))
                end++;
            if (end >= n)
                break;
            unsigned char q = s[end];
            if (q == '\'') {
                end++;
                while (end < n && s[end] != '\'')
                    end++;
                if (end < n)
                    end++;
            } else if (q == '"') {
                end++;
                for (;;) {
                    while (end < n && s[end] != '"' && s[end] != '\\')
                        end++;
                    if (end < n && s[end] == '\\' && end + 1 < n) {
                        end += 2;
                        continue;
                    }
                    break;
                }
                if (end < n && s[end] == '"')
                    end++;
            } else if (q == '\\') {
                end++;
                if (end < n)
                    end++;
            } else {
                break;
            }
        }
        if (end == start) {   /* cannot be (every other character starts a token) */
            rc = BAIL;
            goto done;
        }
        {
            Py_ssize_t len = unquote_into(s + start, end - start, scratch);
            word = ascii_str(scratch, len);
            if (keep(c, word) < 0)
                goto done;
            pos = end;
        }
    got_word:
        if (redirect) {
            int w = writes_file(s, rs, rend, word, c);
            if (w < 0 || (w && PyList_Append(cur.writes, word) < 0))
                goto done;
            redirect = 0;
        } else if (eq_lit(word, "in") && PyList_GET_SIZE(cur.words) == 2
                   && eq_lit(PyList_GET_ITEM(cur.words, 0), "case")) {
            rc = BAIL;
            goto done;
        } else if (PyList_Append(cur.words, word) < 0) {
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < outer.n; i++)
        if (PyList_GET_SIZE(outer.v[i].words) || PyList_GET_SIZE(outer.v[i].writes))
            if (segs_push(out, outer.v[i]) < 0)
                goto done;
    if (PyList_GET_SIZE(cur.words) || PyList_GET_SIZE(cur.writes))
        if (segs_push(out, cur) < 0)
            goto done;
    rc = 0;
done:
    PyMem_Free(scratch);
    PyMem_Free(outer.v);
    return rc;
}

/* ---------------------------------------------------------------- the reader */

typedef struct { PyObject *kind, *target; } Outcome;   /* borrowed; NULL for None */

static int analyze(Ctx *c, PyObject *text, long depth, Outcome *out);
static int command(Ctx *c, Args words, long depth, Outcome *out);

static PyObject *
command_name(Ctx *c, PyObject *word)   /* borrowed */
{
    Py_ssize_t n = WLEN(word), slash = -1;
    const unsigned char *s = WDATA(word);
    for (Py_ssize_t i = n - 1; i >= 0; i--)
        if (s[i] == '/') {
            slash = i;
            break;
        }
    PyObject *name = slash >= 0 ? substr(c, word, slash + 1, n) : word;
    if (name == NULL)
        return NULL;
    Py_ssize_t m = WLEN(name);
    const unsigned char *t = WDATA(name);
    if (m == 0 || t[0] != 'p' || !(is_digit(t[m - 1]) || t[m - 1] == '.'))
        return name;
    static const char *prefixes[3] = {"python", "pip", "pypy"};
    PyObject *objects[3] = {s_python, s_pip, s_pypy};
    for (int k = 0; k < 3; k++) {
        Py_ssize_t p = (Py_ssize_t)strlen(prefixes[k]);
        if (m < p || memcmp(t, prefixes[k], (size_t)p) != 0)
            continue;
        Py_ssize_t i = p;
        while (i < m && (is_digit(t[i]) || t[i] == '.'))
            i++;
        if (i == m)
            return objects[k];
    }
    return name;
}

static int
rank_of(Ctx *c, PyObject *kind, long *rank)   /* 0, BAIL (not in RANK), -1 */
{
    PyObject *v = PyDict_GetItemWithError(c->r->rank, kind);
    if (v == NULL)
        return PyErr_Occurred() ? -1 : BAIL;
    *rank = PyLong_AsLong(v);
    return (*rank == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int
positional(Ctx *c, PyObject *name, Args args, Args *out)
{
    PyObject *takes_value = PyDict_GetItemWithError(c->r->global_value_options, name);
    if (takes_value == NULL && PyErr_Occurred())
        return -1;
    out->v = ctx_alloc(c, args.n);
    if (out->v == NULL)
        return -1;
    out->n = 0;
    int skip = 0;
    for (Py_ssize_t i = 0; i < args.n; i++) {
        PyObject *arg = args.v[i];
        if (takes_value == NULL) {
            if (first_char(arg) != '-' || eq_lit(arg, "-"))
                out->v[out->n++] = arg;
            continue;
        }
        if (skip) {
            skip = 0;
            continue;
        }
        int in = contains(takes_value, arg);
        if (in < 0)
            return -1;
        if (in)
            skip = 1;
        else if (first_char(arg) != '-' || eq_lit(arg, "-"))
            out->v[out->n++] = arg;
    }
    return 0;
}

static int
has_option(Args args, PyObject *option)
{
    Py_ssize_t on = PyUnicode_GET_LENGTH(option);
    if (starts_lit(option, "--")) {
        for (Py_ssize_t i = 0; i < args.n; i++) {
            PyObject *arg = args.v[i];
            if (eq(arg, option) || (WLEN(arg) > on && starts_with(arg, option)
                                    && WDATA(arg)[on] == '='))
                return 1;
        }
        return 0;
    }
    if (on != 2) {
        for (Py_ssize_t i = 0; i < args.n; i++)
            if (eq(args.v[i], option))
                return 1;
        return 0;
    }
    Py_UCS4 letter = PyUnicode_READ_CHAR(option, 1);
    for (Py_ssize_t i = 0; i < args.n; i++) {
        PyObject *arg = args.v[i];
        if (eq(arg, option) || (starts_with(arg, option) && !starts_lit(arg, "--"))
                || (has_char(arg, letter) && short_group(arg)))
            return 1;
    }
    return 0;
}

/* _match: *kind set (borrowed) and *used, or *kind NULL when no rule matches. */
static int
match(Ctx *c, PyObject *name, Args args, Args *given_positional, int specific_only,
      PyObject **kind, Py_ssize_t *used)
{
    *kind = NULL;
    *used = 0;
    PyObject *index = PyDict_GetItemWithError(c->r->rules, name);
    if (index == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyDict_CheckExact(index))
        return BAIL;
    if (PyDict_GET_SIZE(index) == 0)
        return 0;
    Args pos;
    if (given_positional != NULL) {
        pos = *given_positional;
    } else if (positional(c, name, args, &pos) < 0) {
        return -1;
    }
    PyObject *group = PyDict_GetItemWithError(index, s_empty);
    if (group == NULL)
        return PyErr_Occurred() ? -1 : BAIL;
    if (pos.n) {
        PyObject *sub = PyDict_GetItemWithError(index, pos.v[0]);
        if (sub == NULL && PyErr_Occurred())
            return -1;
        if (sub != NULL)
            group = sub;
    }
    if (!PyList_CheckExact(group))
        return BAIL;
    Args options_given = {NULL, -1};
    for (Py_ssize_t g = 0; g < PyList_GET_SIZE(group); g++) {
        PyObject *rule = PyList_GET_ITEM(group, g);
        if (!PyTuple_CheckExact(rule) || PyTuple_GET_SIZE(rule) != 3)
            return BAIL;
        PyObject *subs = PyTuple_GET_ITEM(rule, 0), *options = PyTuple_GET_ITEM(rule, 1);
        PyObject *k = PyTuple_GET_ITEM(rule, 2);
        if (!PyTuple_CheckExact(subs) || !PyTuple_CheckExact(options) || !PyUnicode_CheckExact(k))
            return BAIL;
        Py_ssize_t ns = PyTuple_GET_SIZE(subs), no = PyTuple_GET_SIZE(options);
        for (Py_ssize_t i = 0; i < ns; i++)
            if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(subs, i)))
                return BAIL;
        for (Py_ssize_t i = 0; i < no; i++)
            if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(options, i)))
                return BAIL;
        if (ns) {
            if (pos.n < ns)
                continue;
            int same = 1;
            for (Py_ssize_t i = 0; i < ns && same; i++)
                same = eq(pos.v[i], PyTuple_GET_ITEM(subs, i));
            if (!same)
                continue;
        }
        if (no) {
            if (options_given.n < 0) {
                options_given.v = ctx_alloc(c, args.n);
                if (options_given.v == NULL)
                    return -1;
                options_given.n = 0;
                for (Py_ssize_t i = 0; i < args.n; i++)
                    if (first_char(args.v[i]) == '-')
                        options_given.v[options_given.n++] = args.v[i];
            }
            int all = 1;
            for (Py_ssize_t i = 0; i < no && all; i++)
                all = has_option(options_given, PyTuple_GET_ITEM(options, i));
            if (!all)
                continue;
        } else if (specific_only && !ns) {
            continue;
        }
        *kind = k;
        *used = ns;
        return 0;
    }
    return 0;
}

static int
unwrap(Ctx *c, PyObject *wrapper, Args args, Args *rest)
{
    PyObject *takes_value = PyDict_GetItemWithError(c->r->wrapper_value_options, wrapper);
    if (takes_value == NULL && PyErr_Occurred())
        return -1;
    Py_ssize_t index = 0;
    int duration_left = eq_lit(wrapper, "timeout"), env = eq_lit(wrapper, "env");
    while (index < args.n) {
        PyObject *arg = args.v[index];
        int in = takes_value ? contains(takes_value, arg) : 0;
        if (in < 0)
            return -1;
        if (in)
            index += 2;
        else if ((first_char(arg) == '-' && !eq_lit(arg, "-")) || (env && assignment(arg)))
            index += 1;
        else if (duration_left) {
            index += 1;
            duration_left = 0;
        } else
            break;
    }
    *rest = slice(args, index);
    return 0;
}

/* skip_options: the index, or -2 for None. options: a (flags, values) tuple or None. */
static int
skip_options(Args args, Py_ssize_t index, PyObject *options, Py_ssize_t *out)
{
    if (options == NULL || options == Py_None) {
        *out = index;
        return 0;
    }
    PyObject *flags = PyTuple_GET_ITEM(options, 0), *values = PyTuple_GET_ITEM(options, 1);
    while (index < args.n) {
        PyObject *arg = args.v[index];
        if (first_char(arg) != '-' || eq_lit(arg, "-") || eq_lit(arg, "--")) {
            *out = index;
            return 0;
        }
        int in = contains(flags, arg);
        if (in < 0)
            return -1;
        if (in) {
            index += 1;
            continue;
        }
        in = contains(values, arg);
        if (in < 0)
            return -1;
        if (in) {
            index += 2;
            continue;
        }
        const unsigned char *s = WDATA(arg);
        Py_ssize_t n = WLEN(arg), eqat = -1;
        for (Py_ssize_t i = 0; i < n; i++)
            if (s[i] == '=') {
                eqat = i;
                break;
            }
        if (eqat >= 0) {
            PyObject *head = ascii_str(s, eqat);
            if (head == NULL)
                return -1;
            in = contains(values, head);
            Py_DECREF(head);
            if (in < 0)
                return -1;
            if (in) {
                index += 1;
                continue;
            }
        }
        *out = -2;
        return 0;
    }
    *out = index;
    return 0;
}

static PyObject *
package_command(Ctx *c, PyObject *word)   /* borrowed */
{
    const unsigned char *s = WDATA(word);
    Py_ssize_t n = WLEN(word), end = n;
    for (Py_ssize_t i = 1; i < n; i++)
        if (s[i] == '=' || s[i] == '<' || s[i] == '>' || s[i] == '!' || s[i] == '~') {
            end = i;
            break;
        }
    Py_ssize_t at = -1;
    for (Py_ssize_t i = end - 1; i >= 0; i--)
        if (s[i] == '@') {
            at = i;
            break;
        }
    if (at > 0) {
        int slash = 0;
        for (Py_ssize_t i = at; i < end; i++)
            if (s[i] == '/')
                slash = 1;
        if (!slash)
            end = at;
    }
    return substr(c, word, 0, end);
}

/* _run_by: *command (the word) and *rest, or *command NULL. */
static int
run_by(Ctx *c, PyObject *runner, Args args, Py_ssize_t start, PyObject **cmd, Args *rest)
{
    *cmd = NULL;
    PyObject *rules = PyDict_GetItemWithError(c->r->runners, runner);
    if (rules == NULL)
        return PyErr_Occurred() ? -1 : BAIL;
    for (Py_ssize_t g = 0; g < PyTuple_GET_SIZE(rules); g++) {
        PyObject *rule = PyTuple_GET_ITEM(rules, g);
        PyObject *subs = PyTuple_GET_ITEM(rule, 0), *options = PyTuple_GET_ITEM(rule, 1);
        Py_ssize_t ns = PyTuple_GET_SIZE(subs), end = start + ns;
        Py_ssize_t lo = start < args.n ? start : args.n, hi = end < args.n ? end : args.n;
        if (hi - lo != ns)
            continue;
        int same = 1;
        for (Py_ssize_t i = 0; i < ns && same; i++)
            same = eq(args.v[lo + i], PyTuple_GET_ITEM(subs, i));
        if (!same)
            continue;
        if (options != Py_None) {
            Py_ssize_t found;
            if (skip_options(args, end, options, &found) < 0)
                return -1;
            if (found == -2)
                return 0;
            end = (found < args.n && eq_lit(args.v[found], "--")) ? found + 1 : found;
        }
        if (end >= args.n || first_char(args.v[end]) == '-')
            return 0;
        PyObject *word = package_command(c, args.v[end]);
        if (word == NULL)
            return -1;
        Args after = slice(args, end + 1);
        if (options == Py_None) {
            PyObject *name = command_name(c, word), *kind;
            Py_ssize_t used;
            if (name == NULL)
                return -1;
            int rc = match(c, name, after, NULL, 1, &kind, &used);
            if (rc != 0)
                return rc;
            if (kind == NULL)
                return 0;
        }
        *cmd = word;
        *rest = after;
        return 0;
    }
    return 0;
}

static int
module_of(Ctx *c, Args args, PyObject **module, Args *rest)
{
    *module = NULL;
    Py_ssize_t index = 0;
    while (index < args.n) {
        PyObject *arg = args.v[index];
        const unsigned char *s = WDATA(arg);
        Py_ssize_t n = WLEN(arg);
        if (eq_lit(arg, "-m")) {
            if (index + 1 < args.n) {
                *module = args.v[index + 1];
                *rest = slice(args, index + 2);
            }
            return 0;
        }
        if (n > 2 && s[0] == '-' && s[1] == 'm') {
            *module = substr(c, arg, 2, n);
            *rest = slice(args, index + 1);
            return *module == NULL ? -1 : 0;
        }
        int in = contains(c->r->python_value_options, arg);
        if (in < 0)
            return -1;
        if (in) {
            index += 2;
            continue;
        }
        if (n > 2) {
            PyObject *head = ascii_str(s, 2);
            if (head == NULL)
                return -1;
            in = contains(c->r->python_value_options, head);
            Py_DECREF(head);
            if (in < 0)
                return -1;
        }
        if (!in && n > 1 && s[0] == '-') {
            in = 1;
            for (Py_ssize_t i = 1; i < n && in; i++)
                in = s[i] < 128 && c->r->python_flags[s[i]];
        }
        if (!in)
            return 0;
        index += 1;
    }
    return 0;
}

/* _runs: *inner (NULL for None) and *rest (the arguments either way). */
static int
runs(Ctx *c, PyObject *name, Args args, PyObject **inner, Args *rest)
{
    *inner = NULL;
    *rest = args;
    int in = contains(c->r->module_runners, name);
    if (in < 0)
        return -1;
    if (in) {
        PyObject *module;
        Args after;
        if (module_of(c, args, &module, &after) < 0)
            return -1;
        if (module != NULL) {
            *inner = module;
            *rest = after;
        }
        return 0;
    }
    PyObject *options = PyDict_GetItemWithError(c->r->runner_global_options, name);
    if (options == NULL && PyErr_Occurred())
        return -1;
    Py_ssize_t start;
    if (skip_options(args, 0, options, &start) < 0)
        return -1;
    if (start == -2)
        return 0;
    PyObject *kind;
    Py_ssize_t used;
    int rc = match(c, name, slice(args, start), NULL, 1, &kind, &used);
    if (rc != 0)
        return rc;
    if (kind != NULL) {
        *rest = slice(args, start);
        return 0;
    }
    PyObject *cmd;
    Args after;
    rc = run_by(c, name, args, start, &cmd, &after);
    if (rc != 0)
        return rc;
    if (cmd != NULL) {
        *inner = cmd;
        *rest = after;
    }
    return 0;
}

static PyObject *
first_path(Args a, int reversed)
{
    for (Py_ssize_t i = 0; i < a.n; i++) {
        PyObject *w = a.v[reversed ? a.n - 1 - i : i];
        if (path_like(w))
            return w;
    }
    return NULL;
}

static int
find(Ctx *c, Args args, long depth, Outcome *out)
{
    PyObject *kind = s_read;
    for (Py_ssize_t i = 0; i < args.n; i++)
        if (eq_lit(args.v[i], "-delete"))
            kind = s_mutating;
    if (++c->find_nesting > MAX_FIND_NESTING)
        return BAIL;
    for (Py_ssize_t i = 0; i < args.n; i++) {
        int in = contains(c->r->exec_options, args.v[i]);
        if (in < 0)
            return -1;
        if (!in)
            continue;
        Args inner = slice(args, i + 1);
        Py_ssize_t k = 0;
        while (k < inner.n && !eq_lit(inner.v[k], ";") && !eq_lit(inner.v[k], "+"))
            k++;
        inner.n = k;
        Outcome found;
        int rc = command(c, inner, depth, &found);
        if (rc != 0)
            return rc;
        if (found.kind == NULL)
            continue;
        long rf, rk;
        rc = rank_of(c, found.kind, &rf);
        if (rc < 0)
            return -1;
        if (rc == BAIL)
            continue;   /* not in RANK */
        rc = rank_of(c, kind, &rk);
        if (rc != 0)
            return rc;
        if (rf > rk)
            kind = found.kind;
    }
    c->find_nesting--;
    out->kind = kind;
    out->target = NULL;
    for (Py_ssize_t i = 0; i < args.n; i++)
        if (path_like(args.v[i]) && first_char(args.v[i]) != '-') {
            out->target = args.v[i];
            break;
        }
    return 0;
}

/* _curl_to_devices: 1 (and the outcome) when every output option of a curl names a device. */
static int
curl_to_devices(Args args, Outcome *out)
{
    int devices = 0;
    for (Py_ssize_t i = 0; i < args.n; i++) {
        PyObject *arg = args.v[i], *value;
        Py_ssize_t at = 0;
        int group = short_group(arg);
        if (eq_lit(arg, "--remote-name") || eq_lit(arg, "--remote-name-all")
            || (group && has_char(arg, 'O')))
            return 0;
        if (eq_lit(arg, "--output") || (group && WDATA(arg)[WLEN(arg) - 1] == 'o'))
            value = i + 1 < args.n ? args.v[i + 1] : s_empty;
        else if (starts_lit(arg, "--output="))
            value = arg, at = 9;
        else if (starts_lit(arg, "-o") && !group)
            value = arg, at = 2;
        else
            continue;
        if (!starts_lit_at(value, at, "/dev/"))
            return 0;
        devices = 1;
    }
    if (!devices)
        return 0;
    out->kind = s_default;
    out->target = NULL;
    for (Py_ssize_t i = args.n - 1; i >= 0; i--)
        if (first_char(args.v[i]) != '-' && !starts_lit(args.v[i], "/dev/")
            && path_like(args.v[i])) {
            out->target = args.v[i];
            break;
        }
    return 1;
}

/* _special: *found 0 when it returns None. */
static int
special(Ctx *c, PyObject *name, Args args, long depth, Outcome *out, int *found)
{
    *found = 1;
    int in = contains(c->r->shells, name);
    if (in < 0)
        return -1;
    if (in) {   /* _shell_script */
        PyObject *script = NULL;
        for (Py_ssize_t i = 0; i < args.n; i++) {
            PyObject *arg = args.v[i];
            if (short_group(arg) && has_char(arg, 'c')) {
                script = i + 1 < args.n ? args.v[i + 1] : s_empty;
                break;
            }
            if (first_char(arg) != '-')
                break;
        }
        if (script != NULL) {
            if (depth < c->r->max_depth)
                return analyze(c, script, depth + 1, out);
            out->kind = s_default;
            out->target = NULL;
            return 0;
        }
    }
    if (eq_lit(name, "find"))
        return find(c, args, depth, out);
    if (eq_lit(name, "tee")) {
        out->kind = s_read;
        out->target = NULL;
        for (Py_ssize_t i = 0; i < args.n; i++)
            if (path_like(args.v[i]) && !starts_lit(args.v[i], "/dev/")) {
                out->kind = s_mutating;
                out->target = args.v[i];
                break;
            }
        return 0;
    }
    if (eq_lit(name, "curl") && curl_to_devices(args, out))
        return 0;
    if (args.n == 1) {
        in = contains(c->r->version_words, args.v[0]);
        if (in < 0)
            return -1;
        if (in) {
            out->kind = s_read;
            out->target = NULL;
            return 0;
        }
    }
    *found = 0;
    return 0;
}

static int
simple(Ctx *c, PyObject *name, PyObject *word, Args args, long depth, Outcome *out)
{
    int in = contains(c->r->special_names, name);
    if (in < 0)
        return -1;
    if (!in && args.n == 1) {
        in = contains(c->r->version_words, args.v[0]);
        if (in < 0)
            return -1;
    }
    if (in) {
        int found, rc = special(c, name, args, depth, out, &found);
        if (rc != 0 || found)
            return rc;
    }
    if (eq_lit(name, "tar") && args.n && first_char(args.v[0]) != '-') {
        Args copy;
        copy.v = ctx_alloc(c, args.n);
        if (copy.v == NULL)
            return -1;
        PyObject *dash = PyUnicode_New(WLEN(args.v[0]) + 1, 127);
        if (dash == NULL)
            return -1;
        PyUnicode_1BYTE_DATA(dash)[0] = '-';
        memcpy(PyUnicode_1BYTE_DATA(dash) + 1, WDATA(args.v[0]), (size_t)WLEN(args.v[0]));
        if (keep(c, dash) < 0)
            return -1;
        copy.v[0] = dash;
        for (Py_ssize_t i = 1; i < args.n; i++)
            copy.v[i] = args.v[i];
        copy.n = args.n;
        args = copy;
    }
    Args pos;
    if (positional(c, name, args, &pos) < 0)
        return -1;
    PyObject *kind;
    Py_ssize_t used;
    int rc = match(c, name, args, &pos, 0, &kind, &used);
    if (rc != 0)
        return rc;
    int matched = kind != NULL;
    if (!matched) {
        kind = s_default;
        used = 0;
    }
    if (eq_lit(kind, "poll")) {
        in = contains(c->r->waits, name);
        if (in < 0)
            return -1;
        if (in) {
            out->kind = s_wait;
            out->target = NULL;
            return 0;
        }
    }
    out->kind = kind;
    if (!eq_lit(kind, "default") && !eq_lit(kind, "poll")) {
        out->target = first_path(slice(pos, used), 1);
        return 0;
    }
    if (!matched && has_char(word, '/')) {
        out->target = word;
        return 0;
    }
    out->target = first_path(slice(pos, used), 0);
    return 0;
}

static int
command(Ctx *c, Args words, long depth, Outcome *out)
{
    out->kind = out->target = NULL;
    Py_ssize_t start = 0;
    for (; start < words.n; start++) {
        PyObject *w = words.v[start];
        int in = contains(c->r->keywords, w);
        if (in < 0)
            return -1;
        if (!in && !(has_char(w, '=') && assignment(w)))
            break;
    }
    if (start == words.n)
        return 0;
    PyObject *word = words.v[start];
    int in = contains(c->r->not_commands, word);
    if (in < 0)
        return -1;
    if (in)
        return 0;
    Args args = slice(words, start + 1);
    PyObject *name = command_name(c, word);
    if (name == NULL)
        return -1;
    for (;;) {
        in = contains(c->r->wrappers, name);
        if (in < 0)
            return -1;
        if (in) {
            PyObject *kind;
            Py_ssize_t used;
            int rc = match(c, name, args, NULL, 1, &kind, &used);
            if (rc != 0)
                return rc;
            if (kind != NULL) {
                out->kind = kind;
                return 0;
            }
            Args rest;
            if (unwrap(c, name, args, &rest) < 0)
                return -1;
            if (rest.n == 0) {
                Args none = {NULL, 0};
                rc = match(c, name, none, NULL, 0, &kind, &used);
                if (rc != 0)
                    return rc;
                out->kind = kind != NULL ? kind : s_default;
                return 0;
            }
            word = rest.v[0];
            args = slice(rest, 1);
            name = command_name(c, word);
            if (name == NULL)
                return -1;
            continue;
        }
        in = contains(c->r->run_words, name);
        if (in < 0)
            return -1;
        if (!in)
            break;
        PyObject *inner;
        int rc = runs(c, name, args, &inner, &args);
        if (rc != 0)
            return rc;
        if (inner == NULL)
            break;
        word = inner;
        name = command_name(c, word);
        if (name == NULL)
            return -1;
    }
    return simple(c, name, word, args, depth, out);
}

static PyObject *
normal(Ctx *c, PyObject *path)   /* _normal, borrowed */
{
    const unsigned char *s = WDATA(path);
    Py_ssize_t n = WLEN(path);
    int needs = n && s[n - 1] == '/';
    for (Py_ssize_t i = 0; i + 1 < n && !needs; i++)
        needs = s[i] == '/' && (s[i + 1] == '/' || s[i + 1] == '.');
    if (!needs)
        return path;
    PyObject *o = PyObject_CallOneArg(c->r->normpath, path);
    if (o == NULL)
        return NULL;
    if (!PyUnicode_CheckExact(o) || !PyUnicode_IS_ASCII(o)) {
        Py_DECREF(o);
        PyErr_SetString(PyExc_TypeError, "normpath gave no ASCII str");
        return NULL;
    }
    return keep(c, o) < 0 ? NULL : o;
}

static int
in_directory(Ctx *c, PyObject *cwd, PyObject *target, PyObject **out)
{
    *out = target;
    if (target != NULL && (has_char(target, '/') || has_char(target, '.'))
            && first_char(target) != '/' && relative_path(target)) {
        PyObject *joined = join3(c, cwd, "/", target);
        if (joined == NULL || (*out = normal(c, joined)) == NULL)
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- heredocs */

/* _lexer.strip_heredocs, over a text of any kind (a heredoc body may hold any character);
   only a line that opens a heredoc is read character by character, and it must be ASCII. */

static int
heredoc_delimiters(PyObject *text, Py_ssize_t ls, Py_ssize_t le, PyObject *found)
{   /* _heredoc_delimiters(text[ls:le]) appended to found: 0, BAIL (not ASCII), -1 */
    PyObject *line = PyUnicode_Substring(text, ls, le);
    if (line == NULL)
        return -1;
    int rc = -1;
    if (!PyUnicode_IS_ASCII(line)) {
        rc = BAIL;
        goto done;
    }
    const unsigned char *s = PyUnicode_1BYTE_DATA(line);
    Py_ssize_t n = PyUnicode_GET_LENGTH(line), p = 0, counted = 0;
    int singles = 0, doubles = 0;   /* odd counts */
    while (p + 1 < n) {   /* _HEREDOC.finditer */
        if (s[p] != '<' || s[p + 1] != '<' || (p >= 1 && s[p - 1] == '<')
                || (p + 2 < n && s[p + 2] == '<')) {
            p++;
            continue;
        }
        Py_ssize_t starts[2], count = 0, d_start = -1, d_end = -1, end = -1;
        if (p + 2 < n && s[p + 2] == '-')
            starts[count++] = p + 3;   /* with the dash, then without it */
        starts[count++] = p + 2;
        for (Py_ssize_t k = 0; k < count && end < 0; k++) {
            Py_ssize_t r = starts[k];
            while (r < n && (s[r] == ' ' || s[r] == '\t'))
                r++;
            if (r < n && (s[r] == '\'' || s[r] == '"')) {
                Py_ssize_t close = r + 1;
                while (close < n && s[close] != s[r])
                    close++;
                if (close < n) {
                    d_start = r + 1;
                    d_end = close;
                    end = close + 1;
                }
                continue;
            }
            for (int backslash = r < n && s[r] == '\\'; backslash >= 0 && end < 0; backslash--) {
                Py_ssize_t w = r + backslash;
                while (w < n && (is_word(s[w]) || s[w] == '.' || s[w] == '-'))
                    w++;
                if (w > r + backslash) {
                    d_start = r + backslash;
                    d_end = w;
                    end = w;
                }
            }
        }
        if (end < 0) {
            p++;
            continue;
        }
        for (; counted < p; counted++) {   /* the quotes of line[:p] */
            singles ^= s[counted] == '\'';
            doubles ^= s[counted] == '"';
        }
        if (!singles && !doubles) {   /* else inside quotes: not a heredoc */
            PyObject *delimiter = ascii_str(s + d_start, d_end - d_start);
            if (delimiter == NULL)
                goto done;
            int appended = PyList_Append(found, delimiter);
            Py_DECREF(delimiter);
            if (appended < 0)
                goto done;
        }
        p = end;
    }
    rc = 0;
done:
    Py_DECREF(line);
    return rc;
}

static int
stripped_equals(PyObject *text, Py_ssize_t a, Py_ssize_t b, PyObject *delimiter)
{   /* text[a:b].strip() == delimiter (an ASCII str) */
    int kind = PyUnicode_KIND(text);
    const void *d = PyUnicode_DATA(text);
    while (a < b && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, d, a)))
        a++;
    while (b > a && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, d, b - 1)))
        b--;
    Py_ssize_t n = PyUnicode_GET_LENGTH(delimiter);
    if (b - a != n)
        return 0;
    const unsigned char *t = PyUnicode_1BYTE_DATA(delimiter);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyUnicode_READ(kind, d, a + i) != t[i])
            return 0;
    return 1;
}

static Py_ssize_t
line_end_of(PyObject *text, Py_ssize_t from, Py_ssize_t size)   /* -2 on error */
{
    Py_ssize_t end = from <= size ? PyUnicode_FindChar(text, '\n', from, size, 1) : -1;
    return end == -1 ? size : end;
}

static Py_ssize_t
body_end(PyObject *text, Py_ssize_t position, PyObject *delimiter)   /* _body_end; -2: error */
{
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_GET_LENGTH(delimiter) == 0) {
        while (position <= size) {
            Py_ssize_t end = line_end_of(text, position, size);
            if (end == -2)
                return -2;
            if (stripped_equals(text, position, end, delimiter))
                return end + 1;
            position = end + 1;
        }
        return size + 1;
    }
    Py_ssize_t found = position <= size ? PyUnicode_Find(text, delimiter, position, size, 1) : -1;
    while (found >= 0) {
        Py_ssize_t start = PyUnicode_FindChar(text, '\n', position, found, -1);
        if (start == -2)
            return -2;
        start = start + 1 ? start + 1 : position;
        Py_ssize_t end = line_end_of(text, found, size);
        if (end == -2)
            return -2;
        if (stripped_equals(text, start, end, delimiter))
            return end + 1;
        found = PyUnicode_Find(text, delimiter, end, size, 1);
    }
    return found == -2 ? -2 : size + 1;
}

static int
strip_heredocs(Ctx *c, PyObject *text, Py_ssize_t start, PyObject **out)
{   /* strip_heredocs(text), the first "<<" at start: 0 (*out borrowed), BAIL, -1 */
    Py_ssize_t size = PyUnicode_GET_LENGTH(text), position = 0;
    PyObject *kept = PyList_New(0), *delimiters = NULL;
    int rc = -1;
    if (keep(c, kept) < 0)
        return -1;
    while (start >= 0) {
        Py_ssize_t line_start = PyUnicode_FindChar(text, '\n', position, start, -1);
        if (line_start == -2)
            goto done;
        line_start = line_start + 1 ? line_start + 1 : position;
        Py_ssize_t line_end = line_end_of(text, start, size);
        if (line_end == -2)
            goto done;
        Py_XSETREF(delimiters, PyList_New(0));
        if (delimiters == NULL)
            goto done;
        int found = heredoc_delimiters(text, line_start, line_end, delimiters);
        if (found != 0) {
            rc = found;
            goto done;
        }
        if (PyList_GET_SIZE(delimiters) == 0) {
            start = line_end <= size ? PyUnicode_Find(text, s_heredoc, line_end, size, 1) : -1;
            if (start == -2)
                goto done;
            continue;
        }
        PyObject *part = PyUnicode_Substring(text, position, line_end);
        if (part == NULL || PyList_Append(kept, part) < 0) {
            Py_XDECREF(part);
            goto done;
        }
        Py_DECREF(part);
        position = line_end + 1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(delimiters); i++) {
            position = body_end(text, position, PyList_GET_ITEM(delimiters, i));
            if (position == -2)
                goto done;
        }
        if (position > size)
            break;
        start = PyUnicode_Find(text, s_heredoc, position, size, 1);
        if (start == -2)
            goto done;
    }
    if (position <= size) {
        PyObject *part = PyUnicode_Substring(text, position, size);
        if (part == NULL || PyList_Append(kept, part) < 0) {
            Py_XDECREF(part);
            goto done;
        }
        Py_DECREF(part);
    }
    *out = PyUnicode_Join(s_newline, kept);
    if (keep(c, *out) < 0)
        goto done;
    rc = 0;
done:
    Py_XDECREF(delimiters);
    return rc;
}

static int
analyze(Ctx *c, PyObject *text, long depth, Outcome *out)
{
    out->kind = out->target = NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (n == 0)
        return 0;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t i = 0;   /* text.isspace() */
    if (kind == PyUnicode_1BYTE_KIND) {
        const unsigned char *d = data;
        while (i < n && (d[i] < 128 ? re_space(d[i]) : Py_UNICODE_ISSPACE(d[i])))
            i++;
    } else {
        while (i < n && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i)))
            i++;
    }
    if (i == n)
        return 0;
    Py_ssize_t heredoc = -1;   /* text.find("<<") */
    if (kind == PyUnicode_1BYTE_KIND) {
        const unsigned char *d = data, *at = d, *end = d + n - 1;
        while (at < end && (at = memchr(at, '<', (size_t)(end - at))) != NULL) {
            if (at[1] == '<') {
                heredoc = at - d;
                break;
            }
            at += 2;   /* at[1] is not '<' */
        }
    } else {
        for (i = 0; i + 1 < n && heredoc < 0; i++)
            if (PyUnicode_READ(kind, data, i) == '<' && PyUnicode_READ(kind, data, i + 1) == '<')
                heredoc = i;
    }
    if (heredoc >= 0) {
        int rc = strip_heredocs(c, text, heredoc, &text);
        if (rc != 0)
            return rc;
        n = PyUnicode_GET_LENGTH(text);
    }
    if (!PyUnicode_IS_ASCII(text))
        return BAIL;
    const unsigned char *s = PyUnicode_1BYTE_DATA(text);
    Segs segs = {NULL, 0, 0};
    int rc = lex(c, s, n, &segs);
    if (rc != 0)
        goto done;
    PyObject *best_kind = NULL, *best_target = NULL, *cwd = NULL;
    long best_rank = -1;
    int waits = 0, prepared = 0;
    rc = -1;
    for (Py_ssize_t k = 0; k < segs.n; k++) {
        Args words = {PySequence_Fast_ITEMS(segs.v[k].words),
                      PyList_GET_SIZE(segs.v[k].words)};
        PyObject *writes = segs.v[k].writes;
        Outcome got;
        int has_writes = PyList_GET_SIZE(writes) > 0;
        if (has_writes) {
            got.kind = s_mutating;
            got.target = PyList_GET_ITEM(writes, 0);
        } else if (eq_lit(words.v[0], "cd")) {   /* _changed_directory */
            if (words.n != 2) {
                cwd = NULL;
                continue;
            }
            PyObject *directory = words.v[1];
            if (first_char(directory) == '/') {
                if ((cwd = normal(c, directory)) == NULL)
                    goto done;
            } else if (cwd == NULL || !relative_path(directory)) {
                cwd = NULL;
            } else {
                PyObject *joined = join3(c, cwd, "/", directory);
                if (joined == NULL || (cwd = normal(c, joined)) == NULL)
                    goto done;
            }
            continue;
        } else {
            int r = command(c, words, depth, &got);
            if (r != 0) {
                rc = r;
                goto done;
            }
            if (got.kind == NULL || eq_lit(got.kind, "wait")) {
                waits = waits || got.kind != NULL;
                continue;
            }
        }
        if (best_target != NULL && best_kind != NULL && eq_lit(best_kind, "mutating")) {
            if (eq_lit(got.kind, "default") || eq_lit(got.kind, "poll")) {
                if (prepared) {
                    int r = rank_of(c, got.kind, &best_rank);
                    if (r != 0) {
                        rc = r;
                        goto done;
                    }
                    best_kind = got.kind;
                    prepared = 0;
                    best_target = got.target;
                    if (cwd != NULL && in_directory(c, cwd, got.target, &best_target) < 0)
                        goto done;
                    continue;
                }
                best_target = NULL;
                break;
            }
            if (prepared) {
                if (has_writes) {
                    prepared = 0;
                } else {
                    PyObject *name = command_name(c, words.v[0]);
                    if (name == NULL || (prepared = contains(c->r->preparations, name)) < 0)
                        goto done;
                }
            }
            continue;
        }
        long rank;
        int r = rank_of(c, got.kind, &rank);
        if (r != 0) {
            rc = r;
            goto done;
        }
        if (rank > best_rank) {
            prepared = 0;
            if (eq_lit(got.kind, "mutating") && !has_writes) {
                PyObject *name = command_name(c, words.v[0]);
                if (name == NULL || (prepared = contains(c->r->preparations, name)) < 0)
                    goto done;
            }
            best_kind = got.kind;
            best_rank = rank;
            best_target = got.target;
            if (cwd != NULL && in_directory(c, cwd, got.target, &best_target) < 0)
                goto done;
        } else if (best_kind != NULL && eq(got.kind, best_kind) && best_target == NULL
                   && got.target != NULL) {
            best_target = got.target;
            if (cwd != NULL && in_directory(c, cwd, got.target, &best_target) < 0)
                goto done;
        }
    }
    /* _outcome */
    if (waits) {
        if (best_kind == NULL) {
            out->kind = s_exempt;
            out->target = NULL;
            rc = 0;
            goto done;
        }
        long poll;
        int r = rank_of(c, s_poll, &poll);
        if (r != 0) {
            rc = r;
            goto done;
        }
        if (best_rank < poll) {
            out->kind = s_poll;
            out->target = best_target;
            rc = 0;
            goto done;
        }
    }
    out->kind = (best_kind == NULL || PyUnicode_GET_LENGTH(best_kind) == 0) ? s_read : best_kind;
    out->target = best_target;
    rc = 0;
done:
    PyMem_Free(segs.v);
    return rc;
}

/* ---------------------------------------------------------------- the type */

static PyObject *
Reader_analyze(Reader *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "analyze(text, depth=0)");
        return NULL;
    }
    PyObject *text = args[0];
    long depth = 0;
    if (nargs == 2) {
        if (!PyLong_CheckExact(args[1]))
            Py_RETURN_NONE;
        int overflow;
        depth = PyLong_AsLongAndOverflow(args[1], &overflow);
        if (depth == -1 && PyErr_Occurred())
            return NULL;
        if (overflow)
            Py_RETURN_NONE;
    }
    if (!self->ready) {
        PyErr_SetString(PyExc_TypeError, "Reader.__init__ was not called");
        return NULL;
    }
    if (!PyUnicode_CheckExact(text) || depth < 0)
        Py_RETURN_NONE;
    Ctx c = {self, PyList_New(0), NULL, 0, 0, 0};
    if (c.keep == NULL)
        return NULL;
    Outcome out;
    int rc = analyze(&c, text, depth, &out);
    PyObject *result = NULL;
    if (rc == 0)
        result = PyTuple_Pack(2, out.kind ? out.kind : Py_None,
                              out.target ? out.target : Py_None);
    else if (rc == BAIL) {
        result = Py_None;
        Py_INCREF(result);
    }
    for (Py_ssize_t i = 0; i < c.nallocs; i++)
        PyMem_Free(c.allocs[i]);
    PyMem_Free(c.allocs);
    Py_DECREF(c.keep);
    return result;
}

static PyObject *
module_strip_heredocs(PyObject *module, PyObject *text)
{   /* _lexer.strip_heredocs(text), or None where analyze leaves the text to Python */
    if (!PyUnicode_CheckExact(text)) {
        PyErr_SetString(PyExc_TypeError, "strip_heredocs takes a str");
        return NULL;
    }
    Py_ssize_t start = PyUnicode_Find(text, s_heredoc, 0, PyUnicode_GET_LENGTH(text), 1);
    if (start == -2)
        return NULL;
    if (start == -1)
        return Py_NewRef(text);
    Ctx c = {NULL, PyList_New(0), NULL, 0, 0, 0};
    if (c.keep == NULL)
        return NULL;
    PyObject *out = NULL;
    int rc = strip_heredocs(&c, text, start, &out);
    PyObject *result = rc == 0 ? Py_NewRef(out) : rc == BAIL ? Py_NewRef(Py_None) : NULL;
    Py_DECREF(c.keep);
    return result;
}

static int
take(PyObject *tables, const char *key, PyObject **slot, PyTypeObject *type1,
     PyTypeObject *type2)
{
    PyObject *v = PyDict_GetItemString(tables, key);
    if (v == NULL) {
        PyErr_Format(PyExc_KeyError, "tables lack %s", key);
        return -1;
    }
    if (type1 != NULL && !PyObject_TypeCheck(v, type1)
            && (type2 == NULL || !PyObject_TypeCheck(v, type2))) {
        PyErr_Format(PyExc_TypeError, "tables[%s]: %s", key, Py_TYPE(v)->tp_name);
        return -1;
    }
    Py_INCREF(v);
    Py_XSETREF(*slot, v);
    return 0;
}

static int
is_options(PyObject *o)   /* (frozenset of str, frozenset of str) */
{
    return PyTuple_CheckExact(o) && PyTuple_GET_SIZE(o) == 2
           && PyAnySet_Check(PyTuple_GET_ITEM(o, 0)) && PyAnySet_Check(PyTuple_GET_ITEM(o, 1));
}

static int
Reader_init(Reader *self, PyObject *args, PyObject *kwds)
{
    PyObject *rules, *tables;
    self->ready = 0;
    if (!PyArg_ParseTuple(args, "O!O!:Reader", &PyDict_Type, &rules, &PyDict_Type, &tables))
        return -1;
    Py_INCREF(rules);
    Py_XSETREF(self->rules, rules);
    struct { const char *key; PyObject **slot; PyTypeObject *t1, *t2; } slots[] = {
        {"keywords", &self->keywords, &PySet_Type, &PyFrozenSet_Type},
        {"not_commands", &self->not_commands, &PySet_Type, &PyFrozenSet_Type},
        {"wrappers", &self->wrappers, &PySet_Type, &PyFrozenSet_Type},
        {"wrapper_value_options", &self->wrapper_value_options, &PyDict_Type, NULL},
        {"run_words", &self->run_words, &PySet_Type, &PyFrozenSet_Type},
        {"module_runners", &self->module_runners, &PySet_Type, &PyFrozenSet_Type},
        {"runners", &self->runners, &PyDict_Type, NULL},
        {"runner_global_options", &self->runner_global_options, &PyDict_Type, NULL},
        {"python_value_options", &self->python_value_options, &PySet_Type, &PyFrozenSet_Type},
        {"shells", &self->shells, &PySet_Type, &PyFrozenSet_Type},
        {"special_names", &self->special_names, &PySet_Type, &PyFrozenSet_Type},
        {"version_words", &self->version_words, &PySet_Type, &PyFrozenSet_Type},
        {"exec_options", &self->exec_options, &PySet_Type, &PyFrozenSet_Type},
        {"global_value_options", &self->global_value_options, &PyDict_Type, NULL},
        {"waits", &self->waits, &PySet_Type, &PyFrozenSet_Type},
        {"preparations", &self->preparations, &PySet_Type, &PyFrozenSet_Type},
        {"rank", &self->rank, &PyDict_Type, NULL},
        {"writes", &self->writes, &PySet_Type, &PyFrozenSet_Type},
        {"normpath", &self->normpath, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++)
        if (take(tables, slots[i].key, slots[i].slot, slots[i].t1, slots[i].t2) < 0)
            return -1;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(self->wrapper_value_options, &pos, &key, &value))
        if (!PyAnySet_Check(value)) {
            PyErr_SetString(PyExc_TypeError, "wrapper_value_options: sets");
            return -1;
        }
    pos = 0;
    while (PyDict_Next(self->global_value_options, &pos, &key, &value))
        if (!PyAnySet_Check(value)) {
            PyErr_SetString(PyExc_TypeError, "global_value_options: sets");
            return -1;
        }
    pos = 0;
    while (PyDict_Next(self->runner_global_options, &pos, &key, &value))
        if (!is_options(value)) {
            PyErr_SetString(PyExc_TypeError, "runner_global_options: (flags, values)");
            return -1;
        }
    pos = 0;
    while (PyDict_Next(self->runners, &pos, &key, &value)) {
        if (!PyTuple_CheckExact(value))
            goto bad_runners;
        for (Py_ssize_t g = 0; g < PyTuple_GET_SIZE(value); g++) {
            PyObject *rule = PyTuple_GET_ITEM(value, g);
            if (!PyTuple_CheckExact(rule) || PyTuple_GET_SIZE(rule) != 2
                    || !PyTuple_CheckExact(PyTuple_GET_ITEM(rule, 0)))
                goto bad_runners;
            PyObject *subs = PyTuple_GET_ITEM(rule, 0), *options = PyTuple_GET_ITEM(rule, 1);
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(subs); i++)
                if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(subs, i)))
                    goto bad_runners;
            if (options != Py_None && !is_options(options))
                goto bad_runners;
        }
    }
    memset(self->python_flags, 0, sizeof(self->python_flags));
    PyObject *flags = PyDict_GetItemString(tables, "python_flags");
    PyObject *iter = flags != NULL ? PyObject_GetIter(flags) : NULL;
    if (iter == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_KeyError, "tables lack python_flags");
        return -1;
    }
    PyObject *item;
    while ((item = PyIter_Next(iter)) != NULL) {
        int ok = PyUnicode_Check(item) && PyUnicode_GET_LENGTH(item) == 1;
        if (ok && PyUnicode_READ_CHAR(item, 0) < 128)
            self->python_flags[PyUnicode_READ_CHAR(item, 0)] = 1;
        Py_DECREF(item);
        if (!ok) {
            Py_DECREF(iter);
            PyErr_SetString(PyExc_TypeError, "python_flags: characters");
            return -1;
        }
    }
    Py_DECREF(iter);
    if (PyErr_Occurred())
        return -1;
    PyObject *v = PyDict_GetItemString(tables, "max_depth");
    PyObject *w = PyDict_GetItemString(tables, "max_nesting");
    if (v == NULL || w == NULL || !PyLong_Check(v) || !PyLong_Check(w)) {
        PyErr_SetString(PyExc_TypeError, "max_depth, max_nesting: ints");
        return -1;
    }
    self->max_depth = PyLong_AsLong(v);
    self->max_nesting = PyLong_AsLong(w);
    if (PyErr_Occurred())
        return -1;
    self->ready = 1;
    return 0;
bad_runners:
    PyErr_SetString(PyExc_TypeError, "runners: tuples of (subcommands, options or None)");
    return -1;
}

static void
Reader_dealloc(Reader *self)
{
    Py_XDECREF(self->rules);
    PyObject **slots[] = {&self->keywords, &self->not_commands, &self->wrappers,
        &self->wrapper_value_options, &self->run_words, &self->module_runners, &self->runners,
        &self->runner_global_options, &self->python_value_options, &self->shells,
        &self->special_names, &self->version_words, &self->exec_options,
        &self->global_value_options, &self->waits, &self->preparations, &self->rank,
        &self->writes, &self->normpath};
    for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++)
        Py_CLEAR(*slots[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Reader_methods[] = {
    {"analyze", (PyCFunction)(void (*)(void))Reader_analyze, METH_FASTCALL,
     "analyze(text, depth=0): ShellReader.analyze's (kind, target), or None where Python "
     "reads the text."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "otel_loopguard.kinds._reader.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Reader(rules, tables): the shell reader of a compiled command table.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Reader_init,
    .tp_dealloc = (destructor)Reader_dealloc,
    .tp_methods = Reader_methods,
};

static PyMethodDef module_methods[] = {
    {"strip_heredocs", module_strip_heredocs, METH_O,
     "strip_heredocs(text): _lexer.strip_heredocs(text) as the reader does it, or None where "
     "it leaves the text to Python (a line that opens a heredoc past ASCII)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_reader",
    "Optional C accelerator of the shell reader (ShellReader.analyze).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__reader(void)
{
    struct { PyObject **slot; const char *text; } strings[] = {
        {&s_mutating, "mutating"}, {&s_read, "read"}, {&s_poll, "poll"},
        {&s_default, "default"}, {&s_exempt, "exempt"}, {&s_wait, "wait"}, {&s_empty, ""},
        {&s_python, "python"}, {&s_pip, "pip"}, {&s_pypy, "pypy"}, {&s_heredoc, "<<"},
        {&s_newline, "\n"},
    };
    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++)
        if (*strings[i].slot == NULL
                && (*strings[i].slot = PyUnicode_InternFromString(strings[i].text)) == NULL)
            return NULL;
    init_classes();
    if (PyType_Ready(&ReaderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&ReaderType);
    if (PyModule_AddObject(m, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(&ReaderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
