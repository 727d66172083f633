"""hf_to_gguf.py on small checkpoints written here in the published layouts, checked by loading
the output with the engine (BITNET_CLI = path of the `bitnet` binary; skipped without it):
  - logits of each layout (packed 2B-4T, -bf16 master, Falcon3-style Llama) against a numpy
    reference of what transformers computes with the checkpoint;
  - the same ternary weights as I2_S, TQ2_0 and TQ1_0 give identical logits, F16 close ones;
  - the tokenizer and chat template arrive in the GGUF and the engine tokenizes with them.
"""
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import gguflib  # noqa: E402
import hf_fixtures as fx  # noqa: E402
import hf_to_gguf  # noqa: E402
import safetensors_io  # noqa: E402

CLI = os.environ.get("BITNET_CLI", "")
IDS = [fx.n_vocab() - 3, 72, 101, 108, 108, 111, 260, 44, 32, 119, 111, 114, 108, 100, 33, 5]
# Reference vs engine: same int8 rule, float sums in a different order (and float32 vs float64
# here): a rounding flip moves a logit by ~1e-3 at these sizes; wrong layouts move it by > 1.
TOL_MAX = 5e-2


def need_cli(test):
    return unittest.skipUnless(CLI and os.access(CLI, os.X_OK),
                               "BITNET_CLI is not set to the bitnet binary")(test)


def engine_logits(model, ids):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "l.f32")
        subprocess.run([CLI, "logits", "-m", model, "--ids", ",".join(map(str, ids)), "-o", out, "-t", "1",
                        "--cache-type", "f32"],  # the references keep K and V in F32
                       check=True, capture_output=True)
        return np.fromfile(out, np.float32).reshape(len(ids), -1)


@need_cli
class ConvertLayoutsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def convert(self, layout, out_type="i2_s"):
        d = os.path.join(self.tmp.name, layout)
        p, cfg = fx.write_checkpoint(d, layout)
        out = os.path.join(self.tmp.name, f"{layout}-{out_type}.gguf")
        self.assertEqual(hf_to_gguf.convert(d, out, out_type), layout)
        return out, p, cfg

    def check_against_reference(self, layout):
        out, p, cfg = self.convert(layout)
        ref = fx.reference_logits(p, cfg, IDS, layout)
        got = engine_logits(out, IDS)
        diff = np.abs(got - ref).max()
        print(f"\n{layout}: max |engine - reference| = {diff:.3g} (logits up to {np.abs(ref).max():.1f})")
        self.assertLess(diff, TOL_MAX, f"{layout}: max |engine - reference| = {diff}")
        np.testing.assert_array_equal(got.argmax(1), ref.argmax(1))
        return out

    def test_packed_2b4t_layout(self):
        out = self.check_against_reference("packed")
        info = subprocess.run([CLI, "inspect", out], check=True, capture_output=True, text=True).stdout
        self.assertIn("arch bitnet-b1.58", info)
        self.assertIn("i2_s:14", info)
        self.assertIn("rope neox", info)

    def test_bf16_master_layout(self):
        self.check_against_reference("master")

    def test_falcon3_llama_layout(self):
        out = self.check_against_reference("llama")
        info = subprocess.run([CLI, "inspect", out], check=True, capture_output=True, text=True).stdout
        self.assertIn("arch llama", info)
        self.assertIn("head separate", info)

    def test_output_types_agree(self):
        logits = {t: engine_logits(self.convert("packed", t)[0], IDS) for t in ("i2_s", "tq2_0", "tq1_0", "f16")}
        # Same codes, same (fp16-exact) scales, so the same weights; the engine sums a row per
        # scale block (I2_S: the row, TQ: 256 elements), so float rounding may differ by ~1e-6
        # relative, nothing more. TQ2_0 and TQ1_0 share the block size: bit-identical.
        np.testing.assert_array_equal(logits["tq1_0"], logits["tq2_0"])
        np.testing.assert_allclose(logits["tq2_0"], logits["i2_s"], rtol=0, atol=1e-4)
        np.testing.assert_array_equal(logits["tq2_0"].argmax(1), logits["i2_s"].argmax(1))
        # F16 weights run in float (no int8 activations): close, not equal.
        f16, i2s = logits["f16"], logits["i2_s"]
        self.assertLess(np.abs(f16 - i2s).max() / np.abs(i2s).max(), 0.05)
        self.assertGreater(min(np.corrcoef(a, b)[0, 1] for a, b in zip(f16, i2s)), 0.999)

    def test_tokenizer_and_chat_template(self):
        out, _, _ = self.convert("packed")
        r = gguflib.Reader(out)
        self.assertEqual(r.value("tokenizer.ggml.model"), "gpt2")
        self.assertEqual(r.value("tokenizer.chat_template"), fx.CHAT_TEMPLATE)
        self.assertEqual(r.value("tokenizer.ggml.bos_token_id"), fx.n_vocab() - 3)
        self.assertEqual(r.value("tokenizer.ggml.eot_token_id"), fx.n_vocab() - 1)
        ids = subprocess.run([CLI, "tokenize", "-m", out, "-p", "the the<|eot_id|>", "--ids"],
                             check=True, capture_output=True, text=True).stdout.strip()
        v = fx.vocab()
        want = [fx.n_vocab() - 3, v["t"], v["he"], v["Ġthe"], fx.n_vocab() - 1]  # no "t he" merge
        self.assertEqual([int(x) for x in ids.split(",")], want)


class ConvertErrorsTest(unittest.TestCase):
    def test_unknown_architecture(self):
        with tempfile.TemporaryDirectory() as d:
            fx.write_checkpoint(d, "packed")
            cfg = hf_to_gguf.read_json(os.path.join(d, "config.json"))
            cfg["architectures"] = ["GPT2LMHeadModel"]
            fx.write_json(os.path.join(d, "config.json"), cfg)
            with self.assertRaises(hf_to_gguf.ConvertError):
                hf_to_gguf.convert(d, os.path.join(d, "o.gguf"))

    def test_missing_weight_scale(self):
        with tempfile.TemporaryDirectory() as d:
            fx.write_checkpoint(d, "packed")
            path = os.path.join(d, "model.safetensors")
            t = safetensors_io.read(path)
            del t["model.layers.0.mlp.up_proj.weight_scale"]
            safetensors_io.write(path, {k: v for k, v in t.items()},
                                 {k: "BF16" for k, v in t.items() if v.dtype == np.float32})
            with self.assertRaises(hf_to_gguf.ConvertError):
                hf_to_gguf.convert(d, os.path.join(d, "o.gguf"))


if __name__ == "__main__":
    unittest.main()
