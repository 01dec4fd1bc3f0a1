// The disk's own flush, and what the relay's durable acks cost beside it.

package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// diskProbe appends 4 KiB blocks to a file in dir, each followed by an
// fdatasync, for d, as the relay's log appends a batch and flushes it:
// the rate and latency of the flush an ack waits for, on the disk the
// serve's data folder is on.
func diskProbe(ctx context.Context, dir string, d time.Duration) (result, error) {
	f, err := os.CreateTemp(dir, "relaybench-fsync-*")
	if err != nil {
		return result{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, 4096)
	var h hist
	var n int64
	t0 := time.Now()
	for time.Since(t0) < d && ctx.Err() == nil {
		s := time.Now()
		if _, err := f.Write(block); err != nil {
			return result{}, err
		}
		if err := fdatasync(f); err != nil {
			return result{}, err
		}
		h.add(int64(time.Since(s)))
		n++
		if n%4096 == 0 { // 16 MiB: start the file again
			if err := f.Truncate(0); err != nil {
				return result{}, err
			}
			if _, err := f.Seek(0, 0); err != nil {
				return result{}, err
			}
		}
	}
	elapsed := time.Since(t0)
	return result{rate: float64(n) / elapsed.Seconds(), unit: "fdatasync/s",
		p50: time.Duration(h.quantile(0.5)), p99: time.Duration(h.quantile(0.99)), p999: time.Duration(h.quantile(0.999))}, nil
}

// scraper reads a skytale serve's metrics (its --metrics-addr): how many
// group commits its archive has made (each one flush of the log, for the
// acks of a batch) and how many publishes it acknowledged.
type scraper struct {
	url  string
	http *http.Client
}

func (s scraper) read(ctx context.Context) (commits, acked float64, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", s.url, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("metrics: %s", resp.Status)
	}
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, m := range []struct {
			name string
			dst  *float64
		}{{"skytale_relay_archive_commit_seconds_count ", &commits}, {`skytale_relay_publishes_total{result="ok"} `, &acked}} {
			if v, ok := strings.CutPrefix(line, m.name); ok {
				if *m.dst, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
					return 0, 0, fmt.Errorf("metrics: %q: %w", line, err)
				}
				found++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("metrics at %s: no archive commits or ok publishes (a SQLite archive's serve with --metrics-addr?)", s.url)
	}
	return commits, acked, nil
}

// diskSummary sets the durable acks beside the disk's flush (the medians
// of the rounds): one in flight against the flush's p50 plus the relay's
// own round trip without it (the target noflush, a benchmark build of
// tally serve whose archive does not fsync), and many in flight against
// the flush rate times the acks each flush carried.
func diskSummary(results map[string][]result, disk result, cases []durableCase, alone bool) {
	key := func(target, scenario string) string {
		if alone {
			return scenario
		}
		return target + " " + scenario
	}
	fmt.Printf("\ndurable acks against the disk (fdatasync p50 %s, %.0f flushes/s)\n", round(disk.p50), disk.rate)
	for _, d := range cases {
		scenario := fmt.Sprintf("durable %d conn × %d", d.conns, d.inflight)
		rs, ok := results[key("skytale", scenario)]
		if !ok {
			continue
		}
		s := median(rs)
		if d.inflight == 1 && d.conns == 1 {
			nf, ok := results[key("noflush", scenario)]
			if !ok {
				fmt.Printf("%-24s ack p50 %s (a noflush target gives the relay's own round trip to set beside it)\n", scenario, round(s.p50))
				continue
			}
			floor := disk.p50 + median(nf).p50
			fmt.Printf("%-24s ack p50 %s; fdatasync p50 + the relay without flushes %s = %s; ratio %.2f (goal ≤ 1.15)\n",
				scenario, round(s.p50), round(median(nf).p50), round(floor), ratio(s.p50, floor))
			continue
		}
		if s.perFlush == 0 {
			fmt.Printf("%-24s %.0f acks/s (-metrics gives the acks per flush to set beside the flush rate)\n", scenario, s.rate)
			continue
		}
		bound := disk.rate * s.perFlush
		fmt.Printf("%-24s %.0f acks/s at %.1f acks/flush; flush rate × acks/flush %.0f/s; ratio %.2f (goal ≤ 1.2)",
			scenario, s.rate, s.perFlush, bound, bound/s.rate)
		// The relay without flushes at the same load tells whether the
		// flushes or the rest of the path bound it.
		if nf, ok := results[key("noflush", scenario)]; ok {
			fmt.Printf("; without flushes %.0f acks/s", median(nf).rate)
		}
		fmt.Println()
	}
}
