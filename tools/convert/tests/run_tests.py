#!/usr/bin/env python3
"""ctest entry point for the Python tests (python3 + numpy; unittest, no pytest): the tests in
this folder, or in the folder given as the argument (tools/train/tests, which also need PyTorch).

    BITNET_CLI=build/bin/bitnet python3 tools/convert/tests/run_tests.py [TEST_DIR]

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

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py")
result = unittest.TextTestRunner(verbosity=2).run(suite)
if not result.wasSuccessful():
    sys.exit(1)
if result.skipped:
    for test, why in result.skipped:
        print(f"SKIPPED: {test.id()}: {why}")
    sys.exit(77)
sys.exit(0)
