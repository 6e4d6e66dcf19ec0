"""The control channel's mutual challenge-response over a run's secret (the exchange is described
in ``channel.py``), and the secret itself, with the run's TLS identity when its channels are
encrypted. The handshakes take any connection that sends and receives maps and can authenticate
its frames (``channel.Connection``): once both sides proved the secret, each direction of the
connection gets a key of its own, derived from the secret and both nonces, with which every later
frame is authenticated.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Any

from .errors import ChannelError
from .tls import TlsIdentity

PROTOCOL_VERSION = 1
HANDSHAKE_MAX = 1024


def new_secret() -> bytes:
    """A fresh per-run secret."""
    return os.urandom(32)


@dataclass(frozen=True)
class RunSecret:
    """A run's secret ``key``, and the TLS identity its channels use when they are encrypted
    (None: authenticated, not encrypted)."""

    key: bytes
    tls: TlsIdentity | None = None


#: What servers and clients take: a bare key (authenticated, not encrypted) or a :class:`RunSecret`.
Secret = bytes | RunSecret


def secret_to_json(secret: Secret) -> dict:
    """``secret`` as JSON-able text, for a node's own child process (over its stdin pipe)."""
    key, tls = unpack(secret)
    return {"key": key.hex(), "tls": [tls.cert_pem.decode(), tls.key_pem.decode()] if tls else None}


def secret_from_json(data: dict) -> RunSecret:
    """The secret :func:`secret_to_json` wrote."""
    tls = data["tls"]
    return RunSecret(bytes.fromhex(data["key"]), TlsIdentity(tls[0].encode(), tls[1].encode()) if tls else None)


def unpack(secret: Secret) -> tuple[bytes, TlsIdentity | None]:
    """The key and TLS identity (None: not encrypted) of ``secret``."""
    return (secret.key, secret.tls) if isinstance(secret, RunSecret) else (secret, None)


def proof(secret: bytes, label: bytes, a: bytes, b: bytes) -> bytes:
    """The HMAC by which one side proves it knows ``secret`` (``label``: which side)."""
    return hmac.new(secret, label + a + b, hashlib.sha256).digest()


def frame_keys(secret: bytes, server_nonce: bytes, client_nonce: bytes) -> tuple[bytes, bytes]:
    """The keys that authenticate one connection's frames, (client to server, server to client):
    fresh for every connection (the nonces), and never the secret itself."""
    return (proof(secret, b"frames client-to-server", server_nonce, client_nonce),
            proof(secret, b"frames server-to-client", server_nonce, client_nonce))


def client_handshake(conn: Any, key: bytes) -> None:
    """Prove ``key`` to the server on ``conn`` and check its proof, then authenticate every later
    frame; raises ``ChannelError`` when the server cannot prove it knows the secret."""
    hello = conn.recv(HANDSHAKE_MAX)
    server_nonce = hello.get("nonce")
    if hello.get("v") != PROTOCOL_VERSION or not isinstance(server_nonce, bytes):
        raise ChannelError(f"unexpected server hello {hello!r}")
    client_nonce = os.urandom(32)
    conn.send({"nonce": client_nonce, "proof": proof(key, b"client", server_nonce, client_nonce)})
    reply = conn.recv(HANDSHAKE_MAX)
    expected = proof(key, b"server", client_nonce, server_nonce)
    if not hmac.compare_digest(reply.get("proof", b""), expected):
        raise ChannelError("the server did not prove the run secret")
    to_server, to_client = frame_keys(key, server_nonce, client_nonce)
    conn.authenticate(send_key=to_server, recv_key=to_client)


def server_handshake(conn: Any, key: bytes) -> bool:
    """Challenge the client on ``conn``; whether it proved ``key`` (then it has the server's proof,
    and every later frame is authenticated)."""
    server_nonce = os.urandom(32)
    conn.send({"v": PROTOCOL_VERSION, "nonce": server_nonce})
    hello = conn.recv(HANDSHAKE_MAX)
    client_nonce, client_proof = hello.get("nonce"), hello.get("proof")
    if not isinstance(client_nonce, bytes) or not isinstance(client_proof, bytes) or not hmac.compare_digest(
        client_proof, proof(key, b"client", server_nonce, client_nonce)
    ):
        return False
    conn.send({"proof": proof(key, b"server", client_nonce, server_nonce)})
    to_server, to_client = frame_keys(key, server_nonce, client_nonce)
    conn.authenticate(send_key=to_client, recv_key=to_server)
    return True
