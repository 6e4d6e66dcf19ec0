"""TLS for a run's channels (the control channel and the nodes' data feeds), used when the cluster
asks for encrypted traffic.

Each such run has its own TLS identity: a key and a self-signed certificate made on the driver
(``new_identity``), which travel to the executors inside the task closure beside the run's secret,
as Spark's own encryption protects that closure. Servers present the certificate; clients accept
that exact certificate and nothing else (no host name check: the pinned certificate is the
identity). TLS 1.3 only. The channel's challenge-response on the run secret runs inside TLS, as
without it.

:class:`TlsSocket` is the blocking socket the channel reads and writes, with TLS done over memory
buffers: OpenSSL forbids reading and writing one connection from two threads at once, and a
channel connection has a reading thread while other threads send. Every OpenSSL call holds one
lock; waiting for the network holds none.
"""

from __future__ import annotations

import datetime
import functools
import os
import socket
import ssl
import tempfile
import threading
from dataclasses import dataclass, field

RECV_BYTES = 256 << 10
SEND_CHUNK = 1 << 20  # plaintext encrypted per lock hold while sending


@dataclass(frozen=True)
class TlsIdentity:
    """A run's TLS certificate and its private key, both PEM."""

    cert_pem: bytes
    key_pem: bytes = field(repr=False)  # never in a log or a traceback


def new_identity(name: str = "tfos_notebook run") -> TlsIdentity:
    """A fresh key (EC P-256) and a self-signed certificate for it, valid for 30 days."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(ski, critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
            .sign(key, hashes.SHA256()))
    return TlsIdentity(
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption()))


@functools.lru_cache(maxsize=8)
def server_context(identity: TlsIdentity) -> ssl.SSLContext:
    """The context of a server presenting ``identity`` (made once per identity and process)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.num_tickets = 0  # connections are never resumed: no session tickets after the handshake
    with tempfile.TemporaryDirectory(prefix="tfos-tls-") as folder:  # OpenSSL loads keys from files only
        cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
        for path, data in ((cert, identity.cert_pem), (key, identity.key_pem)):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                f.write(data)
        context.load_cert_chain(cert, key)
    return context


@functools.lru_cache(maxsize=8)
def client_context(identity: TlsIdentity) -> ssl.SSLContext:
    """The context of a client that accepts only a server presenting ``identity``'s certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.check_hostname = False  # the pinned certificate is the identity, wherever the server runs
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=identity.cert_pem.decode("ascii"))
    return context


class TlsSocket:
    """A connected TCP socket speaking TLS, with the blocking socket methods the channel uses
    (``recv_into``, ``sendall``, ``settimeout``, ``getsockname``, ``shutdown``, ``close``...).

    Safe for one reading thread and any number of sending threads at once. Made by
    :meth:`client` or :meth:`server`, which complete the handshake (bounded by the socket's
    timeout) or raise ``ssl.SSLError`` / ``OSError``.
    """

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_side: bool) -> None:
        self._sock = sock
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=server_side)
        self._lock = threading.Lock()  # every call into OpenSSL (the TLS object and its buffers)
        self._send_lock = threading.Lock()  # keeps records in order on the wire; taken before _lock
        self._handshake()

    @classmethod
    def client(cls, sock: socket.socket, identity: TlsIdentity) -> TlsSocket:
        return cls(sock, client_context(identity), server_side=False)

    @classmethod
    def server(cls, sock: socket.socket, identity: TlsIdentity) -> TlsSocket:
        return cls(sock, server_context(identity), server_side=True)

    def _handshake(self) -> None:
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if not self._receive():
                    raise ConnectionError("the peer closed the connection during the TLS handshake") from None
        self._flush()

    def _receive(self) -> bool:
        """Move bytes from the network into the TLS object; False at end of stream."""
        raw = self._sock.recv(RECV_BYTES)
        if not raw:
            return False
        with self._lock:
            self._incoming.write(raw)
        return True

    def _flush(self) -> None:
        """Send the records the TLS object has produced (answers it owes the peer included)."""
        with self._send_lock:
            with self._lock:
                out = self._outgoing.read()
            if out:
                self._sock.sendall(out)

    def recv_into(self, buffer: memoryview | bytearray, nbytes: int = 0) -> int:
        """Read up to ``nbytes`` of plaintext into ``buffer``; 0 once the peer has closed."""
        view = memoryview(buffer)
        nbytes = nbytes or len(view)
        while True:
            with self._lock:
                try:
                    got = self._tls.read(nbytes, view)
                except ssl.SSLWantReadError:
                    got = None
                except ssl.SSLZeroReturnError:  # the peer's close_notify
                    return 0
                owed = self._outgoing.pending
            if owed:
                self._flush()
            if got is not None:
                return got
            if not self._receive():
                return 0

    def sendall(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data).cast("B")
        with self._send_lock:
            for start in range(0, len(view), SEND_CHUNK):
                with self._lock:
                    self._tls.write(view[start:start + SEND_CHUNK])
                    out = self._outgoing.read()
                self._sock.sendall(out)

    def pending(self) -> bool:
        """Whether bytes already received wait to be read (``select`` on the socket cannot tell)."""
        with self._lock:
            return bool(self._tls.pending() or self._incoming.pending)

    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)

    def gettimeout(self) -> float | None:
        return self._sock.gettimeout()

    def setsockopt(self, *args) -> None:
        self._sock.setsockopt(*args)

    def getsockname(self):
        return self._sock.getsockname()

    def getpeername(self):
        return self._sock.getpeername()

    def fileno(self) -> int:
        return self._sock.fileno()

    def shutdown(self, how: int) -> None:
        self._sock.shutdown(how)

    def close(self) -> None:
        self._sock.close()
