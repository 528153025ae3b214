/*
 * monitor.stats.betting.ckernel: the per-round arithmetic of PlugInEProcess, compiled.
 *
 * The same operations as the pure-Python references in monitor/stats/betting/plugin_round.py
 * (step_py and reliance_py) and plugin_bounds.py (worst_log_factors_py, the bound of a round
 * not applied yet), in the same order, through the C library's log (which
 * Python's math.log calls), so every value is bit-identical to the
 * Python path (tests/stats/betting/test_ckernel.py compares them). Built without
 * floating-point contraction or fast-math (setup.py). Optional: when it is not built, the
 * e-processes run the Python path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

/* A float (or a subclass: numpy's float64), or an int of at most 2**26 in size: Python's
 * arithmetic on such an int (even int * int) gives the same bits as on its double. Larger
 * ints are refused rather than computed differently. */
static int as_double(PyObject *o, double *out) {
    if (PyFloat_Check(o)) {
        *out = PyFloat_AS_DOUBLE(o);
        return 0;
    }
    if (PyLong_Check(o)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (!overflow && v <= (1LL << 26) && v >= -(1LL << 26)) {
            *out = (double)v;
            return 0;
        }
    }
    PyErr_SetString(PyExc_TypeError, "expected a float (or an int of at most 2**26)");
    return -1;
}

/* math.log of CPython on a float: log of a positive or infinite x, NaN kept, else the error. */
static int py_log(double x, double *out) {
    if (isnan(x) || x == INFINITY || x > 0.0) {
        *out = isnan(x) || x == INFINITY ? x : log(x);
        return 0;
    }
    PyErr_SetString(PyExc_ValueError, "math domain error");
    return -1;
}

/*
 * step(u, bets, x, ref) -> (list, float, float)
 *
 * One round of the cells: new wealths v_k = u_k * (1 + bets_k * x) and their sum, added left
 * to right from 0.0 (as plugin_round.py's sum_in_order); a sum outside (1e-150, 1e150) is moved into
 * ref (cells divided by it, ref + log(sum), cells summed again). Returns the cells, ref and
 * the mixture's log wealth ref + log(sum).
 */
static PyObject *step(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "step takes 4 arguments");
        return NULL;
    }
    PyObject *u = args[0], *bets = args[1];
    double x, ref;
    if (!PyList_CheckExact(u) || !PyList_CheckExact(bets)) {
        PyErr_SetString(PyExc_TypeError, "u and bets must be lists");
        return NULL;
    }
    if (as_double(args[2], &x) < 0 || as_double(args[3], &ref) < 0) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(u);
    if (PyList_GET_SIZE(bets) != n) {
        PyErr_SetString(PyExc_ValueError, "u and bets differ in length");
        return NULL;
    }
    double vals[64];
    double *v = n <= 64 ? vals : PyMem_Malloc((size_t)n * sizeof(double));
    if (v == NULL) return PyErr_NoMemory();
    double tot = 0.0;
    for (Py_ssize_t k = 0; k < n; k++) {
        double a, b;
        if (as_double(PyList_GET_ITEM(u, k), &a) < 0
            || as_double(PyList_GET_ITEM(bets, k), &b) < 0) {
            if (v != vals) PyMem_Free(v);
            return NULL;
        }
        v[k] = a * (1.0 + b * x);
        tot += v[k];
    }
    if (!(1e-150 < tot && tot < 1e150)) {
        if (tot == 0.0 && n > 0) {  /* never with c < 1: every factor is >= 1 - c > 0 */
            if (v != vals) PyMem_Free(v);
            PyErr_SetString(PyExc_ZeroDivisionError, "float division by zero");
            return NULL;
        }
        double tot2 = 0.0;
        for (Py_ssize_t k = 0; k < n; k++) {
            v[k] = v[k] / tot;
            tot2 += v[k];
        }
        double lt;
        if (py_log(tot, &lt) < 0) {
            if (v != vals) PyMem_Free(v);
            return NULL;
        }
        ref = ref + lt;
        tot = tot2;
    }
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        if (v != vals) PyMem_Free(v);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *f = PyFloat_FromDouble(v[k]);
        if (f == NULL) {
            Py_DECREF(out);
            if (v != vals) PyMem_Free(v);
            return NULL;
        }
        PyList_SET_ITEM(out, k, f);
    }
    if (v != vals) PyMem_Free(v);
    double lt;
    if (py_log(tot, &lt) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return Py_BuildValue("(Ndd)", out, ref, ref + lt);
}

