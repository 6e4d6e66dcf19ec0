"""The channel with TLS (a run on a cluster that asks for encrypted traffic) beside the same channel
without it, in one run, on 127.0.0.1 (by hand: ``python bench/channel_tls.py``).

C1  connect: ``channel.connect`` until the challenge-response is done (TLS 1.3 handshake first).
C2  feed frames: MiB/s of 4 MiB ``send_with_bin`` frames (the data feed's Arrow batches) from one
    client to a server thread that receives them, 64 MiB per window.
C3  control messages: small msgpack messages per second (a log line's size), one way.
Each variant runs once per round, in a rotating order, for ``--rounds`` rounds; the figure is the
median over rounds, and the ratio is TLS / plain. The anchor is the plain channel: TLS may cost,
and this says how much.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tfos_notebook.runtime.wire import channel  # noqa: E402
from tfos_notebook.runtime.wire.tls import new_identity  # noqa: E402

FRAME = 4 << 20
WINDOW = 64 << 20
MESSAGES = 20_000


class Sink:
    """A server that counts what arrives and says when ``expect`` messages are in."""

    def __init__(self, secret: channel.Secret) -> None:
        self.count, self.expect, self.done = 0, 0, threading.Event()
        self.server = channel.ControlServer("127.0.0.1", secret, self.on_message, max_frame=FRAME + 4096)

    def on_message(self, conn, msg) -> None:
        self.count += 1
        if self.count == self.expect:
            self.done.set()

    def arm(self, expect: int) -> None:
        self.count, self.expect = 0, expect
        self.done.clear()


def connect_ms(secret, server) -> float:
    started = time.perf_counter()
    conn = channel.connect(*server.address, secret, timeout=10, max_frame=FRAME + 4096)
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed * 1000


def frames_mib_s(secret, sink: Sink) -> float:
    conn = channel.connect(*sink.server.address, secret, timeout=30, max_frame=FRAME + 4096)
    payload = memoryview(bytes(FRAME))
    frames = WINDOW // FRAME
    sink.arm(frames)
    started = time.perf_counter()
    for _ in range(frames):
        conn.send_with_bin({"t": "rows", "n": 1}, "data", payload)
    sink.done.wait(120)
    elapsed = time.perf_counter() - started
    conn.close()
    return WINDOW / (1 << 20) / elapsed


def messages_per_s(secret, sink: Sink) -> float:
    conn = channel.connect(*sink.server.address, secret, timeout=30)
    sink.arm(MESSAGES)
    started = time.perf_counter()
    for i in range(MESSAGES):
        conn.send({"type": "logs", "lines": [["stdout", f"step {i}: loss 0.123456"]]})
    sink.done.wait(120)
    elapsed = time.perf_counter() - started
    conn.close()
    return MESSAGES / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args()
    secrets = {"plain": channel.RunSecret(channel.new_secret()),
               "tls": channel.RunSecret(channel.new_secret(), new_identity())}
    sinks = {name: Sink(secret) for name, secret in secrets.items()}
    figures: dict[tuple[str, str], list[float]] = {}
    names = list(secrets)
    for r in range(opts.rounds):
        for name in names[r % 2:] + names[:r % 2]:  # rotating order
            secret, sink = secrets[name], sinks[name]
            figures.setdefault(("C1 connect (ms)", name), []).append(
                statistics.median(connect_ms(secret, sink.server) for _ in range(20)))
            figures.setdefault(("C2 feed frames (MiB/s)", name), []).append(frames_mib_s(secret, sink))
            figures.setdefault(("C3 control messages (1/s)", name), []).append(messages_per_s(secret, sink))
    for sink in sinks.values():
        sink.server.close()
    print(f"{'':28} {'plain':>10} {'tls':>10} {'tls/plain':>10}   (median of {opts.rounds} rounds)")
    for what in dict.fromkeys(k for k, _ in figures):
        plain, tls = (statistics.median(figures[(what, n)]) for n in ("plain", "tls"))
        print(f"{what:28} {plain:10.2f} {tls:10.2f} {tls / plain:10.2f}")


if __name__ == "__main__":
    main()
