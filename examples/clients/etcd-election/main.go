// etcd's own election recipe (clientv3/concurrency, as Debian ships it:
// etcd 3.4) as a leasequake worker (docs/clients.md).
//
// As most Go services use it: a Session (an etcd lease of TTL whole
// seconds, kept alive by the client every TTL/3) and an Election on a key
// prefix. Campaign blocks until this worker's key is the oldest under the
// prefix, so a candidate does not poll: it is woken when the leader's key
// goes. The leader learns it lost the lease from session.Done(), at once,
// and campaigns again on a new session. e.Rev(), the leader key's create
// revision, is the fencing token, which the leader's writes to the
// protected resource carry (store.go), one when it is elected and one every
// renew interval. SIGTERM: Resign, then close the session.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
)

var events = os.NewFile(3, "events")

// CLOCK_MONOTONIC, which the harness shares (Go's own reading of it is
// not exported).
func monotonicNs() int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

func emit(event string, tNs int64, detail map[string]interface{}) {
	line := map[string]interface{}{"t_ns": tNs, "event": event}
	if len(detail) > 0 {
		line["detail"] = detail
	}
	b, _ := json.Marshal(line)
	if _, err := events.Write(append(b, '\n')); err != nil {
		os.Exit(1)
	}
}

func main() {
	key := flag.String("lock", "", "the lease's name ({key})")
	address := flag.String("address", "", "an etcd endpoint ({address})")
	members := flag.String("members", "", "a cluster's endpoints ({members}), comma-separated")
	leaseMs := flag.Float64("lease-ms", 9000, "the lease: the session's TTL, in whole seconds")
	renewMs := flag.Float64("renew-ms", 3000, "the leader's work, every this long (the client keeps the session alive every TTL/3)")
	resource := flag.String("resource", "", "the protected resource, a directory ({resource})")
	flag.Float64("watch-ms", 0, "unused: a candidate is woken by the leader key's deletion")
	flag.Parse()
	if *renewMs <= 0 {
		fmt.Fprintln(os.Stderr, "--renew-ms must be above 0")
		os.Exit(2)
	}
	endpoints := strings.FieldsFunc(*members, func(r rune) bool { return r == ',' })
	if len(endpoints) == 0 {
		endpoints = []string{*address}
	}
	ttl := int((*leaseMs + 500) / 1000)
	if ttl < 1 {
		ttl = 1
	}
	requestTimeout := time.Duration(*leaseMs/3) * time.Millisecond

	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	emit("ready", monotonicNs(), nil)
	buf := make([]byte, 4096)
	for { // the release: EOF on stdin once every worker is ready
		if _, err := os.Stdin.Read(buf); err != nil {
			break
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: requestTimeout})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-term; cancel() }()
	for ctx.Err() == nil {
		began := monotonicNs()
		session, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
		if err != nil {
			emit("not_acquired", monotonicNs(), map[string]interface{}{"error": err.Error()})
			time.Sleep(requestTimeout)
			continue
		}
		e := concurrency.NewElection(session, "/leasequake/"+*key)
		if err := e.Campaign(ctx, fmt.Sprint(os.Getpid())); err != nil {
			session.Close()
			if ctx.Err() == nil {
				emit("not_acquired", monotonicNs(), map[string]interface{}{"error": err.Error()})
			}
			continue
		}
		// The keep-alives are the client's own, unseen: no expiry to report
		// that later events would keep true.
		emit("acquired", monotonicNs(), map[string]interface{}{"token": e.Rev(), "op_us": (monotonicNs() - began) / 1000})
		work(*resource, e.Rev())
		tick := time.NewTicker(time.Duration(*renewMs * float64(time.Millisecond)))
	leading:
		for {
			select {
			case <-tick.C:
				work(*resource, e.Rev())
			case <-session.Done():
				emit("renew_failed", monotonicNs(), map[string]interface{}{"error": "the session's lease is gone"})
				emit("stepped_down", monotonicNs(), map[string]interface{}{"reason": "lost"})
				break leading
			case <-ctx.Done():
				began := monotonicNs()
				resign, done := context.WithTimeout(context.Background(), requestTimeout)
				e.Resign(resign)
				done()
				session.Close()
				emit("released", began, nil)
				break leading
			}
		}
		tick.Stop()
	}
	emit("exiting", monotonicNs(), map[string]interface{}{"code": 0})
}
