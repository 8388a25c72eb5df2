#!/usr/bin/env python3
"""What the Vulkan driver makes of our kernels: registers per thread, stack, shared memory.

WebGPU shows none of this, and the driver's compiler decides much of a kernel's speed (how
many workgroups fit on a multiprocessor, whether it spills). This script asks the driver
itself, through VK_KHR_pipeline_executable_properties, for every compute entry point of the
SPIR-V modules it is given. Get the modules from tinygpt (Vulkan path) with

    TINYGPT_DUMP_SPIRV=/tmp/spv tinygpt bench --backend webgpu --presets large --steps 1

(each kernel compiled is written there as the driver gets it), then

    python3 vkstats.py /tmp/spv/*.spv

prints one line per entry point, e.g. "matmul_main64_0.spv main64: Register Count=79, Binary
Size=46848, Stack Size=0, ...". Needs only the Vulkan loader (libvulkan.so.1) and a driver
with the extension (NVIDIA's has it; Mesa's lavapipe 22 does not). Uses the first device.
"""
import ctypes as C
import struct
import sys

import spirv

u32, u64, ptr, size_t = C.c_uint32, C.c_uint64, C.c_void_p, C.c_size_t


class AppInfo(C.Structure):
    _fields_ = [("sType", u32), ("pNext", ptr), ("pApplicationName", C.c_char_p), ("applicationVersion", u32),
                ("pEngineName", C.c_char_p), ("engineVersion", u32), ("apiVersion", u32)]


class InstanceInfo(C.Structure):
    _fields_ = [("sType", u32), ("pNext", ptr), ("flags", u32), ("pApplicationInfo", C.POINTER(AppInfo)),
                ("enabledLayerCount", u32), ("ppEnabledLayerNames", ptr), ("enabledExtensionCount", u32),
                ("ppEnabledExtensionNames", ptr)]


class QueueInfo(C.Structure):
    _fields_ = [("sType", u32), ("pNext", ptr), ("flags", u32), ("queueFamilyIndex", u32), ("queueCount", u32),
                ("pQueuePriorities", C.POINTER(C.c_float))]


class ExecutableFeatures(C.Structure):  # VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR
    _fields_ = [("sType", u32), ("pNext", ptr), ("pipelineExecutableInfo", u32)]


class DeviceInfo(C.Structure):
    _fields_ = [("sType", u32), ("pNext", ptr), ("flags", u32), ("queueCreateInfoCount", u32),
                ("pQueueCreateInfos", C.POINTER(QueueInfo)), ("enabledLayerCount", u32), ("ppEnabledLayerNames", ptr),
                ("enabledExtensionCount", u32), ("ppEnabledExtensionNames", C.POINTER(C.c_char_p)),
                ("pEnabledFeatures", ptr)]


class ModuleInfo(C.Structure):
    _fields_ = [("sType", u32), ("pNext", ptr), ("flags", u32), ("codeSize", size_t), ("pCode", ptr)]


class LayoutBinding(C.Structure):
    _fields_ = [("binding", u32), ("descriptorType", u32), ("descriptorCount", u32), ("stageFlags", u32),
                ("pImmutableSamplers", ptr)]


class SetLayoutInfo(C.Structure):
    _fields_ = [("sType", u32), ("pNext", ptr), ("flags", u32), ("bindingCount", u32),
                ("pBindings", C.POINTER(LayoutBinding))]


class PipelineLayoutInfo(C.Structure):
    _fields_ = [("sType", u32), ("pNext", ptr), ("flags", u32), ("setLayoutCount", u32), ("pSetLayouts", C.POINTER(u64)),
                ("pushConstantRangeCount", u32), ("pPushConstantRanges", ptr)]


class StageInfo(C.Structure):
    _fields_ = [("sType", u32), ("pNext", ptr), ("flags", u32), ("stage", u32), ("module", u64), ("pName", C.c_char_p),
                ("pSpecializationInfo", ptr)]


class ComputePipelineInfo(C.Structure):
    _fields_ = [("sType", u32), ("pNext", ptr), ("flags", u32), ("stage", StageInfo), ("layout", u64),
                ("basePipelineHandle", u64), ("basePipelineIndex", C.c_int32)]


class PipelineInfo(C.Structure):
    _fields_ = [("sType", u32), ("pNext", ptr), ("pipeline", u64)]


class ExecutableProperties(C.Structure):
    _fields_ = [("sType", u32), ("pNext", ptr), ("stages", u32), ("name", C.c_char * 256),
                ("description", C.c_char * 256), ("subgroupSize", u32)]


