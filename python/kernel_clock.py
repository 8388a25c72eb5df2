#!/usr/bin/env python3
"""Instrument the product kernel (matmul.wgsl's main64) with clock reads, to see where a tile's
time goes on the GPU.

No profiler reaches Vulkan compute kernels on the GPU machine, but SPIR-V can read a clock
(OpReadClockKHR, SPV_KHR_shader_clock). The WebGPU binding does not enable Vulkan's
VK_KHR_shader_clock, so using it is undefined behaviour; NVIDIA's driver compiles it all the same,
reading its global timer in ns (H200, 2026-11-27), and another driver may refuse the kernel.
This script adds four reads to the function each main64 workgroup runs (tile64): at its
start, before the loop over K, after that loop and at its end (after the stores of C); each
thread then writes the four 64-bit readings over its first eight elements of C (two rows of
four: only products whose sizes are multiples of 64, lest threads past C's edge write past C).
The results are wrong by design. TestKernelClock (backend/webgpu/bench_test.go) runs
products with the instrumented kernel and prints, over the tiles, when they start and how long
their prologue, loop and epilogue take.

    mkdir /tmp/spv /tmp/clk
    TINYGPT_DUMP_SPIRV=/tmp/spv tinygpt bench --backend webgpu --presets tiny --steps 1
    python3 kernel_clock.py /tmp/spv/matmul_main64_0.spv /tmp/clk
    # on the GPU machine, with the webgpu test binary (go test -c ./backend/webgpu):
    TINYGPT_KERNEL_CLOCK=/tmp/clk ./webgpu.test -test.run TestKernelClock -test.v

Needs SPIRV-Tools (spirv-dis, spirv-as, spirv-val; Debian's spirv-tools). The kernel is found
by its structure (the entry point main64, the function it calls, that function's first loop
and its last return); a matmul.wgsl changed in those places needs this script changed too.
"""
import os
import re
import subprocess
import sys


def instrument(text):
    L = text.split("\n")

    def find(pat, start=0, end=None):
        for k in range(start, end if end is not None else len(L)):
            if re.search(pat, L[k]):
                return k
        sys.exit("kernel_clock.py: %r not found: not the expected main64" % pat)

    whole = "\n".join(L)
    L.insert(find(r"OpCapability Shader$") + 1, "OpCapability ShaderClockKHR")
    L.insert(find(r"OpExtInstImport|OpMemoryModel"), 'OpExtension "SPV_KHR_shader_clock"')
    entry = re.search(r'OpEntryPoint GLCompute (%\w+) "main64"', whole)
    if not entry:
        sys.exit("kernel_clock.py: no entry point main64")
    f = find(r"^\s*%s = OpFunction " % entry.group(1))
    call = find(r"OpFunctionCall %void (%\w+)", f)
    tile = re.search(r"OpFunctionCall %void (%\w+)", L[call]).group(1)
    f0 = find(r"^\s*%s = OpFunction " % tile)
    end = find(r"OpFunctionEnd", f0)
    j = find(r"OpLabel", f0, end) + 1
    while "OpVariable" in L[j]:  # a block's variables come first
        j += 1
    L.insert(j, "%clk0 = OpReadClockKHR %v2uint %uint_1")
    end += 1
    loop = find(r"OpLoopMerge (%\w+)", f0, end)
    merge = re.search(r"OpLoopMerge (%\w+)", L[loop]).group(1)
    if "OpLabel" not in L[loop - 1] or "OpBranch" not in L[loop - 2]:
        sys.exit("kernel_clock.py: the K loop's header is not where it was expected")
    L.insert(loop - 2, "%clk1 = OpReadClockKHR %v2uint %uint_1")
    end += 1
    m = find(r"^\s*%s = OpLabel" % merge, f0, end)
    L.insert(m + 1, "%clk2 = OpReadClockKHR %v2uint %uint_1")
    end += 1
    store = re.search(r"OpFunctionCall %void %\w+ (%\w+) (%\w+)", L[find(r"OpFunctionCall %void", m, end)])
    i0, j0 = store.group(1), store.group(2)  # the first store4's row and column
    ret = max(k for k in range(f0, end) if "OpReturn" in L[k])
    c = re.search(r"OpDecorate (%\w+) Binding 1$", whole, re.M)
    prm = re.search(r"OpDecorate (%\w+) Binding 0$", whole, re.M)
    if not c or not prm:
        sys.exit("kernel_clock.py: bindings 0 and 1 not found: not the expected main64")
    c, prm = c.group(1), prm.group(1)
    ins = [
        "%clk3 = OpReadClockKHR %v2uint %uint_1",
        "%%zNp = OpAccessChain %%_ptr_Uniform_uint %s %%uint_0 %%uint_0 %%uint_1" % prm,  # prm.p1.N
        "%zN = OpLoad %uint %zNp",
        "%%zr = OpIMul %%uint %s %%zN" % i0,
        "%%zi0 = OpIAdd %%uint %%zr %s" % j0,
        "%zi4 = OpIAdd %uint %zi0 %zN",
    ]
    for n in (1, 2, 3):
        ins += ["%%zi%d = OpIAdd %%uint %%zi0 %%uint_%d" % (n, n), "%%zi%d = OpIAdd %%uint %%zi4 %%uint_%d" % (n + 4, n)]
    for n in range(8):
        ins += [
            "%%zu%d = OpCompositeExtract %%uint %%clk%d %d" % (n, n // 2, n % 2),
            "%%zf%d = OpBitcast %%float %%zu%d" % (n, n),
            "%%zp%d = OpAccessChain %%_ptr_StorageBuffer_float %s %%uint_0 %%zi%d" % (n, c, n),
            "OpStore %%zp%d %%zf%d" % (n, n),
        ]
    L[ret:ret] = ins
    return "\n".join(L)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    text = subprocess.run(["spirv-dis", src], capture_output=True, text=True, check=True).stdout
    os.makedirs(out, exist_ok=True)
    asm = os.path.join(out, "matmul_main64_0.spvasm")
    spv = os.path.join(out, "matmul_main64_0.spv")
    with open(asm, "w") as w:
        w.write(instrument(text))
    subprocess.run(["spirv-as", "--target-env", "vulkan1.1", "--preserve-numeric-ids", asm, "-o", spv], check=True)
    subprocess.run(["spirv-val", "--target-env", "vulkan1.1", spv], check=True)
    os.remove(asm)
    print("wrote", spv)


if __name__ == "__main__":
    main()
