/*
 * monitor.stats.betting.cedges: the mixture tables of EdgeWalk (bernstein_edges.py), compiled.
 *
 * A table only filters: EdgeWalk decides a point from it when the value is clear of the
 * threshold by a margin (1e-9 (1 + |threshold|), far above rounding) and otherwise in Python
 * floats (bernstein.mixture_rejects), so any table within rounding of the exact mixtures gives
 * the same decisions, the same bounds and the same state. This one computes each row's
 * quadratic bound with the Python path's operations in the same order, and the mixture
 * log mean_s exp(Q_s) only where it could be near the threshold: the mixture lies in
 * [max_s Q_s - log S, max_s Q_s], so elsewhere the table holds that interval's near end, which
 * is decided the same way. (tests/stats/betting/test_cedges.py compares the decisions.)
 * Optional: without it, EdgeWalk computes the tables with numpy.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

static int get_buffer(PyObject *o, Py_buffer *view, int writable, int ndim, const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, view, flags) < 0) return -1;
    if (view->ndim != ndim || view->itemsize != 8 || view->format == NULL
        || strcmp(view->format, "d") != 0) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous float64 array of %d dims",
                     name, ndim);
        return -1;
    }
    return 0;
}

/*
 * mixtures(sums, j, r0, r1, upper, point, width, grid_size, clear_accept, clear_reject, out)
 *
 * sums: (k, 5, R) float64, C-contiguous; rows r0..r1-1 are the member's; out: (k - j, width)
 * float64, C-contiguous, written: out[i, p] is the mixture at round j + i of the grid point
 * (point - p) / grid_size (upper) or (point + p) / grid_size, in the sense above.
 */
static PyObject *mixtures(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "mixtures takes 11 arguments");
        return NULL;
    }
    Py_ssize_t ints[6];  /* j, r0, r1, point, width, grid */
    const int at[6] = {1, 2, 3, 5, 6, 7};
    for (int i = 0; i < 6; i++) {
        ints[i] = PyNumber_AsSsize_t(args[at[i]], PyExc_OverflowError);
        if (ints[i] == -1 && PyErr_Occurred()) return NULL;
    }
    Py_ssize_t j = ints[0], r0 = ints[1], r1 = ints[2], point = ints[3], width = ints[4];
    Py_ssize_t grid = ints[5];
    int upper = PyObject_IsTrue(args[4]);
    if (upper < 0) return NULL;
    double clear_accept = PyFloat_AsDouble(args[8]);
    if (clear_accept == -1.0 && PyErr_Occurred()) return NULL;
    double clear_reject = PyFloat_AsDouble(args[9]);
    if (clear_reject == -1.0 && PyErr_Occurred()) return NULL;
    /* grid points exact in doubles, and point +- p without overflow */
    const Py_ssize_t exact = (Py_ssize_t)1 << 53;
    if (point > exact || point < -exact || width > exact) {
        PyErr_SetString(PyExc_ValueError, "mixtures: point or width beyond 2**53");
        return NULL;
    }
    Py_buffer sv, ov;
    if (get_buffer(args[0], &sv, 0, 3, "sums") < 0) return NULL;
    if (get_buffer(args[10], &ov, 1, 2, "out") < 0) {
        PyBuffer_Release(&sv);
        return NULL;
    }
    Py_ssize_t k = sv.shape[0], n_rows = sv.shape[2];
    if (sv.shape[1] != 5 || j < 0 || j >= k || r0 < 0 || r1 <= r0 || r1 > n_rows
        || width < 1 || grid < 1 || ov.shape[0] != k - j || ov.shape[1] != width) {
        PyBuffer_Release(&sv);
        PyBuffer_Release(&ov);
        PyErr_SetString(PyExc_ValueError, "mixtures: inconsistent shapes or indices");
        return NULL;
    }
    const double *s = (const double *)sv.buf;
    double *out = (double *)ov.buf;
    Py_ssize_t rows = r1 - r0;
    double log_rows = log((double)rows);
    double qbuf[64];
    double *q = rows <= 64 ? qbuf : PyMem_Malloc((size_t)rows * sizeof(double));
    if (q == NULL) {
        PyBuffer_Release(&sv);
        PyBuffer_Release(&ov);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t r = j; r < k; r++) {
        const double *a = s + (r * 5 + 0) * n_rows, *b = s + (r * 5 + 1) * n_rows;
        const double *c = s + (r * 5 + 2) * n_rows, *d = s + (r * 5 + 3) * n_rows;
        const double *e = s + (r * 5 + 4) * n_rows;
        double *row_out = out + (r - j) * width;
        for (Py_ssize_t p = 0; p < width; p++) {
            double m = (double)(upper ? point - p : point + p) / (double)grid;
            double top = -INFINITY;
            int finite = 1;
            for (Py_ssize_t i = 0; i < rows; i++) {
                Py_ssize_t x = r0 + i;
                double lin = upper ? m * a[x] - b[x] : b[x] - m * a[x];
                double quad = (m * c[x] - 2.0 * d[x]) * m + e[x];
                q[i] = lin + quad;
                finite &= isfinite(q[i]) != 0;
                if (q[i] > top || i == 0) top = q[i];
            }
            double v;
            if (!finite) {
                v = NAN;  /* no shortcut: EdgeWalk decides the point exactly, as numpy's NaN */
            } else if (rows == 1 || top < clear_accept) {
                v = top;  /* one row: its bound; else the mixture <= top: clearly accepted */
            } else if (top - log_rows >= clear_reject) {
                v = top - log_rows;  /* the mixture >= top - log S: clearly rejected */
            } else {
                double sum = 0.0;
                for (Py_ssize_t i = 0; i < rows; i++) sum += exp(q[i] - top);
                v = log(sum / (double)rows) + top;
            }
            row_out[p] = v;
        }
    }
    if (q != qbuf) PyMem_Free(q);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ov);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"mixtures", (PyCFunction)(void (*)(void))mixtures, METH_FASTCALL,
     "mixtures(sums, j, r0, r1, upper, point, width, grid_size, clear_accept, clear_reject, out)"
     "\n\nFill an EdgeWalk table (a filter: exact where it could be near the threshold)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "monitor.stats.betting.cedges",
    "Compiled mixture tables of EdgeWalk (the same decisions as the numpy tables).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_cedges(void) { return PyModule_Create(&module); }
