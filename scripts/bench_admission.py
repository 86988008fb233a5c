#!/usr/bin/env python3
"""Admission measurement (issue 10, class 10): the busy fraction under load.

Starts a server binary and keeps N callers busy over one raw JSON-RPC stdio
connection: each caller sends a tools/call, waits for its answer, and sends
the next (a closed loop), CALLS times. Prints, per guard and caller count,
how many calls were refused `server_busy` and the median / p95 latency.
With --testbed, also hangs every guard thread and overdue permit of a
warden-testbed server with `sleep_in_process` and prints the ping latency.

Usage: scripts/bench_admission.py [--bin PATH] [--calls N] [--testbed PATH]
(default: target/debug/warden-finance, 200 calls per caller count).
"""
import json, os, statistics, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


class Server:
    """A server on stdio; replies are matched to requests by id."""

    def __init__(self, binary, env=None):
        self.dir = tempfile.mkdtemp(prefix="warden-admission-")
        full_env = dict(os.environ, WARDEN_ARTIFACTS_DIR=self.dir, **(env or {}))
        self.proc = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=full_env)
        self.lock = threading.Lock()
        self.next_id = 0
        self.waiting = {}
        threading.Thread(target=self.read, daemon=True).start()
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench-admission", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        with self.lock:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()

    def read(self):
        for line in self.proc.stdout:
            reply = json.loads(line)
            slot = self.waiting.pop(reply.get("id"), None)
            if slot is not None:
                slot[1] = reply
                slot[0].set()

    def request(self, method, params=None, timeout=60):
        with self.lock:
            self.next_id += 1
            rid = self.next_id
        slot = [threading.Event(), None]
        self.waiting[rid] = slot
        message = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        if not slot[0].wait(timeout):
            raise SystemExit(f"{method} not answered within {timeout} s")
        return slot[1]

    def call(self, name, arguments):
        return self.request("tools/call", {"name": name, "arguments": arguments})["result"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


PRICE = {"option_type": "call", "spot": 100, "strike": 100, "time_to_expiry": 1,
         "volatility": 0.2, "rate": 0.05}
GUARDS = [("get_quote (in_process)", "get_quote", {"symbol": "AAPL"}),
          ("price_option_t (isolated)", "price_option_t", PRICE)]


def load(server, guard, arguments, callers, total):
    """`callers` closed-loop callers making `total` calls between them."""
    per = max(1, total // callers)
    busy, other, latencies = [0], [0], []
    lock = threading.Lock()

    def caller():
        for _ in range(per):
            started = time.perf_counter()
            result = server.call(guard, arguments)
            elapsed = (time.perf_counter() - started) * 1000
            code = (result.get("structuredContent") or {}).get("error", {}).get("code") \
                if result.get("isError") else None
            with lock:
                latencies.append(elapsed)
                if code == "server_busy":
                    busy[0] += 1
                elif code is not None:
                    other[0] += 1

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    latencies.sort()
    return busy[0], other[0], len(latencies), statistics.median(latencies), \
        latencies[int(len(latencies) * 0.95) - 1]


def ping_with_every_permit_taken(testbed):
    """Hang 4 guard threads + 2 overdue permits, then time pings and a fresh call."""
    server = Server(testbed, {"WARDEN_MAX_CONCURRENT_CALLS": "8", "WARDEN_MAX_GUARD_THREADS": "4",
                              "WARDEN_MAX_OVERDUE_IN_PROCESS": "2"})
    for wave in (4, 2):
        hung = [threading.Thread(target=server.call, args=("sleep_in_process", {"millis": 120000}))
                for _ in range(wave)]
        for t in hung:
            t.start()
        for t in hung:
            t.join()
    pings = []
    for _ in range(20):
        started = time.perf_counter()
        server.request("ping", timeout=10)
        pings.append((time.perf_counter() - started) * 1000)
    started = time.perf_counter()
    fresh = server.call("get_quote", {"symbol": "AAPL"})
    fresh_ms = (time.perf_counter() - started) * 1000
    code = (fresh.get("structuredContent") or {}).get("error", {}).get("code", "success")
    print(f"ping with every guard thread and overdue permit taken: median {statistics.median(pings):.2f} ms, "
          f"max {max(pings):.2f} ms; a fresh get_quote answered {code} in {fresh_ms:.0f} ms")
    server.proc.kill()


def main():
    binary = arg("--bin", os.path.join(ROOT, "target/debug/warden-finance"))
    total = int(arg("--calls", "200"))
    print(f"{binary}: {total} calls per row")
    print(f"{'guard':28} {'callers':>7} {'busy':>12} {'other errors':>12} {'median ms':>10} {'p95 ms':>8}")
    server = Server(binary)
    for label, guard, arguments in GUARDS:
        for callers in (4, 50):
            busy, other, n, median, p95 = load(server, guard, arguments, callers, total)
            print(f"{label:28} {callers:>7} {busy:>5}/{n:<3} {100 * busy / n:>3.0f}% {other:>12} "
                  f"{median:>10.1f} {p95:>8.1f}")
    server.close()
    testbed = arg("--testbed", None)
    if testbed:
        ping_with_every_permit_taken(testbed)


if __name__ == "__main__":
    main()
