/*
 * monitor.caudit: the audit uniform of one unit (monitor/audit.py), compiled.
 *
 * uniform(prefix, example_id) is audit_uniform_prefixed: SHA-256 of prefix followed by the
 * UTF-8 bytes of example_id, first 8 digest bytes read big-endian, divided by 2**64. Python
 * converts that integer to a float correctly rounded (half to even), as C's conversion does
 * here, and the division by a power of two is exact: the value is the same float
 * (tests/test_audit.py compares them). Uses OpenSSL's SHA-256, the library hashlib calls;
 * optional: when it is not built, monitor.audit runs hashlib.
 */
#define PY_SSIZE_T_CLEAN
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA256_Init & co: no per-call algorithm fetch */
#include <Python.h>
#include <openssl/sha.h>
#include <stdint.h>

static PyObject *uniform(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyBytes_CheckExact(args[0]) || !PyUnicode_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "uniform(prefix: bytes, example_id: str)");
        return NULL;
    }
    Py_ssize_t n;
    const char *id = PyUnicode_AsUTF8AndSize(args[1], &n); /* raises on lone surrogates */
    if (id == NULL) return NULL;
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256_CTX ctx;
    if (!SHA256_Init(&ctx)
        || !SHA256_Update(&ctx, PyBytes_AS_STRING(args[0]), (size_t)PyBytes_GET_SIZE(args[0]))
        || !SHA256_Update(&ctx, id, (size_t)n) || !SHA256_Final(md, &ctx)) {
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

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "monitor.caudit",
    "Compiled audit uniform (the same float as monitor.audit's hashlib path).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_caudit(void) { return PyModule_Create(&module); }
