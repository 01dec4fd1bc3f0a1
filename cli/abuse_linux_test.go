package cli

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// diskUsage is what du counts for a file: its allocated blocks (the
// relay's log segments are written ahead, so their length says little).
func diskUsage(path string) int64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return st.Blocks * 512
}

// processRSS is the test process's resident set (VmRSS), in bytes.
func processRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
