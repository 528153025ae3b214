/*
 * monitor.stats.betting.ckernel: the per-round arithmetic of PlugInEProcess, compiled.
 *
 * The same operations as the pure-Python reference in monitor/stats/betting/plugin.py
 * (_scale_cells_py and plugin_rho), in the same order, so every value is bit-identical to the
 * Python path (tests/stats/betting/test_ckernel.py compares them). Built without
 * floating-point contraction or fast-math (setup.py). Optional: when it is not built, the
 * e-processes run the Python path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static int as_double(PyObject *o, double *out) {
    if (!PyFloat_CheckExact(o)) {
        PyErr_SetString(PyExc_TypeError, "expected a float");
        return -1;
    }
    *out = PyFloat_AS_DOUBLE(o);
    return 0;
}

/*
 * scale_cells(u, bets, x) -> (list, float)
 *
 * New cell wealths [u_k * (1 + bets_k * x)] and their sum, added left to right from 0.0 (as
 * Python's sum of floats).
 */
static PyObject *scale_cells(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "scale_cells takes 3 arguments");
        return NULL;
    }
    PyObject *u = args[0], *bets = args[1];
    double x;
    if (!PyList_CheckExact(u) || !PyList_CheckExact(bets)) {
        PyErr_SetString(PyExc_TypeError, "u and bets must be lists");
        return NULL;
    }
    if (as_double(args[2], &x) < 0) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(u);
    if (PyList_GET_SIZE(bets) != n) {
        PyErr_SetString(PyExc_ValueError, "u and bets differ in length");
        return NULL;
    }
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    double tot = 0.0;
    for (Py_ssize_t k = 0; k < n; k++) {
        double a, b;
        if (as_double(PyList_GET_ITEM(u, k), &a) < 0
            || as_double(PyList_GET_ITEM(bets, k), &b) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        double v = a * (1.0 + b * x);
        PyObject *f = PyFloat_FromDouble(v);
        if (f == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, f);
        tot += v;
    }
    PyObject *res = Py_BuildValue("(Nd)", out, tot);
    return res;
}

/*
 * plugin_rho(t, sums, alpha, c, certify, rhos) -> float
 *
 * The plug-in reliance (plugin.py's plugin_rho) for t >= MIN_ROUNDS: the caller handles
 * smaller t. sums: 5 floats; rhos: a list of floats.
 */
static PyObject *plugin_rho(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "plugin_rho takes 6 arguments");
        return NULL;
    }
    PyObject *sums = args[1], *rhos = args[5];
    if (!PyLong_CheckExact(args[0]) || !PyList_CheckExact(sums) || PyList_GET_SIZE(sums) != 5
        || !PyList_CheckExact(rhos)) {
        PyErr_SetString(PyExc_TypeError, "need an int t, a list of 5 sums and a list of rhos");
        return NULL;
    }
    double t = PyLong_AsDouble(args[0]);
    if (t == -1.0 && PyErr_Occurred()) return NULL;
    double s[5], alpha, c;
    for (int i = 0; i < 5; i++)
        if (as_double(PyList_GET_ITEM(sums, i), &s[i]) < 0) return NULL;
    if (as_double(args[2], &alpha) < 0 || as_double(args[3], &c) < 0) return NULL;
    int certify = PyObject_IsTrue(args[4]);
    if (certify < 0) return NULL;
    double ml = s[0] / t, md = s[1] / t;
    double vl = s[2] / t - ml * ml;
    double cov = s[3] / t - ml * md;
    double vd = s[4] / t - md * md;
    double r0 = -cov / (vd + 1e-12);
    r0 = r0 > 0.0 ? r0 : 0.0;  /* max(0.0, r0): 0.0 unless r0 is larger */
    r0 = r0 < 1.0 ? r0 : 1.0;  /* min(1.0, r0): 1.0 unless r0 is smaller */
    double e, off;
    if (certify) {
        e = alpha - (ml + r0 * md);
        off = 1.0 - alpha;
    } else {
        e = (ml + r0 * md) - alpha;
        off = alpha;
    }
    if (e <= 0.0) return PyFloat_FromDouble(r0);
    double best_g = 0.0, best_r = r0, e2 = e * e;
    Py_ssize_t n = PyList_GET_SIZE(rhos);
    for (Py_ssize_t k = 0; k < n; k++) {
        double r;
        if (as_double(PyList_GET_ITEM(rhos, k), &r) < 0) return NULL;
        double v = vl + 2.0 * r * cov + r * r * vd;
        double m2 = (v > 0.0 ? v : 0.0) + e2;
        double lam = e / (m2 > 1e-12 ? m2 : 1e-12);
        double cap = c / (off + r);
        if (lam > cap) lam = cap;
        double g = lam * e - 0.5 * lam * lam * m2;
        if (g > best_g) {
            best_g = g;
            best_r = r;
        }
    }
    return PyFloat_FromDouble(best_r);
}

static PyMethodDef methods[] = {
    {"scale_cells", (PyCFunction)(void (*)(void))scale_cells, METH_FASTCALL,
     "scale_cells(u, bets, x) -> (list, float)\n\nNew cell wealths and their sum."},
    {"plugin_rho", (PyCFunction)(void (*)(void))plugin_rho, METH_FASTCALL,
     "plugin_rho(t, sums, alpha, c, certify, rhos) -> float\n\nThe plug-in reliance (t >= 2)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "monitor.stats.betting.ckernel",
    "Compiled round of the plug-in e-processes (bit-identical to the Python path).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_ckernel(void) { return PyModule_Create(&module); }
