/*
 * monitor.stats.changepoint.ckernel: one round of the e-detector components, compiled.
 *
 * The same arithmetic as RiskIncreaseDetector's pure-Python round
 * (monitor/stats/changepoint/rounds.py, advance_py), in the same order, through the same C
 * library functions that Python's math.log1p and math.exp call, so every state value is
 * bit-identical to the Python path (tests/stats/changepoint/test_ckernel.py compares them).
 * Built without floating-point contraction or fast-math (setup.py). Optional: when it is not
 * built, the detectors run the Python path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

/* math.log1p of CPython: log1p, except that a zero argument is returned as it is (sign kept). */
static double py_log1p(double x) { return x == 0.0 ? x : log1p(x); }

/* Set item i of a list to a new float; returns -1 on a memory error. */
static int set_float(PyObject *list, Py_ssize_t i, double v) {
    PyObject *f = PyFloat_FromDouble(v);
    if (f == NULL) return -1;
    PyObject *old = PyList_GET_ITEM(list, i);
    PyList_SET_ITEM(list, i, f);
    Py_DECREF(old);
    return 0;
}

/* The view's observation (x) or bound (lo) v: a float, or item v of a list or tuple. */
static PyObject *view_item(PyObject *x, Py_ssize_t v) {
    if (PyFloat_CheckExact(x)) return x;
    return PyList_CheckExact(x) ? PyList_GET_ITEM(x, v) : PyTuple_GET_ITEM(x, v);
}

/* Whether x holds n views: a float (n == 1), or a list or tuple of n items. */
static int holds_views(PyObject *x, Py_ssize_t n) {
    if (PyFloat_CheckExact(x)) return n == 1;
    if (PyList_CheckExact(x)) return PyList_GET_SIZE(x) == n;
    if (PyTuple_CheckExact(x)) return PyTuple_GET_SIZE(x) == n;
    return 0;
}

/*
 * advance(sr, cu, start, seg, total, xs, los, frs, alpha, t, use_sr) -> float | None
 *
 * sr, cu, seg: lists of J floats; start: list of J ints; total: list of V floats; xs, los: V
 * views each (a float when V == 1, else a list or tuple of floats); frs: tuple of K floats
 * with J = V * K. When every view is a plain float with -inf < lo < alpha and
 * lo <= x < inf, updates the five lists in place and returns the largest entry of sr
 * (use_sr true) or cu; otherwise returns None and changes nothing (the caller explains).
 */