/*
 * step_switch(u, bets, x, ref, app, napp, alpha, c, sgn, off, rho) -> (list, float, float)
 *
 * One round of a row with the switch cell (plugin_switch.py), as
 * step(u, bets + [sb], x, ref) where sb is the switch cell's bet (plugin_switch.py's
 * step_switch_py): the cap c / (off + rho) when sure(app, napp, alpha, c, sgn, off, rho),
 * else follow_bet(u, bets) clipped at the cap. u has len(bets) + 1 cells; app is a list of 5
 * floats. The same operations in the same order as the Python twin.
 */
static PyObject *step_switch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "step_switch takes 11 arguments");
        return NULL;
    }
    PyObject *u = args[0], *bets = args[1], *app = args[4];
    if (!PyList_CheckExact(u) || !PyList_CheckExact(bets) || !PyList_CheckExact(app)
        || PyList_GET_SIZE(app) != 5) {
        PyErr_SetString(PyExc_TypeError, "u, bets and app (5 floats) must be lists");
        return NULL;
    }
    double x, ref, alpha, c, sgn, off, rho, a[5];
    if (as_double(args[2], &x) < 0 || as_double(args[3], &ref) < 0
        || as_double(args[6], &alpha) < 0 || as_double(args[7], &c) < 0
        || as_double(args[8], &sgn) < 0 || as_double(args[9], &off) < 0
        || as_double(args[10], &rho) < 0)
        return NULL;
    for (int i = 0; i < 5; i++)
        if (as_double(PyList_GET_ITEM(app, i), &a[i]) < 0) return NULL;
    long long napp = PyLong_AsLongLong(args[5]);
    if (napp == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t g = PyList_GET_SIZE(bets), n = PyList_GET_SIZE(u);
    if (n != g + 1) {
        PyErr_SetString(PyExc_ValueError, "u must have one cell more than bets");
        return NULL;
    }
    double bvals[64], uvals[64];
    double *b = n <= 64 ? bvals : PyMem_Malloc((size_t)n * sizeof(double));
    double *uv = n <= 64 ? uvals : PyMem_Malloc((size_t)n * sizeof(double));
    if (b == NULL || uv == NULL) {
        if (b != NULL && b != bvals) PyMem_Free(b);
        if (uv != NULL && uv != uvals) PyMem_Free(uv);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    for (Py_ssize_t k = 0; k < n; k++)
        if (as_double(PyList_GET_ITEM(u, k), &uv[k]) < 0) goto done;
    for (Py_ssize_t k = 0; k < g; k++)
        if (as_double(PyList_GET_ITEM(bets, k), &b[k]) < 0) goto done;
    double cap = c / (off + rho);
    int is_sure = 0;
    if (napp >= 2) {  /* plugin_switch.sure */
        double t = (double)napp;
        double ml = a[0] / t, md = a[1] / t;
        double vl = a[2] / t - ml * ml;
        double cov = a[3] / t - ml * md;
        double vd = a[4] / t - md * md;
        double e = sgn * (alpha - (ml + rho * md));
        double v = vl + 2.0 * rho * cov + rho * rho * vd;
        v = ((v > 0.0 ? v : 0.0) * t + 2.0 * 0.25) / (t + 2.0);  /* N0 = 2 */
        double lo = e - 2.0 * sqrt(v / t);  /* Z = 2 */
        is_sure = lo > 0.0 && lo >= c / (off + rho) * (v + e * e);
    }
    double sb;
    if (is_sure) {
        sb = cap;
    } else {  /* plugin_switch.follow_bet: sums from 0 left to right, as Python 3.11's sum */
        double den = 0.0, num = 0.0;
        for (Py_ssize_t k = 0; k < g; k++) den += uv[k];
        for (Py_ssize_t k = 0; k < g; k++) num += uv[k] * b[k];
        sb = den > 0.0 ? num / den : 0.0;
        sb = sb < cap ? sb : cap;
    }
    b[g] = sb;
    /* step(u, bets + [sb], x, ref) */
    double tot = 0.0;
    for (Py_ssize_t k = 0; k < n; k++) {
        uv[k] = uv[k] * (1.0 + b[k] * x);
        tot += uv[k];
    }
    if (!(1e-150 < tot && tot < 1e150)) {
        if (tot == 0.0) {  /* never with c < 1: every factor is >= 1 - c > 0 */
            PyErr_SetString(PyExc_ZeroDivisionError, "float division by zero");
            goto done;
        }
        double tot2 = 0.0;
        for (Py_ssize_t k = 0; k < n; k++) {
            uv[k] = uv[k] / tot;
            tot2 += uv[k];
        }
        double lt;
        if (py_log(tot, &lt) < 0) goto done;
        ref = ref + lt;
        tot = tot2;
    }
    double lt;
    if (py_log(tot, &lt) < 0) goto done;
    PyObject *out = PyList_New(n);
    if (out == NULL) goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *f = PyFloat_FromDouble(uv[k]);
        if (f == NULL) {
            Py_DECREF(out);
            goto done;
        }
        PyList_SET_ITEM(out, k, f);
    }
    result = Py_BuildValue("(Ndd)", out, ref, ref + lt);
done:
    if (b != bvals) PyMem_Free(b);
    if (uv != uvals) PyMem_Free(uv);
    return result;
}

