"""tools/train's export path: a small random BitNet (model.py) exported by export.py through
tools/convert's GGUF writer and packers; the engine's logits on the file must equal the frozen
PyTorch reference's (prompt positions and single-token decode steps), and its perplexity the
reference's. Needs PyTorch (Debian python3-torch) and BITNET_CLI; skipped without them."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..")
sys.path.insert(0, TRAIN)
CLI = os.environ.get("BITNET_CLI", "")
STORIES = os.path.join(TRAIN, "..", "..", "models", "tiny-stories-b158.gguf")  # tokenizer source

try:
    import torch
except ImportError:
    torch = None


@unittest.skipUnless(torch is not None, "PyTorch is not installed (apt-get install python3-torch)")
@unittest.skipUnless(CLI and os.access(CLI, os.X_OK), "BITNET_CLI is not set to the bitnet binary")
class ExportTest(unittest.TestCase):
    def test_engine_matches_frozen_reference(self):
        from model import BitNet, Config
        torch.manual_seed(5)
        c = Config(n_embd=128, n_layer=2, n_head=4, n_head_kv=2, n_ff=256, n_ctx=64)
        m = BitNet(c)
        with torch.no_grad():  # away from init so that norms and scales are not trivial
            for p in m.parameters():
                p.add_(torch.randn_like(p) * 0.05)
        with tempfile.TemporaryDirectory() as d:
            ckpt = os.path.join(d, "c.pt")
            torch.save({"config": c.to_dict(), "state": m.state_dict(), "seed": 5, "steps": 0, "batch": 0}, ckpt)
            held = os.path.join(d, "held.jsonl")
            with open(held, "w") as f:
                for k in range(3):
                    f.write(json.dumps({"text": f"Once upon a time, there was a cat number {k}. " * 8}) + "\n")
            out = os.path.join(d, "m.gguf")
            subprocess.run([sys.executable, os.path.join(TRAIN, "export.py"), "--ckpt", ckpt,
                            "--tokenizer-from", STORIES, "--out", out, "--heldout-jsonl", held,
                            "--heldout-stories", "3", "--bitnet", CLI, "--ppl-ctx", "32"],
                           check=True, capture_output=True)
            ref = json.load(open(os.path.join(d, "m.ref.json")))
            ids = ref["prompt_ids"] + ref["decode_ids"]
            want = np.fromfile(os.path.join(d, "m.ref-logits.f32"), np.float32).reshape(len(ids), -1)
            lf = os.path.join(d, "l.f32")
            subprocess.run([CLI, "logits", "-m", out, "--ids", ",".join(map(str, ids)), "-o", lf,
                            "--cache-type", "f32"],  # the reference keeps K and V in F32
                           check=True, capture_output=True)
            got = np.fromfile(lf, np.float32).reshape(len(ids), -1)
            self.assertLess(np.abs(got - want).max(), 2e-2)
            ppl = subprocess.run([CLI, "perplexity", "-m", out, "-f", os.path.join(d, "m.heldout.txt"),
                                  "-c", "32"], check=True, capture_output=True, text=True).stdout
            engine_ppl = float(ppl.split("PPL = ")[1].split()[0])
            self.assertAlmostEqual(engine_ppl / ref["ppl_torch"], 1.0, delta=1e-3)


if __name__ == "__main__":
    unittest.main()
