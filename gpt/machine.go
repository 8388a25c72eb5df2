package gpt

// PhysicalMemory is the machine's physical memory in bytes (MemTotal of /proc/meminfo), or 0
// where it cannot be read.
func PhysicalMemory() int64 { return physicalMemory() }