/*
 * reliance(sums, human, shift, t, alpha, c, certify, rhos[, judge_prior]) -> float
 *
 * Adds the round to the running sums (sums: a list of 5 floats, updated in place: l, d, l^2,
 * l d, d^2) and returns the plug-in reliance (plugin_round.py's plugin_rho) of the next round from
 * the t rounds they now hold: 0.0 for t < MIN_ROUNDS (2). rhos: a list of floats. judge_prior
 * (default False): plugin_rho's judge prior while the human losses were all 0 (AGREE_RATIO 0.3).
 */
static PyObject *reliance(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 8 && nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "reliance takes 8 or 9 arguments");
        return NULL;
    }
    int judge_prior = nargs == 9 ? PyObject_IsTrue(args[8]) : 0;
    if (judge_prior < 0) return NULL;
    PyObject *sums = args[0], *rhos = args[7];
    if (!PyList_CheckExact(sums) || PyList_GET_SIZE(sums) != 5 || !PyLong_CheckExact(args[3])
        || !PyList_CheckExact(rhos)) {
        PyErr_SetString(PyExc_TypeError, "need a list of 5 sums, an int t and a list of rhos");
        return NULL;
    }
    double s[5], h, d, alpha, c;
    for (int i = 0; i < 5; i++)
        if (as_double(PyList_GET_ITEM(sums, i), &s[i]) < 0) return NULL;
    if (as_double(args[1], &h) < 0 || as_double(args[2], &d) < 0
        || as_double(args[4], &alpha) < 0 || as_double(args[5], &c) < 0)
        return NULL;
    long long tl = PyLong_AsLongLong(args[3]);
    if (tl == -1 && PyErr_Occurred()) return NULL;
    int certify = PyObject_IsTrue(args[6]);
    if (certify < 0) return NULL;
    s[0] = s[0] + h;
    s[1] = s[1] + d;
    s[2] = s[2] + h * h;
    s[3] = s[3] + h * d;
    s[4] = s[4] + d * d;
    for (int i = 0; i < 5; i++) {
        PyObject *f = PyFloat_FromDouble(s[i]);
        if (f == NULL) return NULL;
        PyObject *old = PyList_GET_ITEM(sums, i);
        PyList_SET_ITEM(sums, i, f);
        Py_DECREF(old);
    }
    if (tl < 2) return PyFloat_FromDouble(0.0);
    double t = (double)tl;  /* exact below 2**53, as Python's int / float */
    double ml = s[0] / t, md = s[1] / t;
    double vl = s[2] / t - ml * ml;
    double cov = s[3] / t - ml * md;
    double vd = s[4] / t - md * md;
    if (judge_prior && vl <= 1e-12 && ml <= 1e-12 && s[4] <= 0.3 * s[1]) {
        double p = md > 0.0 ? md : 0.0;  /* max(0.0, md): 0.0 unless md is larger */
        p = p < 1.0 ? p : 1.0;           /* min(1.0, p): 1.0 unless p is smaller */
        vl = p * (1.0 - p);
        cov = -vl;
    }
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