class ExecutableInfo(C.Structure):
    _fields_ = [("sType", u32), ("pNext", ptr), ("pipeline", u64), ("executableIndex", u32)]


class Statistic(C.Structure):
    _fields_ = [("sType", u32), ("pNext", ptr), ("name", C.c_char * 256), ("description", C.c_char * 256),
                ("format", u32), ("value", u64)]


# Structure types, flags and enums from the Vulkan headers.
ST_APP, ST_INSTANCE, ST_QUEUE, ST_DEVICE, ST_MODULE = 0, 1, 2, 3, 16
ST_STAGE, ST_COMPUTE, ST_PIPELINE_LAYOUT, ST_SET_LAYOUT = 18, 29, 30, 32
ST_EXEC_FEATURES, ST_PIPELINE_INFO, ST_EXEC_PROPS, ST_EXEC_INFO, ST_STAT = (
    1000269000, 1000269001, 1000269002, 1000269003, 1000269004)
CAPTURE_STATISTICS = 0x40
COMPUTE_STAGE = 0x20
UNIFORM_BUFFER, STORAGE_BUFFER = 6, 7
STAT_BOOL, STAT_INT64, STAT_UINT64, STAT_FLOAT64 = 0, 1, 2, 3


def check(result, what):
    if result != 0:
        sys.exit(f"vkstats: {what} failed (VkResult {result})")


def parse(words):
    """Returns the module's compute entry points and {binding: descriptor type} of its resources."""
    entries, binding, storage = [], {}, {}
    try:
        for op, ins in spirv.instructions(words):
            if op == spirv.OP_ENTRY_POINT and ins[0] == 5:  # OpEntryPoint GLCompute %id name
                entries.append(spirv.string(ins[2:]))
            elif op == 71 and ins[1] == 33:  # OpDecorate %var Binding n
                binding[ins[0]] = ins[2]
            elif op == 59:  # OpVariable %type %var StorageClass
                storage[ins[1]] = ins[2]
    except ValueError:
        sys.exit("vkstats: malformed SPIR-V")
    # Storage class Uniform (2) is a uniform buffer; StorageBuffer (12) a storage buffer.
    return entries, {b: UNIFORM_BUFFER if storage.get(v) == 2 else STORAGE_BUFFER for v, b in binding.items()}


def open_device(vk):
    app = AppInfo(ST_APP, None, b"vkstats", 1, b"none", 1, (1 << 22) | (2 << 12))  # Vulkan 1.2
    inst = ptr()
    check(vk.vkCreateInstance(C.byref(InstanceInfo(ST_INSTANCE, None, 0, C.pointer(app), 0, None, 0, None)),
                              None, C.byref(inst)), "vkCreateInstance")
    n = u32(0)
    vk.vkEnumeratePhysicalDevices(inst, C.byref(n), None)
    if n.value == 0:
        sys.exit("vkstats: no Vulkan device")
    devices = (ptr * n.value)()
    vk.vkEnumeratePhysicalDevices(inst, C.byref(n), devices)
    prio = C.c_float(1.0)
    queue = QueueInfo(ST_QUEUE, None, 0, 0, 1, C.pointer(prio))
    feat = ExecutableFeatures(ST_EXEC_FEATURES, None, 1)
    ext = (C.c_char_p * 1)(b"VK_KHR_pipeline_executable_properties")
    dev = ptr()
    r = vk.vkCreateDevice(devices[0], C.byref(DeviceInfo(ST_DEVICE, C.cast(C.pointer(feat), ptr), 0, 1,
                                                          C.pointer(queue), 0, None, 1, ext, None)), None, C.byref(dev))
    if r == -7:  # VK_ERROR_EXTENSION_NOT_PRESENT
        sys.exit("vkstats: this driver does not have VK_KHR_pipeline_executable_properties")
    check(r, "vkCreateDevice")
    return dev


