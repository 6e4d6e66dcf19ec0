"""The port a node holds for TensorFlow (``task.reserve_port``): outside the range the system hands
to outgoing connections, so that none takes it in the moment between the node letting it go and
TensorFlow binding it."""

from __future__ import annotations

import socket

from tfos_notebook.runtime.node.task.task import reserve_port


def test_the_port_held_for_tensorflow_is_outside_the_ephemeral_range():
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low, high = (int(x) for x in f.read().split()[:2])
    socks = [reserve_port("127.0.0.1") for _ in range(20)]
    try:
        ports = [s.getsockname()[1] for s in socks]
        assert len(set(ports)) == 20 and not any(low <= p <= high for p in ports), (ports, low, high)
    finally:
        for s in socks:
            s.close()


def test_where_every_port_is_ephemeral_or_the_system_does_not_say_any_free_port_is_taken(tmp_path):
    everything = tmp_path / "range"
    everything.write_text("1024\t65535\n")
    for ranges in (str(everything), str(tmp_path / "missing")):
        sock = reserve_port("127.0.0.1", ranges)
        try:
            assert sock.getsockname()[1] > 0
            other = socket.socket()
            try:  # it is held: nobody else binds it
                other.bind(("127.0.0.1", sock.getsockname()[1]))
                raise AssertionError("the reserved port was free")
            except OSError:
                pass
            finally:
                other.close()
        finally:
            sock.close()