/* The shared part of worst_log_factors and add_worst_log_factors: args[0..6] are (alpha, side,
 * lam, c, human, rho, shift); returns a new list of n floats, s_k + sign * w_k when s is a list
 * (of n floats) or w_k alone when s is NULL, w_k the log of cell k's smallest factor. */
static PyObject *worst_core(PyObject *const *args, PyObject *s, double sign) {
    double alpha, c, shift, h = 0.0, rho = 0.0;
    if (as_double(args[0], &alpha) < 0 || as_double(args[3], &c) < 0
        || as_double(args[6], &shift) < 0)
        return NULL;
    if (!PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "side must be a str");
        return NULL;
    }
    int certify = PyUnicode_CompareWithASCIIString(args[1], "certify") == 0;
    if (PyErr_Occurred()) return NULL;
    double sgn = certify ? 1.0 : -1.0;
    double off = certify ? 1.0 - alpha : alpha;
    if (args[4] == Py_None) h = certify ? 1.0 : 0.0;
    else if (as_double(args[4], &h) < 0) return NULL;
    int known_rho = args[5] != Py_None;
    if (known_rho && as_double(args[5], &rho) < 0) return NULL;
    PyObject *lam = PySequence_Fast(args[2], "lam must be a sequence");
    if (lam == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(lam);
    PyObject **items = PySequence_Fast_ITEMS(lam);
    if (s != NULL && PyList_GET_SIZE(s) != n) {
        Py_DECREF(lam);
        PyErr_SetString(PyExc_ValueError, "sums and lam differ in length");
        return NULL;
    }
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        Py_DECREF(lam);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        double lk;
        if (as_double(items[k], &lk) < 0) goto fail;
        double rhos[3];
        int nr;
        if (known_rho) {
            rhos[0] = rho;
            nr = 1;
        } else {
            if (lk == 0.0) {
                PyErr_SetString(PyExc_ZeroDivisionError, "float division by zero");
                goto fail;
            }
            double star = c / lk - off;  /* where this cell's bet starts being clipped */
            rhos[0] = 0.0;
            rhos[1] = 1.0;
            rhos[2] = star;
            nr = (0.0 < star && star < 1.0) ? 3 : 2;
        }
        double worst = INFINITY;
        for (int i = 0; i < nr; i++) {
            double r = rhos[i];
            double den = off + r;
            if (den == 0.0) {
                PyErr_SetString(PyExc_ZeroDivisionError, "float division by zero");
                goto fail;
            }
            double cap = c / den;
            double bet = lk < cap ? lk : cap;
            double f = 1.0 + bet * sgn * (alpha - (h + r * shift));
            if (f < worst) worst = f;
        }
        double lw;
        if (py_log(worst, &lw) < 0) goto fail;
        if (s != NULL) {
            double a;
            if (as_double(PyList_GET_ITEM(s, k), &a) < 0) goto fail;
            lw = a + sign * lw;
        }
        PyObject *fo = PyFloat_FromDouble(lw);
        if (fo == NULL) goto fail;
        PyList_SET_ITEM(out, k, fo);
    }
    Py_DECREF(lam);
    return out;
