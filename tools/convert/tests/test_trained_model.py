"""The committed model (models/tiny-stories-b158.gguf, written by tools/train/export.py through
this library): its file reads back as the engine's bitnet-b1.58 layout, and its ternary weights
repacked as TQ2_0 / TQ1_0 / F16 give the engine the same (resp. close) logits as the I2_S file."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import gguflib  # noqa: E402
import ternary  # noqa: E402

MODEL = os.path.join(HERE, "..", "..", "..", "models", "tiny-stories-b158.gguf")
CLI = os.environ.get("BITNET_CLI", "")


def reference_ids():
    """The prompt and decode ids of the model's PyTorch reference (export.py)."""
    with open(MODEL[:-len(".gguf")] + ".ref.json", encoding="utf-8") as f:
        ref = json.load(f)
    return ref["prompt_ids"] + ref["decode_ids"]

LINEARS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def repack(src, dst, out_type):
    """Copies src into dst with every I2_S tensor re-encoded as out_type."""
    r = gguflib.Reader(src)
    w = gguflib.Writer()
    for key, (t, v) in r.fields.items():
        w.add(key, t, v)
    for name, (t, ne, _) in r.tensors.items():
        data = r.tensor_bytes(name)
        if t == gguflib.I2_S:
            codes, scale = ternary.unpack_i2s(data, int(np.prod(ne)))
            codes = codes.reshape(ne[::-1])
            if out_type == "f16":
                w.add_tensor(name, gguflib.F16, ne, (codes.astype(np.float32) * scale).astype("<f2").tobytes())
                continue
            gtype, pack = {"tq2_0": (gguflib.TQ2_0, ternary.pack_tq2_0),
                           "tq1_0": (gguflib.TQ1_0, ternary.pack_tq1_0)}[out_type]
            w.add_tensor(name, gtype, ne, pack(codes, scale))
        else:
            w.add_tensor(name, t, ne, data)
    w.write(dst)


def engine_logits(model, ids):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "l.f32")
        subprocess.run([CLI, "logits", "-m", model, "--ids", ",".join(map(str, ids)), "-o", out, "-t", "1",
                        "--cache-type", "f32"],  # the references keep K and V in F32
                       check=True, capture_output=True)
        return np.fromfile(out, np.float32).reshape(len(ids), -1)


class CommittedModelFileTest(unittest.TestCase):
    def test_layout(self):
        r = gguflib.Reader(MODEL)
        self.assertEqual(r.value("general.architecture"), "bitnet-b1.58")
        self.assertEqual(r.value("tokenizer.ggml.model"), "llama")
        self.assertEqual(len(r.value("tokenizer.ggml.tokens")), 512)
        self.assertEqual((r.value("tokenizer.ggml.bos_token_id"), r.value("tokenizer.ggml.eos_token_id")), (1, 2))
        self.assertNotIn("output.weight", r.tensors)  # tied head
        self.assertEqual(r.tensors["token_embd.weight"][0], gguflib.F16)
        n_layer = r.value("bitnet-b1.58.block_count")
        for il in range(n_layer):
            for n in LINEARS:
                t, ne, _ = r.tensors[f"blk.{il}.{n}.weight"]
                self.assertEqual(t, gguflib.I2_S)
                _, scale = ternary.unpack_i2s(r.tensor_bytes(f"blk.{il}.{n}.weight"), int(np.prod(ne)))
                self.assertEqual(scale, ternary.fp16_exact(scale), "export writes fp16-exact scales")
            for n in ("attn_norm", "attn_sub_norm", "ffn_norm", "ffn_sub_norm"):
                self.assertEqual(r.tensors[f"blk.{il}.{n}.weight"][0], gguflib.F32)


@unittest.skipUnless(CLI and os.access(CLI, os.X_OK), "BITNET_CLI is not set to the bitnet binary")
class CommittedModelRepackTest(unittest.TestCase):
    def test_repacked_formats_agree(self):
        ids = reference_ids()
        base = engine_logits(MODEL, ids)
        r = gguflib.Reader(MODEL)
        tq_ok = all(ne[0] % 256 == 0 for t, ne, _ in r.tensors.values() if t == gguflib.I2_S)
        with tempfile.TemporaryDirectory() as d:
            got = {}
            for t in ("tq2_0", "tq1_0", "f16"):
                p = os.path.join(d, f"m-{t}.gguf")
                if t != "f16" and not tq_ok:
                    # TQ blocks are 256 elements along a row; a 128-wide model cannot be stored.
                    with self.assertRaises(ValueError):
                        repack(MODEL, p, t)
                    continue
                repack(MODEL, p, t)
                got[t] = engine_logits(p, ids)
        if tq_ok:
            np.testing.assert_array_equal(got["tq1_0"], got["tq2_0"])
            # Same weights; I2_S sums a row in one scale block, TQ per 256: float rounding only.
            np.testing.assert_allclose(got["tq2_0"], base, rtol=0, atol=1e-4)
        # F16 weights run without int8 activations: close, not equal.
        diff = np.abs(got["f16"] - base).max()
        self.assertLess(diff, 0.05 * np.abs(base).max())
        self.assertGreater(min(np.corrcoef(a, b)[0, 1] for a, b in zip(got["f16"], base)), 0.99)


if __name__ == "__main__":
    unittest.main()
