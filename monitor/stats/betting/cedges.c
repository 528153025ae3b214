/*
 * monitor.stats.betting.cedges: the mixture tables of IntervalNarrowing
 * (confseq_bernstein_edges.py), compiled.
 *
 * A table only filters: IntervalNarrowing decides a point from it when the value is clear of the
 * threshold by a margin (1e-9 (1 + |threshold|), far above rounding) and otherwise in Python
 * floats (quadratic_wealth.mixture_rejects), so any table within rounding of the exact mixtures
 * gives the same decisions, the same bounds and the same state. This one computes each row's
 * quadratic bound with the Python path's operations in the same order, and the mixture
 * log mean_s exp(Q_s) only where it could be near the threshold: the mixture lies in
 * [max_s Q_s - log S, max_s Q_s], so elsewhere the table holds that interval's near end, which
 * is decided the same way. (tests/stats/betting/test_cedges.py compares the decisions.)
 * Optional: without it, IntervalNarrowing computes the tables with numpy.
 *
 * block_prep and block_terms are SingleSequenceBlockSums.run (confseq_bernstein_block.py) compiled:
 * unlike the tables, every value they write is bit-identical to the numpy path (the same IEEE
 * operations on the same operands in the same order, running sums added strictly in round order,
 * the C library's log1p that Python's math.log1p calls); numpy's own log1p (fan_slope's) is not
 * the C library's, so the caller computes it with numpy between the two calls.
 * (tests/stats/betting/test_confseq_bernstein_block.py compares them.)
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
                v = NAN;  /* no shortcut: IntervalNarrowing decides the point exactly, as numpy's NaN */
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

static int check_shape(Py_buffer *v, Py_ssize_t a, Py_ssize_t b, Py_ssize_t c, Py_ssize_t d) {
    const Py_ssize_t want[4] = {a, b, c, d};
    for (int i = 0; i < v->ndim; i++)
        if (v->shape[i] != want[i]) return -1;
    return 0;
}