fail:
    Py_DECREF(lam);
    Py_DECREF(out);
    return NULL;
}

/*
 * worst_log_factors(alpha, side, lam, c, human, rho, shift) -> list
 *
 * plugin_bounds.py's worst_log_factors_py: per cell k, the log of the smallest factor
 * 1 + bet * sgn * (alpha - (h + r * shift)) over the unknown label (h: 1 certify, 0 violate,
 * when human is None) and the unknown reliance (r in 0, 1 and the clipping point
 * c / lam_k - off when rho is None), bet = min(lam_k, c / (off + r)). side: "certify" or
 * anything else (violate); lam: a list or tuple of floats; human, rho: a float or None.
 */
static PyObject *worst_log_factors(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "worst_log_factors takes 7 arguments");
        return NULL;
    }
    return worst_core(args, NULL, 0.0);
}

/*
 * add_worst_log_factors(s, sign, alpha, side, lam, c, human, rho, shift) -> list
 *
 * plugin_bounds.py's add_worst_log_factors_py: the new list s_k + sign * w_k, w the
 * worst_log_factors of the other arguments; s: a list of floats, or None for zeros (0.0 + ...).
 */
static PyObject *add_worst_log_factors(PyObject *self, PyObject *const *args,
                                       Py_ssize_t nargs) {
    (void)self;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "add_worst_log_factors takes 9 arguments");
        return NULL;
    }
    double sign;
    if (as_double(args[1], &sign) < 0) return NULL;
    PyObject *s = args[0];
    if (s == Py_None) {
        /* zeros: 0.0 + sign * w_k, as the Python twin */
        PyObject *w = worst_core(args + 2, NULL, 0.0);
        if (w == NULL) return NULL;
        Py_ssize_t n = PyList_GET_SIZE(w);
        for (Py_ssize_t k = 0; k < n; k++) {
            PyObject *old = PyList_GET_ITEM(w, k);
            PyObject *f = PyFloat_FromDouble(0.0 + sign * PyFloat_AS_DOUBLE(old));
            if (f == NULL) {
                Py_DECREF(w);
                return NULL;
            }
            PyList_SET_ITEM(w, k, f);
            Py_DECREF(old);
        }
        return w;
    }
    if (!PyList_CheckExact(s)) {
        PyErr_SetString(PyExc_TypeError, "s must be a list or None");
        return NULL;
    }
    return worst_core(args + 2, s, sign);
}

static PyMethodDef methods[] = {
    {"step", (PyCFunction)(void (*)(void))step, METH_FASTCALL,
     "step(u, bets, x, ref) -> (list, float, float)\n\nOne round of the cells: cells, ref, "
     "log wealth."},
    {"step_switch", (PyCFunction)(void (*)(void))step_switch, METH_FASTCALL,
     "step_switch(u, bets, x, ref, app, napp, alpha, c, sgn, off, rho) -> (list, float, "
     "float)\n\nOne round of a row with the switch cell: cells, ref, log wealth."},
    {"reliance", (PyCFunction)(void (*)(void))reliance, METH_FASTCALL,
     "reliance(sums, human, shift, t, alpha, c, certify, rhos[, judge_prior]) -> float\n\nAdd "
     "the round to "
     "the sums; the plug-in reliance of the next round."},
    {"worst_log_factors", (PyCFunction)(void (*)(void))worst_log_factors, METH_FASTCALL,
     "worst_log_factors(alpha, side, lam, c, human, rho, shift) -> list\n\nLog of each "
     "cell's smallest factor over the unknown label and/or reliance."},
    {"add_worst_log_factors", (PyCFunction)(void (*)(void))add_worst_log_factors,
     METH_FASTCALL,
     "add_worst_log_factors(s, sign, alpha, side, lam, c, human, rho, shift) -> list\n\n"
     "s_k + sign * worst_log_factors(...)_k (s None: zeros)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "monitor.stats.betting.ckernel",
    "Compiled round of the plug-in e-processes (bit-identical to the Python path).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_ckernel(void) { return PyModule_Create(&module); }
