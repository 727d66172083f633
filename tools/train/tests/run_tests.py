#!/usr/bin/env python3
"""ctest entry point for tools/train tests (python3 + numpy + PyTorch; unittest, no pytest).

    BITNET_CLI=build/bin/bitnet python3 tools/train/tests/run_tests.py

Exit status: 0 all passed, 1 a failure, 77 (ctest SKIP_RETURN_CODE) when nothing failed but tests
were skipped (numpy, PyTorch or the CLI binary missing): such a run is reported skipped, never passed.
"""
import os
import sys
import unittest

try:
    import numpy  # noqa: F401
except ImportError:
    print("SKIPPED: numpy is not installed (apt-get install python3-numpy)")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py")
result = unittest.TextTestRunner(verbosity=2).run(suite)
if not result.wasSuccessful():
    sys.exit(1)
if result.skipped:
    for test, why in result.skipped:
        print(f"SKIPPED: {test.id()}: {why}")
    sys.exit(77)
sys.exit(0)
