package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// write is the leader's work, as election.py's is: the report in the
// protected resource (a directory, the built-in worker's store), under the
// store's own lock, refused if the store has seen a higher token.
func write(resource string, token int64) (bool, error) {
	if err := os.MkdirAll(resource, 0o755); err != nil {
		return false, err
	}
	guard, err := os.OpenFile(filepath.Join(resource, ".guard"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return false, err
	}
	defer guard.Close() // and with it the lock
	if err := syscall.Flock(int(guard.Fd()), syscall.LOCK_EX); err != nil {
		return false, err
	}
	highest := int64(0)
	if b, err := os.ReadFile(filepath.Join(resource, "highest")); err == nil {
		highest, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	if token < highest {
		return false, nil
	}
	if err := os.WriteFile(filepath.Join(resource, "highest"), []byte(strconv.FormatInt(token, 10)), 0o644); err != nil {
		return false, err
	}
	report, _ := json.Marshal(map[string]int64{"processId": int64(os.Getpid()), "token": token})
	return true, os.WriteFile(filepath.Join(resource, "report"), report, 0o644)
}

// work writes as leader holding `token` and says what the store made of it.
func work(resource string, token int64) {
	if resource == "" {
		return
	}
	detail := map[string]interface{}{"token": token}
	ok, err := write(resource, token)
	if err != nil {
		detail["error"] = err.Error()
	}
	kind := "write_rejected"
	if ok && err == nil {
		kind = "write_accepted"
	}
	emit(kind, monotonicNs(), detail)
}