/* A sequence of n floats (or ints) into out, as numpy's conversion of a list of them. */
static int read_floats(PyObject *o, Py_ssize_t n, double *out, const char *name) {
    PyObject *seq = PySequence_Fast(o, name);
    if (seq == NULL) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != n) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s must hold %zd values", name, n);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyFloat_AsDouble(items[i]);
        if (out[i] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

/*
 * block_prep(qs, t0, total, dev, mu0, var0, num, fixed_scale, lo, hi, caps, wd, work)
 *
 * The first half of SingleSequenceBlockSums.run. qs: (k, R); total, dev: R floats; mu0, var0, lo,
 * hi: (R,); caps: (2, 1, R); num = 2 log(1 / delta); fixed_scale: None (anytime WSR: the scale of
 * round t is num / (t log1p(t))) or the float num / horizon. Writes wd (2, k + 1, R): the
 * running WSR totals and squared-error sums (row 0 the sums before the block), and work
 * (3, 2, k, R): each side's capped bets lam, their smallest factors zmin = lam (lo - q)
 * (upper) or lam (q - hi) (lower), and fan_slope's log1p argument (0.5 where |zmin| < 1e-3).
 */
static PyObject *block_prep(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError, "block_prep takes 13 arguments");
        return NULL;
    }
    Py_ssize_t t0 = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
    if (t0 == -1 && PyErr_Occurred()) return NULL;
    double num = PyFloat_AsDouble(args[6]);
    if (num == -1.0 && PyErr_Occurred()) return NULL;
    int anytime = args[7] == Py_None;
    double fixed = 0.0;
    if (!anytime) {
        fixed = PyFloat_AsDouble(args[7]);
        if (fixed == -1.0 && PyErr_Occurred()) return NULL;
    }
    Py_buffer bq, bmu, bvar, blo, bhi, bcaps, bwd, bwork;
    Py_buffer *all[8] = {&bq, &bmu, &bvar, &blo, &bhi, &bcaps, &bwd, &bwork};
    const int idx[8] = {0, 4, 5, 8, 9, 10, 11, 12};
    const int dims[8] = {2, 1, 1, 1, 1, 3, 3, 4};
    const char *names[8] = {"qs", "mu0", "var0", "lo", "hi", "caps", "wd", "work"};
    int got = 0;
    PyObject *result = NULL;
    for (; got < 8; got++)
        if (get_buffer(args[idx[got]], all[got], got >= 6, dims[got], names[got]) < 0) goto done;
    Py_ssize_t k = bq.shape[0], R = bq.shape[1];
    if (k < 1 || t0 < 0 || t0 + k > ((Py_ssize_t)1 << 53) || check_shape(&bmu, R, 0, 0, 0)
        || check_shape(&bvar, R, 0, 0, 0) || check_shape(&blo, R, 0, 0, 0)
        || check_shape(&bhi, R, 0, 0, 0) || check_shape(&bcaps, 2, 1, R, 0)
        || check_shape(&bwd, 2, k + 1, R, 0) || check_shape(&bwork, 3, 2, k, R)) {
        PyErr_SetString(PyExc_ValueError, "block_prep: inconsistent shapes");
        goto done;
    }
    const double *qs = bq.buf, *mu0 = bmu.buf, *var0 = bvar.buf, *lo = blo.buf, *hi = bhi.buf;
    const double *caps = bcaps.buf;
    double *tots = bwd.buf, *devs = tots + (k + 1) * R;
    double *lam = bwork.buf, *zmin = lam + 2 * k * R, *safe = zmin + 2 * k * R;
    if (read_floats(args[2], R, tots, "total") < 0 || read_floats(args[3], R, devs, "dev") < 0)
        goto done;
    for (Py_ssize_t i = 0; i < k; i++) {
        /* tots = accumulate([total, *qs]); err = qs - (mu0 + tots[1:]) / (t0 + i + 2), squared */
        double t = (double)t0 + (double)(i + 1), t_next = (double)t0 + (double)(i + 2);
        double scale;
        if (anytime) {
            double tt = (double)(t0 + 1 + i);
            scale = num / (tt * log1p(tt));
        } else {
            scale = fixed;
        }
        const double *q = qs + i * R;
        double *tp = tots + i * R, *tn = tp + R, *dp = devs + i * R, *dn = dp + R;
        for (Py_ssize_t r = 0; r < R; r++) {
            tn[r] = tp[r] + q[r];
            double err = q[r] - (mu0[r] + tn[r]) / t_next;
            err = err * err;
            dn[r] = dp[r] + err;
            /* lams = sqrt(scale / ((var0 + devs before the round) / t)), capped per side */
            double lams = sqrt(scale / ((var0[r] + dp[r]) / t));
            for (int side = 0; side < 2; side++) {
                double cap = caps[side * R + r];
                double l = isnan(lams) ? lams : (isnan(cap) ? cap : (cap < lams ? cap : lams));
                double z = side == 0 ? lo[r] - q[r] : q[r] - hi[r];
                Py_ssize_t at = (side * k + i) * R + r;
                lam[at] = l;
                z = l * z;
                zmin[at] = z;
                safe[at] = fabs(z) < 1e-3 ? 0.5 : z;
            }
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(all[i]);
    return result;
}

/*
 * block_terms(log1p_safe, work, qs, sums, out)
 *
 * The second half of SingleSequenceBlockSums.run: fan_slope of zmin (from numpy's log1p of work[2],
 * the closed form, or the series where |zmin| < 1e-3, less the 1e-9 slack), each round's terms
 * [lam, lam q, k lam^2, k lam^2 q, k lam^2 q^2] per side and their running sums from sums
 * (2, 5, R) into out (2, k + 1, 5, R) (out[:, 0] = sums).
 */
static PyObject *block_terms(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "block_terms takes 5 arguments");
        return NULL;
    }
    Py_buffer blg, bwork, bq, bsums, bout;
    Py_buffer *all[5] = {&blg, &bwork, &bq, &bsums, &bout};
    const int dims[5] = {3, 4, 2, 3, 4};
    const char *names[5] = {"log1p_safe", "work", "qs", "sums", "out"};
    int got = 0;
    PyObject *result = NULL;
    for (; got < 5; got++)
        if (get_buffer(args[got], all[got], got == 4, dims[got], names[got]) < 0) goto done;
    Py_ssize_t k = bq.shape[0], R = bq.shape[1];
    if (check_shape(&blg, 2, k, R, 0) || check_shape(&bwork, 3, 2, k, R)
        || check_shape(&bsums, 2, 5, R, 0) || check_shape(&bout, 2, k + 1, 5, R)) {
        PyErr_SetString(PyExc_ValueError, "block_terms: inconsistent shapes");
        goto done;
    }
    const double *lg = blg.buf, *lam = bwork.buf, *zmin = lam + 2 * k * R, *qs = bq.buf;
    const double *sums = bsums.buf;
    double *out = bout.buf;
    for (int side = 0; side < 2; side++) {
        double *prev = out + side * (k + 1) * 5 * R;
        memcpy(prev, sums + side * 5 * R, (size_t)(5 * R) * sizeof(double));
        for (Py_ssize_t i = 0; i < k; i++) {
            double *cur = prev + 5 * R;
            const double *q = qs + i * R;
            Py_ssize_t base = (side * k + i) * R;
            for (Py_ssize_t r = 0; r < R; r++) {
                double z = zmin[base + r], l = lam[base + r], fs;
                double az = fabs(z);
                if (az < 1e-3) {
                    double series = z * 0.2;
                    series = series + -0.25;
                    series = series * z;
                    series = series + 1.0 / 3.0;
                    series = series * z;
                    series = series + -0.5;
                    double z4 = z * z;
                    z4 = z4 * z4;
                    double d = 1.0 - az;
                    d = d * 6.0;
                    z4 = z4 / d;
                    fs = series - z4;
                } else {
                    fs = lg[base + r] - z;
                    fs = fs / (z * z);
                }
                fs = fs - 1e-9;
                double kl2 = fs * l;
                kl2 = kl2 * l;
                double t3 = kl2 * q[r];
                cur[0 * R + r] = prev[0 * R + r] + l;
                cur[1 * R + r] = prev[1 * R + r] + l * q[r];
                cur[2 * R + r] = prev[2 * R + r] + kl2;
                cur[3 * R + r] = prev[3 * R + r] + t3;
                cur[4 * R + r] = prev[4 * R + r] + t3 * q[r];
            }
            prev = cur;
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(all[i]);
    return result;
}

/*
 * edge_filter(both, segments, points, out)
 *
 * next_rejections' filter (confseq_bernstein_edges.py), compiled. both: (2, k, 5, R) float64 (each
 * side's sums after each round); segments: M (first row, row count) pairs of int (each
 * member's contiguous rows); points: 2 lists of M floats (each member's tested point per
 * side). Writes out (2, k, M): the mixture log mean_s exp(Q_s(point)) of the member's rows
 * (upper side m a - b + (m c - 2 d) m + e, lower side b - m a + ...), within rounding of the
 * numpy filter's; where the largest bound is below clear_accept, that bound (the mixture is
 * at most it); NaN where a bound is NaN or +inf (numpy's filter gives NaN there too). Like the
 * tables, only a filter: candidates are decided exactly in Python floats.
 */
static PyObject *edge_filter(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "edge_filter takes 5 arguments");
        return NULL;
    }
    double clear_accept = PyFloat_AsDouble(args[3]);
    if (clear_accept == -1.0 && PyErr_Occurred()) return NULL;
    Py_buffer bs, bo;
    /* both may be strided (a block's sums after its first row): read through its strides */
    if (PyObject_GetBuffer(args[0], &bs, PyBUF_STRIDES | PyBUF_FORMAT) < 0) return NULL;
    if (bs.ndim != 4 || bs.itemsize != 8 || bs.format == NULL || strcmp(bs.format, "d") != 0) {
        PyBuffer_Release(&bs);
        PyErr_SetString(PyExc_TypeError, "both must be a float64 array of 4 dims");
        return NULL;
    }
    if (get_buffer(args[4], &bo, 1, 3, "out") < 0) {
        PyBuffer_Release(&bs);
        return NULL;
    }
    PyObject *result = NULL, *segs = NULL, *pts = NULL;
    double *buf = NULL;
    Py_ssize_t k = bs.shape[1], R = bs.shape[3];
    segs = PySequence_Fast(args[1], "segments must be a sequence");
    if (segs == NULL) goto done;
    pts = PySequence_Fast(args[2], "points must be a sequence");
    if (pts == NULL) goto done;
    Py_ssize_t M = PySequence_Fast_GET_SIZE(segs);
    if (bs.shape[0] != 2 || bs.shape[2] != 5 || PySequence_Fast_GET_SIZE(pts) != 2
        || check_shape(&bo, 2, k, M, 0)) {
        PyErr_SetString(PyExc_ValueError, "edge_filter: inconsistent shapes");
        goto done;
    }
    buf = PyMem_Malloc((size_t)(2 * M + 2 * M + R + 1) * sizeof(double));
    if (buf == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    double *point = buf, *q = buf + 4 * M;
    Py_ssize_t *first = (Py_ssize_t *)PyMem_Malloc((size_t)(2 * M + 1) * sizeof(Py_ssize_t));
    if (first == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t *count = first + M;
    for (int side = 0; side < 2; side++)
        if (read_floats(PySequence_Fast_GET_ITEM(pts, side), M, point + side * M,
                        "points") < 0) {
            PyMem_Free(first);
            goto done;
        }
    for (Py_ssize_t i = 0; i < M; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(segs, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "segments must be (first, count) tuples");
            PyMem_Free(first);
            goto done;
        }
        first[i] = PyNumber_AsSsize_t(PyTuple_GET_ITEM(pair, 0), PyExc_OverflowError);
        count[i] = PyNumber_AsSsize_t(PyTuple_GET_ITEM(pair, 1), PyExc_OverflowError);
        if (PyErr_Occurred()) {
            PyMem_Free(first);
            goto done;
        }
        if (first[i] < 0 || count[i] < 1 || first[i] + count[i] > R) {
            PyErr_SetString(PyExc_ValueError, "edge_filter: segment out of range");
            PyMem_Free(first);
            goto done;
        }
    }
    const char *base = bs.buf;
    const Py_ssize_t *st = bs.strides;
    double *out = bo.buf;
#define AT(side, r, j, y) (*(const double *)(base + (side) * st[0] + (r) * st[1] + (j) * st[2] \
                                              + (y) * st[3]))
    for (int side = 0; side < 2; side++) {
        for (Py_ssize_t r = 0; r < k; r++) {
            for (Py_ssize_t i = 0; i < M; i++) {
                double m = point[side * M + i], top = -INFINITY;
                int bad = 0;
                for (Py_ssize_t x = 0; x < count[i]; x++) {
                    Py_ssize_t y = first[i] + x;
                    double lin = m * AT(side, r, 0, y) - AT(side, r, 1, y);
                    if (side) lin = -lin;
                    double quad = m * AT(side, r, 2, y);
                    quad = quad - 2.0 * AT(side, r, 3, y);
                    quad = quad * m;
                    quad = quad + AT(side, r, 4, y);
                    q[x] = lin + quad;
                    if (isnan(q[x]) || q[x] == INFINITY) bad = 1;
                    if (q[x] > top) top = q[x];
                }
                double v;
                if (bad) {
                    v = NAN;
                } else if (count[i] == 1 || top < clear_accept) {
                    v = top;
                } else {
                    double sum = 0.0;
                    for (Py_ssize_t x = 0; x < count[i]; x++) sum += exp(q[x] - top);
                    v = log(sum / (double)count[i]) + top;
                }
                out[(side * k + r) * M + i] = v;
            }
        }
    }