def main(paths):
    vk = C.CDLL("libvulkan.so.1")
    vk.vkEnumeratePhysicalDevices.argtypes = [ptr, C.POINTER(u32), ptr]
    vk.vkCreateDevice.argtypes = [ptr, C.POINTER(DeviceInfo), ptr, C.POINTER(ptr)]
    vk.vkCreateShaderModule.argtypes = [ptr, C.POINTER(ModuleInfo), ptr, C.POINTER(u64)]
    vk.vkCreateDescriptorSetLayout.argtypes = [ptr, C.POINTER(SetLayoutInfo), ptr, C.POINTER(u64)]
    vk.vkCreatePipelineLayout.argtypes = [ptr, C.POINTER(PipelineLayoutInfo), ptr, C.POINTER(u64)]
    vk.vkCreateComputePipelines.argtypes = [ptr, u64, u32, C.POINTER(ComputePipelineInfo), ptr, C.POINTER(u64)]
    vk.vkDestroyPipeline.argtypes = [ptr, u64, ptr]
    vk.vkGetDeviceProcAddr.restype = ptr
    vk.vkGetDeviceProcAddr.argtypes = [ptr, C.c_char_p]
    dev = open_device(vk)
    get_props = C.CFUNCTYPE(C.c_int32, ptr, C.POINTER(PipelineInfo), C.POINTER(u32), C.POINTER(ExecutableProperties))(
        vk.vkGetDeviceProcAddr(dev, b"vkGetPipelineExecutablePropertiesKHR"))
    get_stats = C.CFUNCTYPE(C.c_int32, ptr, C.POINTER(ExecutableInfo), C.POINTER(u32), C.POINTER(Statistic))(
        vk.vkGetDeviceProcAddr(dev, b"vkGetPipelineExecutableStatisticsKHR"))

    seen = {}
    for path in paths:
        data = open(path, "rb").read()
        if data in seen:  # one module serves several kernels (the entry points of one .wgsl file)
            print(f"{path.split('/')[-1]}: the same module as {seen[data]}")
            continue
        seen[data] = path.split("/")[-1]
        words = spirv.module_words(data)
        if words is None:
            sys.exit(f"vkstats: {path} is not a SPIR-V module")
        entries, resources = parse(words)
        code = C.create_string_buffer(data)
        module = u64()
        check(vk.vkCreateShaderModule(dev, C.byref(ModuleInfo(ST_MODULE, None, 0, len(data), C.cast(code, ptr))),
                                      None, C.byref(module)), f"{path}: vkCreateShaderModule")
        bindings = (LayoutBinding * len(resources))(
            *[LayoutBinding(b, t, 1, COMPUTE_STAGE, None) for b, t in sorted(resources.items())])
        set_layout, layout = u64(), u64()
        check(vk.vkCreateDescriptorSetLayout(dev, C.byref(SetLayoutInfo(ST_SET_LAYOUT, None, 0, len(resources), bindings)),
                                             None, C.byref(set_layout)), "vkCreateDescriptorSetLayout")
        check(vk.vkCreatePipelineLayout(dev, C.byref(PipelineLayoutInfo(ST_PIPELINE_LAYOUT, None, 0, 1,
                                                                        C.pointer(set_layout), 0, None)),
                                        None, C.byref(layout)), "vkCreatePipelineLayout")
        for entry in entries:
            stage = StageInfo(ST_STAGE, None, 0, COMPUTE_STAGE, module.value, entry.encode(), None)
            pipeline = u64()
            check(vk.vkCreateComputePipelines(dev, 0, 1, C.byref(ComputePipelineInfo(
                ST_COMPUTE, None, CAPTURE_STATISTICS, stage, layout.value, 0, -1)), None, C.byref(pipeline)),
                f"{path} {entry}: vkCreateComputePipelines")
            info = PipelineInfo(ST_PIPELINE_INFO, None, pipeline.value)
            n = u32(0)
            get_props(dev, C.byref(info), C.byref(n), None)
            props = (ExecutableProperties * n.value)(*[ExecutableProperties(ST_EXEC_PROPS) for _ in range(n.value)])
            get_props(dev, C.byref(info), C.byref(n), props)
            for x in range(n.value):
                exe = ExecutableInfo(ST_EXEC_INFO, None, pipeline.value, x)
                m = u32(0)
                get_stats(dev, C.byref(exe), C.byref(m), None)
                stats = (Statistic * m.value)(*[Statistic(ST_STAT) for _ in range(m.value)])
                get_stats(dev, C.byref(exe), C.byref(m), stats)
                out = []
                for s in stats:
                    v = s.value
                    if s.format == STAT_INT64:
                        v = struct.unpack("<q", struct.pack("<Q", v))[0]
                    elif s.format == STAT_FLOAT64:
                        v = struct.unpack("<d", struct.pack("<Q", v))[0]
                    elif s.format == STAT_BOOL:
                        v = bool(v & 0xFFFFFFFF)
                    elif v >> 32:  # NVIDIA's Local Memory Size has bit 36 set; the bytes are below
                        v = f"{v} (low 32 bits {v & 0xFFFFFFFF})"
                    out.append(f"{s.name.decode()}={v}")
                print(f"{path.split('/')[-1]} {entry}: " + ", ".join(out))
            vk.vkDestroyPipeline(dev, pipeline.value, None)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
