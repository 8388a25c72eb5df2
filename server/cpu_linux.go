package server

import "os"

// cpuName reads the processor's name from /proc/cpuinfo ("" where unknown).
func cpuName() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	return cpuInfoName(f)
}
