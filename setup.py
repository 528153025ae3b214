"""Build the optional compiled kernels; everything else is configured in pyproject.toml.

Each kernel is a small C module beside the Python code it speeds up, computing the same values
bit for bit (same operations in the same order, the C library functions Python's ``math`` calls,
no floating-point contraction or fast-math). ``optional=True``: without a C compiler the install
still succeeds and the Python path runs.
"""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-ffp-contract=off", "-fno-fast-math", "-fexcess-precision=standard"]

setup(
    ext_modules=[
        Extension(
            "monitor.stats.changepoint.ckernel",
            ["monitor/stats/changepoint/ckernel.c"],
            extra_compile_args=_FLAGS,
            libraries=["m"],
            optional=True,
        ),
        Extension(
            "monitor.stats.betting.ckernel",
            ["monitor/stats/betting/ckernel.c"],
            extra_compile_args=_FLAGS,
            optional=True,
        ),
        Extension(
            "monitor.stats.betting.cedges",
            ["monitor/stats/betting/cedges.c"],
            extra_compile_args=_FLAGS,
            libraries=["m"],
            optional=True,
        ),
        Extension(
            "monitor.caudit",
            ["monitor/caudit.c"],
            extra_compile_args=_FLAGS,
            libraries=["crypto"],  # OpenSSL's SHA-256; without its headers, hashlib runs
            optional=True,
        ),
    ]
)
