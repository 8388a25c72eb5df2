package gpt

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// MemoryEstimate is the number of bytes a model of shape c needs on its backend for passes over
// B sequences of T tokens: the weights (with gradients and the two AdamW moments when training),
// the activations the workspace keeps, and the CPU backend's attention scratch: a T×T matrix of
// scores per thread at work (and one of their gradients when training), which dominates at long
// contexts.
func MemoryEstimate(c Config, B, T int, training bool) int64 {
	n, C, L, F := int64(B)*int64(T), int64(c.DModel), int64(c.Layers), int64(c.DMlp)
	params := int64(c.NumParams())
	perToken := (L+1)*C + L*(9*C+2*F+6) + 2*C + Vocab + 6
	threads := int64(min(runtime.GOMAXPROCS(0), max(B*c.Heads, 1)))
	scores := threads * int64(T) * int64(T)
	bytes := 4 * (params + n*perToken + scores)
	if training {
		bytes += 4 * (3*params + n*(7*C+F) + scores)
	}
	return bytes
}

// CheckMemory returns an error if need bytes exceed the machine's physical memory (where it
// can be read), so that an oversized model is refused with a message instead of crashing.
func CheckMemory(need int64, what string) error {
	total := physicalMemory()
	if total > 0 && need > total {
		return fmt.Errorf("%s needs about %s of memory, more than this machine's %s", what, humanBytes(need), humanBytes(total))
	}
	return nil
}

// physicalMemory reads MemTotal from /proc/meminfo; 0 where unknown.
func physicalMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KB", n>>10)
}