#undef AT
    PyMem_Free(first);
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(buf);
    Py_XDECREF(segs);
    Py_XDECREF(pts);
    PyBuffer_Release(&bs);
    PyBuffer_Release(&bo);
    return result;
}

static PyMethodDef methods[] = {
    {"mixtures", (PyCFunction)(void (*)(void))mixtures, METH_FASTCALL,
     "mixtures(sums, j, r0, r1, upper, point, width, grid_size, clear_accept, clear_reject, out)"
     "\n\nFill an IntervalNarrowing table (a filter: exact where it could be near the threshold)."},
    {"block_prep", (PyCFunction)(void (*)(void))block_prep, METH_FASTCALL,
     "block_prep(qs, t0, total, dev, mu0, var0, num, fixed_scale, lo, hi, caps, wd, work)"
     "\n\nBlockKernel.run's WSR sums, capped bets and smallest factors (bit-identical)."},
    {"block_terms", (PyCFunction)(void (*)(void))block_terms, METH_FASTCALL,
     "block_terms(log1p_safe, work, qs, sums, out)"
     "\n\nBlockKernel.run's quadratic sums after each round (bit-identical)."},
    {"edge_filter", (PyCFunction)(void (*)(void))edge_filter, METH_FASTCALL,
     "edge_filter(both, segments, points, clear_accept, out)"
     "\n\nnext_rejections' mixtures at the points inside the edges (a filter)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "monitor.stats.betting.cedges",
    "Compiled IntervalNarrowing tables (the same decisions) and bet blocks (the same bits).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_cedges(void) { return PyModule_Create(&module); }
