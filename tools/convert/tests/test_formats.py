"""Byte layouts of the ternary packers, the HF packing, safetensors and GGUF round trips.
numpy only; no engine binary. The expected bytes are written from ../shared/docs/FORMATS.md's
prose with plain loops, independently of the vectorised packers."""
import os
import struct
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gguflib  # noqa: E402
import safetensors_io  # noqa: E402
import ternary  # noqa: E402


def random_ternary(rng, rows, cols):
    return rng.integers(-1, 2, (rows, cols)).astype(np.int8)


class PackerTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(1)
        self.t = random_ternary(self.rng, 3, 256)
        self.flat = self.t.reshape(-1)

    def test_i2s_layout(self):
        data = ternary.pack_i2s(self.t, 0.75)
        n = self.flat.size
        self.assertEqual(len(data), n // 4 + 32)
        for j in range(n):
            g, e = divmod(j, 128)
            byte = data[32 * g + e % 32]
            shift = 6 - 2 * (e // 32)
            self.assertEqual((byte >> shift) & 3, self.flat[j] + 1)
        self.assertEqual(struct.unpack("<f", data[n // 4:n // 4 + 4])[0], 0.75)
        self.assertEqual(data[n // 4 + 4:], bytes(28))
        t2, s2 = ternary.unpack_i2s(data, n)
        np.testing.assert_array_equal(t2, self.flat)
        self.assertEqual(s2, np.float32(0.75))

    def test_tq2_0_layout(self):
        data = ternary.pack_tq2_0(self.t, 0.5)
        self.assertEqual(len(data), self.flat.size // 256 * 66)
        for j in range(self.flat.size):
            b, e = divmod(j, 256)
            h, r = divmod(e, 128)
            n, m = divmod(r, 32)
            byte = data[66 * b + 32 * h + m]
            self.assertEqual((byte >> (2 * n)) & 3, self.flat[j] + 1)
        for b in range(self.flat.size // 256):
            self.assertEqual(np.frombuffer(data[66 * b + 64:66 * b + 66], "<f2")[0], np.float16(0.5))

    def test_tq1_0_decodes_with_the_documented_rule(self):
        data = ternary.pack_tq1_0(self.t, 0.25)
        self.assertEqual(len(data), self.flat.size // 256 * 54)

        def trit(q, n):  # FORMATS.md: trit n of a byte is ((uint8)(q * 3^n) * 3) >> 8
            return (((q * 3 ** n) & 0xFF) * 3) >> 8

        for b in range(self.flat.size // 256):
            blk = data[54 * b:54 * b + 54]
            out = np.zeros(256, np.int32)
            for m in range(32):
                for n in range(5):
                    out[m + 32 * n] = trit(blk[m], n)
            for m in range(16):
                for n in range(5):
                    out[160 + m + 16 * n] = trit(blk[32 + m], n)
            for m in range(4):
                for n in range(4):
                    out[240 + m + 4 * n] = trit(blk[48 + m], n)
            np.testing.assert_array_equal(out - 1, self.flat[256 * b:256 * (b + 1)])
            self.assertEqual(np.frombuffer(blk[52:54], "<f2")[0], np.float16(0.25))

    def test_sizes_are_checked(self):
        with self.assertRaises(ValueError):
            ternary.pack_i2s(np.zeros((1, 64), np.int8), 1.0)
        with self.assertRaises(ValueError):
            ternary.pack_tq2_0(np.zeros((1, 128), np.int8), 1.0)
        with self.assertRaises(ValueError):  # 512 elements, but rows of 128: blocks would straddle
            ternary.pack_tq1_0(np.zeros((4, 128), np.int8), 1.0)
        with self.assertRaises(ValueError):
            ternary.pack_i2s(np.full((1, 128), 2, np.int8), 1.0)


class HfPackingTest(unittest.TestCase):
    def test_transformers_layout(self):
        # transformers' unpack_weights: bit pair i of packed row r is weight row i * rows/4 + r.
        rng = np.random.default_rng(2)
        t = random_ternary(rng, 8, 5)
        packed = ternary.to_hf_packed(t)
        self.assertEqual(packed.shape, (2, 5))
        for r in range(8):
            i, pr = divmod(r, 2)
            np.testing.assert_array_equal((packed[pr] >> (2 * i)) & 3, t[r] + 1)
        t2, scale = ternary.from_hf_packed(packed, np.array([4.0], np.float32))
        np.testing.assert_array_equal(t2, t)
        self.assertEqual(scale, np.float32(0.25))  # weight_scale is the divisor: GGUF stores 1/4

    def test_code_3_is_rejected(self):
        with self.assertRaises(ValueError):
            ternary.from_hf_packed(np.full((1, 4), 0xFF, np.uint8), np.array([1.0], np.float32))

    def test_absmean(self):
        w = np.array([[0.1, -0.2, 0.05, 0.0], [0.3, -0.01, 0.2, -0.4]], np.float32)
        t, scale = ternary.absmean_ternarize(w)
        self.assertAlmostEqual(float(scale), float(np.abs(w).mean()), places=7)
        np.testing.assert_array_equal(t, [[1, -1, 0, 0], [1, 0, 1, -1]])


class ContainerTest(unittest.TestCase):
    def test_safetensors_round_trip(self):
        a = {"x": np.arange(12, dtype=np.float32).reshape(3, 4) / 7, "u": np.arange(6, dtype=np.uint8)}
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "m.safetensors")
            safetensors_io.write(p, a, {"x": "BF16"})
            b = safetensors_io.read(p)
        np.testing.assert_array_equal(b["u"], a["u"])
        np.testing.assert_allclose(b["x"], a["x"], rtol=2 ** -8)

    def test_gguf_round_trip(self):
        w = gguflib.Writer()
        w.add_string("general.architecture", "bitnet-b1.58")
        w.add_u32("bitnet-b1.58.block_count", 3)
        w.add_f32("bitnet-b1.58.rope.freq_base", 10000.0)
        w.add_array("tokenizer.ggml.tokens", gguflib.STRING, ["a", "bc"])
        t = random_ternary(np.random.default_rng(3), 2, 128)
        w.add_tensor("blk.0.attn_q.weight", gguflib.I2_S, [128, 2], ternary.pack_i2s(t, 1.5))
        w.add_tensor("n.weight", gguflib.F32, [5], np.arange(5, dtype="<f4").tobytes())
        with self.assertRaises(ValueError):
            w.add_u32("bitnet-b1.58.block_count", 4)
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "m.gguf")
            w.write(p)
            r = gguflib.Reader(p)
            self.assertEqual(r.version, 3)
            self.assertEqual(r.value("bitnet-b1.58.block_count"), 3)
            self.assertEqual(r.value("tokenizer.ggml.tokens"), ["a", "bc"])
            typ, ne, off = r.tensors["blk.0.attn_q.weight"]
            self.assertEqual((typ, ne, off % 32), (gguflib.I2_S, [128, 2], 0))
            t2, s = ternary.unpack_i2s(r.tensor_bytes("blk.0.attn_q.weight"), 256)
            np.testing.assert_array_equal(t2, t.reshape(-1))
            np.testing.assert_array_equal(r.tensor_f32("n.weight"), np.arange(5))


if __name__ == "__main__":
    unittest.main()
