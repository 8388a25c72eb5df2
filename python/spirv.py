"""Reading SPIR-V modules' words, shared by vkstats.py and sass.py."""
import struct

MAGIC = 0x07230203  # a SPIR-V module's first word
OP_ENTRY_POINT = 15


def module_words(data):
    """The 32-bit words of the SPIR-V module in data, or None if data is not one."""
    if len(data) % 4 or len(data) < 20:
        return None
    words = struct.unpack("<%dI" % (len(data) // 4), data)
    return words if words[0] == MAGIC else None


def instructions(words):
    """Yield (opcode, operand words) for each instruction after the module's header; a
    malformed stream raises ValueError."""
    i = 5
    while i < len(words):
        op, n = words[i] & 0xFFFF, words[i] >> 16
        if n == 0 or i + n > len(words):
            raise ValueError("malformed SPIR-V")
        yield op, words[i + 1:i + n]
        i += n


def string(operands):
    """The literal string that starts operands (nul-terminated, packed in words)."""
    return struct.pack("<%dI" % len(operands), *operands).split(b"\0")[0].decode()
