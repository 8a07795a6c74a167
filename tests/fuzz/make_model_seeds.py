"""make_model_seeds.py — writes the seeds of fuzz_model_file into tests/fuzz/corpus_model_file/:
a one-layer GPT (width 4, vocab 4, context 2) as a .vram file, written from docs/model-format.md
alone (so the seed also checks that the document describes what vram reads), and as safetensors.

    python3 tests/fuzz/make_model_seeds.py OUT_DIR
"""
import json
import struct
import sys

L, H, C, V, CTX = 1, 1, 4, 4, 2
M64 = (1 << 64) - 1


def checksum(data):
    h = 0xCBF29CE484222325
    for i in range(0, len(data), 8):
        w = int.from_bytes(data[i:i + 8].ljust(8, b"\0"), "little")
        h = ((h ^ w) * 0x100000001B3) & M64
        h ^= h >> 29
    return h ^ len(data)


def params():
    out = [("wte.weight", [V, C]), ("wpe.weight", [CTX, C])]
    for l in range(L):
        for n, s in [("ln_1.weight", [C]), ("ln_1.bias", [C]), ("attn.c_attn.weight", [3 * C, C]),
                     ("attn.c_attn.bias", [3 * C]), ("attn.c_proj.weight", [C, C]), ("attn.c_proj.bias", [C]),
                     ("ln_2.weight", [C]), ("ln_2.bias", [C]), ("mlp.c_fc.weight", [4 * C, C]), ("mlp.c_fc.bias", [4 * C]),
                     ("mlp.c_proj.weight", [C, 4 * C]), ("mlp.c_proj.bias", [C])]:
            out.append(("h.%d.%s" % (l, n), s))
    return out + [("ln_f.weight", [C]), ("ln_f.bias", [C]), ("lm_head.weight", [V, C])]


def values(name, shape, k):
    n = 1
    for d in shape:
        n *= d
    return [(1.0 if name.startswith("ln") or ".ln_" in name and name.endswith("weight") else 0.0) + 0.1 * ((i * 7 + k) % 5 - 2)
            for i in range(n)]


def write_vram(path):
    data, entries = bytearray(), []
    for k, (name, shape) in enumerate(params()):
        while (256 + len(data)) % 64:
            data.append(0)
        blob = struct.pack("<%df" % len(values(name, shape, k)), *values(name, shape, k))
        e = bytearray(160)
        e[0:len(name)] = name.encode()
        struct.pack_into("<III", e, 80, 1, 0, len(shape))
        for i, d in enumerate(shape):
            struct.pack_into("<q", e, 96 + 8 * i, d)
        struct.pack_into("<QQqQ", e, 128, 256 + len(data), len(blob), 0, checksum(blob))
        entries.append(bytes(e))
        data += blob
    directory = b"".join(entries)
    h = bytearray(256)
    h[0:8] = b"VRAMMODL"
    struct.pack_into("<IIII", h, 8, 1, 256, 0, len(entries))
    h[24:28] = b"gpt2"
    struct.pack_into("<6i", h, 40, L, H, C, V, CTX, 0)
    dir_offset = 256 + len(data)
    struct.pack_into("<QQQ", h, 184, dir_offset, dir_offset + len(directory), checksum(directory))
    struct.pack_into("<Q", h, 248, checksum(bytes(h[:248])))
    open(path, "wb").write(bytes(h) + bytes(data) + directory)


def write_safetensors(path):
    header, blobs, off = {"__metadata__": {"n_head": str(H)}}, [], 0
    for k, (name, shape) in enumerate(params()):
        if name == "lm_head.weight":
            continue
        conv = name.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight"))
        blob = struct.pack("<%df" % len(values(name, shape, k)), *values(name, shape, k))
        header["transformer." + name] = {"dtype": "F32", "shape": shape[::-1] if conv else shape,
                                         "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    text = json.dumps(header).encode()
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    write_vram(sys.argv[1] + "/tiny.vram")
    write_safetensors(sys.argv[1] + "/tiny.safetensors")
