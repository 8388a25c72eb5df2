#!/usr/bin/env python3
"""Disassemble the machine code NVIDIA's Vulkan driver compiled our kernels into (SASS).

WebGPU and Vulkan show nothing of what the driver makes of a kernel, and no profiler reaches
Vulkan compute kernels on the GPU machine. But the driver keeps what it compiled in its shader
cache, and each entry there holds the kernel's machine code: this script finds the compute
kernels in a cache folder, cuts out their code and runs nvdisasm (CUDA's disassembler) on it.

    mkdir /tmp/glc /tmp/spv
    __GL_SHADER_DISK_CACHE_PATH=/tmp/glc __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 \\
        TINYGPT_DUMP_SPIRV=/tmp/spv tinygpt bench --backend webgpu --presets small --steps 3
    python3 sass.py --spirv /tmp/spv /tmp/glc /tmp/sass
    # /tmp/sass/matmul_main64_0.sass, ...

Start from an empty cache folder: the driver compiles only what it has not cached. --spirv
names a TINYGPT_DUMP_SPIRV folder of the same run, to name each kernel (an entry only knows the
SPIR-V id of its entry point); without it files are named by that id. Needs the zstd command
(the entries are zstd frames; a GPU machine without it can run a copy of another machine's
/usr/bin/zstd, given with --zstd) and nvdisasm (on the GPU machine in /usr/local/cuda/bin); without
nvdisasm the raw code is written (NAME.bin) for `nvdisasm -b SM90 NAME.bin` elsewhere. The
layout of the cache entries is undocumented and was read off driver 580 (H200, 2026-11-27): an
entry is a header ("NVDANVVMNVuc"), whose words at 0x4c and 0x50 give the code's size and
offset (less 8), and a function named __id<N>_<N> for the entry point whose SPIR-V id is N.
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys

import spirv

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ENTRY_MAGIC = b"NVDANVVMNVuc"


def frame_length(b, i):
    """Length of the zstd frame at b[i:] (RFC 8878: header, blocks, optional checksum)."""
    fhd = b[i + 4]
    if fhd & 0x08:
        raise ValueError("reserved bit set in the frame header at %d" % i)
    single = (fhd >> 5) & 1
    n = 5 + (0 if single else 1)  # magic, descriptor, window descriptor
    n += [0, 1, 2, 4][fhd & 3]  # dictionary id
    fcs = [0, 2, 4, 8][fhd >> 6]
    if fcs == 0 and single:
        fcs = 1
    n += fcs
    while True:
        h = int.from_bytes(b[i + n:i + n + 3], "little")
        last, kind, size = h & 1, (h >> 1) & 3, h >> 3
        if i + n + 3 > len(b) or kind == 3 or size > 128 << 10:
            raise ValueError("malformed zstd frame at %d" % i)
        n += 3 + (1 if kind == 1 else size)  # an RLE block holds one byte
        if last:
            break
    n += 4 if fhd & 4 else 0
    if i + n > len(b):
        raise ValueError("zstd frame at %d runs past the file's end" % i)
    return n


def entries(path, zstd):
    """Yield (SPIR-V id, code) for each compute kernel in the cache file at path."""
    b = open(path, "rb").read()
    i = b.find(ZSTD_MAGIC)
    while i >= 0:
        try:
            n = frame_length(b, i)
        except (ValueError, IndexError):
            i = b.find(ZSTD_MAGIC, i + 4)
            continue
        r = subprocess.run([zstd, "-d", "-c", "-q"], input=b[i:i + n], capture_output=True)
        if r.returncode != 0:  # the magic number by chance, not a frame
            i = b.find(ZSTD_MAGIC, i + 4)
            continue
        d = r.stdout
        i = b.find(ZSTD_MAGIC, i + n)
        if not d.startswith(ENTRY_MAGIC) or len(d) < 0x54:
            continue
        size, off = struct.unpack_from("<II", d, 0x4C)
        m = re.search(rb"__id(\d+)_\1(?!\d)", d)
        if m and off + 8 + size <= len(d):
            yield int(m.group(1)), d[off + 8:off + 8 + size]


def spirv_names(folder):
    """Map SPIR-V entry point ids to the TINYGPT_DUMP_SPIRV file (less .spv) that compiles them:
    a file NAME_ENTRY_VARIANT.spv is the pipeline of entry point ENTRY."""
    names = {}
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".spv"):
            continue
        words = spirv.module_words(open(os.path.join(folder, f), "rb").read())
        try:
            for op, ins in spirv.instructions(words or ()):
                if op == spirv.OP_ENTRY_POINT and len(ins) > 2:  # model %id name...
                    entry = spirv.string(ins[2:])
                    if re.fullmatch(r"(.*_)?%s(_\d+)?" % re.escape(entry), f[:-4]):
                        names.setdefault(ins[1], []).append(f[:-4])
        except ValueError:
            pass  # a malformed file names nothing
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cache", help="the driver's shader cache folder (or one .bin file of it)")
    ap.add_argument("out", help="folder for the disassembly")
    ap.add_argument("--spirv", help="the same run's TINYGPT_DUMP_SPIRV folder, to name the kernels")
    ap.add_argument("--arch", default="SM90", help="nvdisasm's architecture (SM90: H100, H200)")
    ap.add_argument("--zstd", default=shutil.which("zstd"), help="the zstd command")
    ap.add_argument("--nvdisasm", default=shutil.which("nvdisasm") or
                    next((p for p in ["/usr/local/cuda/bin/nvdisasm"] if os.path.exists(p)), None),
                    help="CUDA's disassembler (default: on the PATH or in /usr/local/cuda/bin); "
                    "without it the raw code is written")
    a = ap.parse_args()
    if not a.zstd or not shutil.which(a.zstd):
        sys.exit("sass.py: no zstd command %s(apt-get install zstd, or --zstd PATH)" % (a.zstd + " " if a.zstd else ""))
    if a.spirv and not os.path.isdir(a.spirv):
        sys.exit("sass.py: --spirv %s is not a folder" % a.spirv)
    if not os.path.exists(a.cache):
        sys.exit("sass.py: %s does not exist" % a.cache)
    files = [a.cache] if os.path.isfile(a.cache) else [
        os.path.join(d, f) for d, _, fs in os.walk(a.cache) for f in fs if f.endswith(".bin")]
    if not files:
        sys.exit("sass.py: no .bin files in %s (was __GL_SHADER_DISK_CACHE_PATH set?)" % a.cache)
    names = spirv_names(a.spirv) if a.spirv else {}
    os.makedirs(a.out, exist_ok=True)
    seen = {}
    for f in files:
        for ident, code in entries(f, a.zstd):
            cands = names.get(ident, [])
            name = cands[0] if len(cands) == 1 else "id%d" % ident
            k = seen.get(name, 0)
            seen[name] = k + 1
            if k:
                name += "-%d" % k  # the same id in another module, or a recompile
            raw = os.path.join(a.out, name + ".bin")
            with open(raw, "wb") as w:
                w.write(code)
            line = "%s: %d instructions" % (name, len(code) // 16)
            if len(cands) > 1:
                line += " (SPIR-V id %d, one of %s)" % (ident, ", ".join(cands))
            if a.nvdisasm:
                r = subprocess.run([a.nvdisasm, "-b", a.arch, raw], capture_output=True, text=True)
                if r.returncode == 0:
                    with open(os.path.join(a.out, name + ".sass"), "w") as w:
                        w.write(r.stdout)
                    os.remove(raw)
                    regs = [int(x) for x in re.findall(r"\bR(\d+)\b", r.stdout)]
                    line += ", registers R0-R%d" % max(regs) if regs else ""
                else:
                    line += ", nvdisasm failed: " + r.stderr.strip()
            print(line)
    if not seen:
        sys.exit("sass.py: no compute kernels found in the cache")


if __name__ == "__main__":
    main()
