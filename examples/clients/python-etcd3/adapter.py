#!/usr/bin/env python3
"""python-etcd3's Lock as leader election (examples/clients/election.py).

client.lock(name, ttl): a key under /locks/ put with an etcd lease of ttl
whole seconds (etcd raises a TTL under its minimum, 2 s by default). One
attempt (acquire(timeout=0); its default waits 10 s); the leader calls
refresh() every renew interval, one keep-alive of the lease, and checks
that the key still holds its value (is_acquired). The key's create
revision, read after the grant, is a fencing token the library does not
hand out itself.
"""

import os
import sys
from urllib.parse import urlparse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import election  # noqa: E402
import etcd3  # noqa: E402


class Lease:
    def __init__(self, address, name, lease_ms):
        url = urlparse(address if "://" in address else f"http://{address}")
        self.client = etcd3.client(host=url.hostname, port=url.port or 2379, timeout=lease_ms / 3000)
        self.ttl = max(1, round(lease_ms / 1000))
        self.lock = self.client.lock(name, ttl=self.ttl)

    def try_acquire(self):
        if not self.lock.acquire(timeout=0):
            return None
        _, meta = self.client.get(self.lock.key)
        return {"expires_in_ms": self.ttl * 1000, "token": meta.create_revision if meta else None}

    def hold(self):
        left = self.lock.refresh()
        if not left or left[0].TTL <= 0 or not self.lock.is_acquired():
            return False
        return {"expires_in_ms": self.ttl * 1000}

    def release(self):
        self.lock.release()


if __name__ == "__main__":
    election.main(__doc__, lambda a: Lease(a.address, a.lock, a.lease_ms))
