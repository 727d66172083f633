#!/usr/bin/env python3
"""`bitnet serve` against its own OpenAPI description (GET /openapi.json, src/server/openapi.json)
with schemathesis (PyPI) generating the requests: every response must match the description, no
5xx, and the server must still answer /health afterwards. Bounded: a fixed seed, a fixed number of
examples per operation and a time limit. Every check runs but positive_data_acceptance: whether a
schema-valid request is accepted also depends on the model loaded (token ids must lie in its
vocabulary, the prompt must fit its context), which a static description cannot state. Exit code 77 (reported as skipped by ctest) when
schemathesis is not installed: `pip install schemathesis`, or point BITNET_SCHEMATHESIS_PYTHON at
an interpreter that has it.

  schemathesis_test.py BITNET_CLI MODEL [MAX_EXAMPLES] [MAX_SECONDS]
"""
import importlib.util
import subprocess
import sys
import tempfile
import urllib.request

from serve_util import running_server


def main():
    if importlib.util.find_spec("schemathesis") is None:
        print("SKIPPED: the schemathesis package is not installed (pip install schemathesis)")
        return 77
    cli, model = sys.argv[1], sys.argv[2]
    max_examples = sys.argv[3] if len(sys.argv) > 3 else "20"
    max_seconds = sys.argv[4] if len(sys.argv) > 4 else "60"
    with running_server(cli, model, "-t", "1", "-c", "256") as (base, server):
        st = [sys.executable, "-c", "import sys; from schemathesis.cli import schemathesis; sys.exit(schemathesis())"]
        with tempfile.TemporaryDirectory(prefix="schemathesis-") as work:  # for its .schemathesis/ cache
            run = subprocess.run(st + ["run", base + "/openapi.json", "--checks", "all",
                                       "--exclude-checks", "positive_data_acceptance", "--mode", "positive",
                                       "--max-examples", max_examples, "--max-time", max_seconds, "--seed", "11",
                                       "--workers", "1", "--request-timeout", "30", "--no-shrink"],
                                 timeout=int(max_seconds) + 120, cwd=work)
        assert run.returncode == 0, f"schemathesis found failures (exit {run.returncode})"
        assert server.poll() is None, f"the server exited with {server.returncode}"
        with urllib.request.urlopen(base + "/health", timeout=5) as r:
            assert r.status == 200
        print("schemathesis: every response matched openapi.json, no 5xx, server alive")
        return 0


if __name__ == "__main__":
    sys.exit(main())
