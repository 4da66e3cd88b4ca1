"""Philox 4x32-10 as aotc draws it (include/aotc/Philox.h), in numpy.

The golden generator replays aotc's random streams in torch with it (tools/export/lm_models.py:
`replay_dropout`), and tests check it against the C++ definition. Element i of a tensor drawn
with (seed, offset) uses counter {lo32(i), hi32(i), lo32(offset), hi32(offset)} and key
{lo32(seed), hi32(seed)}; word 0 gives an f32 in [0, 1) as (w0 & 0xFFFFFF) * 2^-24, and an f64
takes w0 + (w1 & (2^21 - 1)) * 2^32, times 2^-53. docs/randomness.md.
"""
import numpy as np

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = 0x9E3779B9, 0xBB67AE85
MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32(c0, c1, c2, c3, k0, k1, rounds=10):
    """Random123's philox4x32_R on uint64 arrays holding 32-bit values; returns 4 arrays."""
    c = [np.asarray(x, dtype=np.uint64) & MASK32 for x in (c0, c1, c2, c3)]
    k0, k1 = int(k0) & 0xFFFFFFFF, int(k1) & 0xFFFFFFFF
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
        p0 = M0 * c[0]
        p1 = M1 * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & MASK32,
             (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & MASK32]
    return c


def words(seed, offset, numel):
    i = np.arange(numel, dtype=np.uint64)
    seed, offset = int(seed) & (2**64 - 1), int(offset) & (2**64 - 1)
    return philox4x32(i & MASK32, i >> np.uint64(32), offset & 0xFFFFFFFF, offset >> 32,
                      seed & 0xFFFFFFFF, seed >> 32)


def uniform(seed, offset, shape, dtype="float32"):
    """aotc::philox_uniform(seed, offset, shape, dtype) as a numpy array."""
    n = int(np.prod(shape, dtype=np.int64))
    w = words(seed, offset, n)
    if dtype == "float32":
        return ((w[0] & np.uint64(0xFFFFFF)).astype(np.float32) * np.float32(2.0**-24)).reshape(shape)
    bits = w[0] + (w[1] & np.uint64((1 << 21) - 1)) * np.uint64(1 << 32)
    return (bits.astype(np.float64) * 2.0**-53).reshape(shape)


# Random123 tests/kat_vectors, philox4x32 10: (counter, key) -> result.
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]

if __name__ == "__main__":
    for c, k, want in KAT:
        got = tuple(int(w) for w in philox4x32(*c, *k))
        assert got == want, (c, k, [hex(g) for g in got])
    print("philox4x32-10 known answers: ok")
