/*
 * monitor.stats.changepoint.ckernel: one round of the e-detector components, compiled.
 *
 * The same arithmetic as RiskIncreaseDetector's pure-Python round
 * (monitor/stats/changepoint/detector.py, _advance_py), in the same order, through the same C
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

static int float_item(PyObject *seq, Py_ssize_t i, double *out) {
    PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
    if (!PyFloat_CheckExact(o)) {
        PyErr_SetString(PyExc_TypeError, "expected float items");
        return -1;
    }
    *out = PyFloat_AS_DOUBLE(o);
    return 0;
}

/*
 * advance(sr, cu, start, seg, xs, los, frs, alpha, t, use_sr) -> float
 *
 * sr, cu, seg: lists of J floats; start: list of J ints; xs, los: lists or tuples of V floats;
 * frs: tuple of K floats with J = V * K. Updates the four lists in place and returns the
 * largest entry of sr (use_sr true) or cu.
 */
static PyObject *advance(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "advance takes 10 arguments");
        return NULL;
    }
    PyObject *sr = args[0], *cu = args[1], *start = args[2], *seg = args[3];
    PyObject *xs = args[4], *los = args[5], *frs = args[6];
    if (!PyList_CheckExact(sr) || !PyList_CheckExact(cu) || !PyList_CheckExact(start)
        || !PyList_CheckExact(seg)) {
        PyErr_SetString(PyExc_TypeError, "sr, cu, start and seg must be lists");
        return NULL;
    }
    if (!(PyList_CheckExact(xs) || PyTuple_CheckExact(xs))
        || !(PyList_CheckExact(los) || PyTuple_CheckExact(los)) || !PyTuple_CheckExact(frs)) {
        PyErr_SetString(PyExc_TypeError, "xs and los must be lists or tuples, frs a tuple");
        return NULL;
    }
    double alpha = PyFloat_AsDouble(args[7]);
    if (alpha == -1.0 && PyErr_Occurred()) return NULL;
    PyObject *t = args[8];
    if (!PyLong_CheckExact(t)) {
        PyErr_SetString(PyExc_TypeError, "t must be an int");
        return NULL;
    }
    int use_sr = PyObject_IsTrue(args[9]);
    if (use_sr < 0) return NULL;
    Py_ssize_t v_n = PySequence_Fast_GET_SIZE(xs), k_n = PyTuple_GET_SIZE(frs);
    Py_ssize_t j_n = v_n * k_n;
    if (PySequence_Fast_GET_SIZE(los) != v_n || PyList_GET_SIZE(sr) != j_n
        || PyList_GET_SIZE(cu) != j_n || PyList_GET_SIZE(start) != j_n
        || PyList_GET_SIZE(seg) != j_n || j_n == 0) {
        PyErr_SetString(PyExc_ValueError, "inconsistent sizes");
        return NULL;
    }
    /* check every input first: a type error leaves the state untouched */
    for (Py_ssize_t j = 0; j < j_n; j++) {
        if (!PyFloat_CheckExact(PyList_GET_ITEM(sr, j)) || !PyFloat_CheckExact(PyList_GET_ITEM(cu, j))
            || !PyFloat_CheckExact(PyList_GET_ITEM(seg, j))) {
            PyErr_SetString(PyExc_TypeError, "state lists must hold floats");
            return NULL;
        }
    }
    for (Py_ssize_t k = 0; k < k_n; k++) {
        if (!PyFloat_CheckExact(PyTuple_GET_ITEM(frs, k))) {
            PyErr_SetString(PyExc_TypeError, "frs must hold floats");
            return NULL;
        }
    }
    double best = -INFINITY;
    Py_ssize_t j = 0;
    for (Py_ssize_t v = 0; v < v_n; v++) {
        double xv, lv;
        if (float_item(xs, v, &xv) < 0 || float_item(los, v, &lv) < 0) return NULL;
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
    }
    return PyFloat_FromDouble(best);
}

static PyMethodDef methods[] = {
    {"advance", (PyCFunction)(void (*)(void))advance, METH_FASTCALL,
     "advance(sr, cu, start, seg, xs, los, frs, alpha, t, use_sr) -> float\n\n"
     "One round of the e-detector components, in place; returns the largest statistic."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "monitor.stats.changepoint.ckernel",
    "Compiled round of the e-detector components (bit-identical to the Python path).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_ckernel(void) { return PyModule_Create(&module); }
