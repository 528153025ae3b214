/*
 * monitor.caudit: the audit uniform of one unit (monitor/audit.py), compiled.
 *
 * uniform(prefix, example_id) is audit_uniform_prefixed: SHA-256 of prefix followed by the
 * UTF-8 bytes of example_id, first 8 digest bytes read big-endian, divided by 2**64. Python
 * converts that integer to a float correctly rounded (half to even), as C's conversion does
 * here, and the division by a power of two is exact: the value is the same float
 * (tests/test_caudit.py and tests/test_kernels.py compare them). Uses OpenSSL's EVP digest
 * API (the library hashlib calls), with the algorithm fetched and one digest context
 * allocated once, in the module's state, rather than on every call (measured 0.13 us per unit,
 * against 0.16 us for the one-shot EVP_Digest and 0.55 us for hashlib; see docs/architecture.md
 * for the whole-replay figures). Optional: when it is not built, monitor.audit runs hashlib.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <openssl/evp.h>
#include <stdint.h>

typedef struct {
    EVP_MD *sha256;  /* fetched once (OpenSSL 3) */
    EVP_MD_CTX *ctx; /* reused by every call; calls hold the GIL and never release it */
} caudit_state;

static PyObject *uniform(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    caudit_state *st = (caudit_state *)PyModule_GetState(self);
    if (nargs != 2 || !PyBytes_CheckExact(args[0]) || !PyUnicode_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "uniform(prefix: bytes, example_id: str)");
        return NULL;
    }
    Py_ssize_t n;
    const char *id = PyUnicode_AsUTF8AndSize(args[1], &n); /* raises on lone surrogates */
    if (id == NULL) return NULL;
    unsigned char md[EVP_MAX_MD_SIZE];
    if (!EVP_DigestInit_ex2(st->ctx, st->sha256, NULL)
        || !EVP_DigestUpdate(st->ctx, PyBytes_AS_STRING(args[0]),
                             (size_t)PyBytes_GET_SIZE(args[0]))
        || !EVP_DigestUpdate(st->ctx, id, (size_t)n)
        || !EVP_DigestFinal_ex(st->ctx, md, NULL)) {
        PyErr_SetString(PyExc_RuntimeError, "SHA-256 failed");
        return NULL;
    }
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | md[i];
    return PyFloat_FromDouble((double)v / 18446744073709551616.0);
}

static PyMethodDef methods[] = {
    {"uniform", (PyCFunction)(void (*)(void))uniform, METH_FASTCALL,
     "uniform(prefix, example_id) -> float\n\nThe audit uniform of one unit."},
    {NULL, NULL, 0, NULL},
};

static void caudit_free(void *mod) {
    caudit_state *st = (caudit_state *)PyModule_GetState((PyObject *)mod);
    if (st == NULL) return;
    EVP_MD_CTX_free(st->ctx);
    EVP_MD_free(st->sha256);
    st->ctx = NULL;
    st->sha256 = NULL;
}

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "monitor.caudit",
    "Compiled audit uniform (the same float as monitor.audit's hashlib path).",
    sizeof(caudit_state), methods, NULL, NULL, NULL, caudit_free,
};

PyMODINIT_FUNC PyInit_caudit(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    caudit_state *st = (caudit_state *)PyModule_GetState(m);
    st->sha256 = EVP_MD_fetch(NULL, "SHA2-256", NULL);
    st->ctx = EVP_MD_CTX_new();
    if (st->sha256 == NULL || st->ctx == NULL) {
        Py_DECREF(m); /* caudit_free releases what was allocated */
        PyErr_SetString(PyExc_ImportError, "OpenSSL has no SHA-256 digest");
        return NULL;
    }
    return m;
}
