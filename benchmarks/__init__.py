"""attnkit's benchmarks, by what they compare: book/, peers/, kernels/, models/.

Run each from the repository root as ``python -m benchmarks.GROUP.NAME`` (``--help``);
what they share is ``benchmarks.harness``. See docs/benchmarks.md.
"""
