#!/bin/sh
# A lease worker in POSIX sh (plus GNU date/sleep for sub-second times),
# written independently of leasequake and observed only through its log
# lines (log patterns). The lock is a directory: mkdir(2) is atomic. The
# lease is a file inside it, "PID UNTIL_NS", rewritten on every renewal;
# an expired lease is taken over by removing the directory and creating it
# again (remove, then create: the blog's takeover, with the same race).
#
# usage: mkdir_worker.sh LOCKDIR LEASE_MS RENEW_MS WATCH_MS
set -u
lock=$1 lease_ms=$2 renew_ms=$3 watch_ms=$4
me=$$
leading=0

now_ns() { date +%s%N; }
say() { echo "[mkdir-worker $me] $*"; }
secs() { awk -v ms="$1" 'BEGIN { printf "%.3f", ms / 1000 }'; }

write_lease() {
    until=$(( $(now_ns) + lease_ms * 1000000 ))
    echo "$me $until" > "$lock/lease.tmp.$me" && mv "$lock/lease.tmp.$me" "$lock/lease"
}

try_acquire() {
    if mkdir "$lock" 2>/dev/null; then
        write_lease
        leading=1
        say "acquired lease until $until ($1)"
    else
        say "could not acquire"
    fi
}

release() {
    if [ "$leading" = 1 ]; then
        read -r holder _ < "$lock/lease" 2>/dev/null
        # Said before the rmdir: leadership ends when the release begins,
        # and a watcher may take the lock the moment it is gone.
        say "released lease"
        [ "${holder:-}" = "$me" ] && rm -rf "$lock"
    fi
    exit 0
}
trap release TERM INT

try_acquire start
while :; do
    if [ "$leading" = 1 ]; then interval=$renew_ms; else interval=$watch_ms; fi
    # Sleep in the background and wait for it, so that SIGTERM interrupts.
    sleep "$(secs "$interval")" &
    wait $!
    holder='' until=''
    read -r holder until < "$lock/lease" 2>/dev/null
    if [ "$leading" = 1 ]; then
        if [ "${holder:-}" = "$me" ]; then
            write_lease
            say "renewed lease until $until"
        else
            leading=0
            say "lease now held by ${holder:-nobody}, stepping down"
        fi
    elif [ -z "${holder:-}" ]; then
        try_acquire retry
    elif [ "$until" -lt "$(now_ns)" ]; then
        say "lease of $holder expired, taking over"
        rm -rf "$lock"
        try_acquire takeover
    else
        say "lease held by $holder until $until"
    fi
done