static PyObject *advance(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "advance takes 11 arguments");
        return NULL;
    }
    PyObject *sr = args[0], *cu = args[1], *start = args[2], *seg = args[3], *tot = args[4];
    PyObject *xs = args[5], *los = args[6], *frs = args[7];
    if (!PyList_CheckExact(sr) || !PyList_CheckExact(cu) || !PyList_CheckExact(start)
        || !PyList_CheckExact(seg) || !PyList_CheckExact(tot) || !PyTuple_CheckExact(frs)) {
        PyErr_SetString(PyExc_TypeError, "sr, cu, start, seg and total must be lists, frs a tuple");
        return NULL;
    }
    double alpha = PyFloat_AsDouble(args[8]);
    if (alpha == -1.0 && PyErr_Occurred()) return NULL;
    PyObject *t = args[9];
    if (!PyLong_CheckExact(t)) {
        PyErr_SetString(PyExc_TypeError, "t must be an int");
        return NULL;
    }
    int use_sr = PyObject_IsTrue(args[10]);
    if (use_sr < 0) return NULL;
    Py_ssize_t v_n = PyList_GET_SIZE(tot), k_n = PyTuple_GET_SIZE(frs);
    Py_ssize_t j_n = v_n * k_n;
    if (PyList_GET_SIZE(sr) != j_n || PyList_GET_SIZE(cu) != j_n
        || PyList_GET_SIZE(start) != j_n || PyList_GET_SIZE(seg) != j_n || j_n == 0) {
        PyErr_SetString(PyExc_ValueError, "inconsistent sizes");
        return NULL;
    }
    /* check every input first: nothing changes unless the whole round is valid */
    for (Py_ssize_t j = 0; j < j_n; j++) {
        if (!PyFloat_CheckExact(PyList_GET_ITEM(sr, j)) || !PyFloat_CheckExact(PyList_GET_ITEM(cu, j))
            || !PyFloat_CheckExact(PyList_GET_ITEM(seg, j))
            || !PyLong_CheckExact(PyList_GET_ITEM(start, j))) {
            PyErr_SetString(PyExc_TypeError, "state lists must hold floats (start: ints)");
            return NULL;
        }
    }
    for (Py_ssize_t k = 0; k < k_n; k++) {
        if (!PyFloat_CheckExact(PyTuple_GET_ITEM(frs, k))) {
            PyErr_SetString(PyExc_TypeError, "frs must hold floats");
            return NULL;
        }
    }
    for (Py_ssize_t v = 0; v < v_n; v++) {
        if (!PyFloat_CheckExact(PyList_GET_ITEM(tot, v))) {
            PyErr_SetString(PyExc_TypeError, "total must hold floats");
            return NULL;
        }
    }
    if (!holds_views(xs, v_n) || !holds_views(los, v_n)) Py_RETURN_NONE;
    for (Py_ssize_t v = 0; v < v_n; v++) {
        PyObject *xo = view_item(xs, v), *lo = view_item(los, v);
        if (!PyFloat_CheckExact(xo) || !PyFloat_CheckExact(lo)) Py_RETURN_NONE;
        double xv = PyFloat_AS_DOUBLE(xo), lv = PyFloat_AS_DOUBLE(lo);
        if (!(-INFINITY < lv && lv < alpha && lv <= xv && xv < INFINITY)) Py_RETURN_NONE;
        /* every factor 1 + lam (x - alpha) must be > 0 in floating point too (a bound lo within
         * rounding of alpha can overflow lam): else log1p has no value */
        double den = alpha - lv, dx = xv - alpha;
        for (Py_ssize_t k = 0; k < k_n; k++)
            if (!(PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(frs, k)) / den * dx > -1.0)) Py_RETURN_NONE;
    }
    double best = -INFINITY;
    Py_ssize_t j = 0;
    for (Py_ssize_t v = 0; v < v_n; v++) {
        double xv = PyFloat_AS_DOUBLE(view_item(xs, v));
        double lv = PyFloat_AS_DOUBLE(view_item(los, v));
        double den = alpha - lv;
        double dx = xv - alpha;
        for (Py_ssize_t k = 0; k < k_n; k++, j++) {
            double f = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(frs, k));
            double log_l = py_log1p(f / den * dx);
            double a = PyFloat_AS_DOUBLE(PyList_GET_ITEM(sr, j));
            double s = log_l + (a > 0.0 ? a + py_log1p(exp(-a)) : py_log1p(exp(a)));
            if (set_float(sr, j, s) < 0) return NULL;
            double c = PyFloat_AS_DOUBLE(PyList_GET_ITEM(cu, j));
            double m;
            if (c <= 0.0) {
                m = log_l + 0.0;
                Py_INCREF(t);
                PyObject *old = PyList_GET_ITEM(start, j);
                PyList_SET_ITEM(start, j, t);
                Py_DECREF(old);
                if (set_float(seg, j, xv) < 0) return NULL;
            } else {
                m = log_l + c;
                if (set_float(seg, j, PyFloat_AS_DOUBLE(PyList_GET_ITEM(seg, j)) + xv) < 0)
                    return NULL;
            }
            if (set_float(cu, j, m) < 0) return NULL;
            double stat = use_sr ? s : m;
            if (stat > best || j == 0) best = stat;
        }
        if (set_float(tot, v, PyFloat_AS_DOUBLE(PyList_GET_ITEM(tot, v)) + xv) < 0) return NULL;
    }
    return PyFloat_FromDouble(best);
}

static PyMethodDef methods[] = {
    {"advance", (PyCFunction)(void (*)(void))advance, METH_FASTCALL,
     "advance(sr, cu, start, seg, total, xs, los, frs, alpha, t, use_sr) -> float | None\n\n"
     "One valid round of the e-detector components, in place; returns the largest statistic\n"
     "(None, changing nothing, unless every view has floats -inf < lo < alpha, lo <= x < inf)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "monitor.stats.changepoint.ckernel",
    "Compiled round of the e-detector components (bit-identical to the Python path).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_ckernel(void) { return PyModule_Create(&module); }
