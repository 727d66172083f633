"""`bitnet serve` on a free loopback port for the Python end-to-end tests (openai_client_test,
schemathesis_test): started, waited for until /health answers 200 (30 s at most), stopped after."""
import contextlib
import socket
import subprocess
import time
import urllib.request


@contextlib.contextmanager
def running_server(cli, model, *args):
    """Yields (base URL, the server's Popen) for `cli serve -m model --port P *args`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([cli, "serve", "-m", model, "--port", str(port), *args],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(base + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except Exception:
                time.sleep(0.1)
        yield base, server
    finally:
        server.terminate()
        server.wait(timeout=30)
