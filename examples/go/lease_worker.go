// A lock-file lease worker written independently of leasequake, in Go,
// as the blog's own worker is: a lock file holding {processId, leaseUntil},
// taken when it is absent or its leaseUntil is past by time.Now(), renewed
// by its holder. Go reads the clock through the vDSO itself, never through
// the C library, so only a clock moved in its vDSO reaches it.
//
// It speaks leasequake's event protocol (docs/worker-protocol.md): one JSON
// object per line on file descriptor 3 ($LEASEQUAKE_EVENTS_FD), stamped
// with CLOCK_MONOTONIC, which the harness shares. Like
// examples/python/lease_worker.py, it takes the file atomically (written to
// a temporary file and linked into place, so it is never empty) and judges
// leaseUntil exactly (fractional seconds).
//
// Standard library only: built with Debian's golang-go in GOPATH mode, no
// module download (examples/go/build.sh).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

type lease struct {
	ProcessID  int     `json:"processId"`
	LeaseUntil float64 `json:"leaseUntil"`
}

var events *os.File

// monoNs is CLOCK_MONOTONIC in ns, the clock the harness stamps with.
func monoNs() int64 {
	var ts syscall.Timespec
	// CLOCK_MONOTONIC is 1 (true however the wall clock is moved).
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

func emit(event string, detail map[string]interface{}) {
	line := map[string]interface{}{"t_ns": monoNs(), "event": event}
	if len(detail) > 0 {
		line["detail"] = detail
	}
	b, _ := json.Marshal(line)
	if _, err := events.Write(append(b, '\n')); err != nil {
		os.Exit(1)
	}
}

// now is the wall clock as the program reads it (time.Now: the vDSO).
func now() float64 {
	return float64(time.Now().UnixNano()) / 1e9
}

// readLease: the lease, nil if there is none, or an error if unreadable.
func readLease(path string) (*lease, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var l lease
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

func write(path string, l lease) string {
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	b, _ := json.Marshal(l)
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return tmp
}

func tryCreate(path string, l lease) bool {
	tmp := write(path, l)
	defer os.Remove(tmp)
	return os.Link(tmp, path) == nil
}

func rewrite(path string, l lease) {
	tmp := write(path, l)
	if err := os.Rename(tmp, path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func main() {
	lock := flag.String("lock", "", "the lock file")
	leaseMs := flag.Float64("lease-ms", 9000, "lease length")
	renewMs := flag.Float64("renew-ms", 3000, "renew interval")
	watchMs := flag.Float64("watch-ms", 3000, "watch interval")
	flag.Parse()
	if *lock == "" {
		fmt.Fprintln(os.Stderr, "--lock is required")
		os.Exit(2)
	}
	fd := 3
	if v, err := strconv.Atoi(os.Getenv("LEASEQUAKE_EVENTS_FD")); err == nil {
		fd = v
	}
	events = os.NewFile(uintptr(fd), "events")
	pid := os.Getpid()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)

	fresh := func() lease { return lease{pid, now() + *leaseMs/1000} }
	wrote := func(l lease) map[string]interface{} {
		return map[string]interface{}{"holder": pid, "lease_until": l.LeaseUntil, "expires_in_ms": *leaseMs}
	}

	// Started: wait for the release, EOF on stdin.
	emit("ready", nil)
	io.Copy(io.Discard, os.Stdin)

	// What an attempt to take the file reports: acquired (how, and what
	// it wrote), or `missed`.
	took := func(l lease, leading bool, how, missed string) {
		if !leading {
			emit(missed, nil)
			return
		}
		d := wrote(l)
		d["how"] = how
		emit("acquired", d)
	}
	l := fresh()
	leading := tryCreate(*lock, l)
	took(l, leading, "start", "not_acquired")
	interval := func() time.Duration {
		ms := *watchMs
		if leading {
			ms = *renewMs
		}
		return time.Duration(ms * float64(time.Millisecond))
	}
	// Ticks on the monotonic clock, as time.Timer keeps them.
	next := time.Now().Add(interval())
	for {
		timer := time.NewTimer(time.Until(next))
		select {
		case <-stop:
			timer.Stop()
			if leading {
				began := monoNs()
				if cur, err := readLease(*lock); err == nil && cur != nil && cur.ProcessID == pid {
					os.Remove(*lock)
				}
				line := map[string]interface{}{"t_ns": began, "event": "released"}
				b, _ := json.Marshal(line)
				events.Write(append(b, '\n'))
			}
			emit("exiting", map[string]interface{}{"code": 0})
			return
		case <-timer.C:
		}
		was := leading
		cur, err := readLease(*lock)
		switch {
		case leading:
			if err == nil && cur != nil && cur.ProcessID == pid {
				l = fresh()
				rewrite(*lock, l)
				emit("renewed", wrote(l))
			} else {
				holder := 0
				if cur != nil {
					holder = cur.ProcessID
				}
				emit("renew_failed", map[string]interface{}{"error": fmt.Sprintf("the lease is held by %d", holder)})
				leading = false
				d := map[string]interface{}{"reason": "other-holder"}
				if holder != 0 {
					d["holder"] = holder
				}
				emit("stepped_down", d)
			}
		case err != nil:
			emit("unreadable", map[string]interface{}{"error": "cannot parse the lease"})
		case cur == nil:
			l = fresh()
			leading = tryCreate(*lock, l)
			took(l, leading, "retry", "not_acquired")
		case cur.LeaseUntil < now():
			emit("expired_seen", map[string]interface{}{"holder": cur.ProcessID})
			os.Remove(*lock)
			l = fresh()
			leading = tryCreate(*lock, l)
			took(l, leading, "takeover", "takeover_lost")
		default:
			emit("held_by", map[string]interface{}{"holder": cur.ProcessID, "lease_until": cur.LeaseUntil})
		}
		t := time.Now()
		if was != leading {
			next = t.Add(interval())
		} else {
			next = next.Add(interval())
			for !next.After(t) { // ticks missed while stopped are dropped
				next = next.Add(interval())
			}
		}
	}
}
