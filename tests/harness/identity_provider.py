"""An OAuth identity provider in miniature for the OAUTHBEARER tests: an RSA key pair, its JWKS
file, tokens it signs, and a token endpoint serving the client credentials grant over HTTP."""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

AUDIENCE = "kafka-brokers"
ISSUER = "test-idp"


class IdentityProvider:
    def __init__(self, directory: Path) -> None:
        import jwt
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.jwks = directory / "jwks.json"
        self.jwks.write_text(json.dumps({"keys": [{**public, "kid": "idp-1", "use": "sig", "alg": "RS256"}]}))
        self.clients: dict[str, tuple[str, str]] = {}  # client id -> (secret, subject)
        self.requests: list[dict[str, Any]] = []  # what the token endpoint was sent
        self.failures_to_serve = 0  # answer this many requests with 503 first
        self.lifetime_s = 300
        self._server: ThreadingHTTPServer | None = None

    def token(self, subject: str, audience: str = AUDIENCE, lifetime_s: int = 300, scope: str = "kafka") -> str:
        import jwt

        now = int(time.time())
        return jwt.encode({"sub": subject, "aud": audience, "iss": ISSUER, "iat": now, "exp": now + lifetime_s,
                           "scope": scope}, self.key, algorithm="RS256", headers={"kid": "idp-1"})

    # --- the token endpoint ---------------------------------------------------------------------
    def add_client(self, client_id: str, secret: str, subject: str) -> None:
        self.clients[client_id] = (secret, subject)

    @property
    def token_endpoint(self) -> str:
        if self._server is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
            threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}/oauth2/token"

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def answer(self, headers: Any, body: str) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for one token request."""
        form = dict(urllib.parse.parse_qsl(body))
        self.requests.append({"authorization": headers.get("Authorization"), "form": form,
                              "content_type": headers.get("Content-Type")})
        if self.failures_to_serve > 0:
            self.failures_to_serve -= 1
            return 503, {"error": "temporarily_unavailable"}
        auth = headers.get("Authorization", "")
        try:
            client_id, _, secret = base64.b64decode(auth.removeprefix("Basic ")).decode().partition(":")
        except ValueError:
            return 401, {"error": "invalid_client"}
        client_id, secret = urllib.parse.unquote(client_id), urllib.parse.unquote(secret)
        if form.get("grant_type") != "client_credentials" or self.clients.get(client_id, ("",))[0] != secret:
            return 401, {"error": "invalid_client"}
        token = self.token(self.clients[client_id][1], lifetime_s=self.lifetime_s, scope=form.get("scope", "kafka"))
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": self.lifetime_s}


def _handler(provider: IdentityProvider) -> type[BaseHTTPRequestHandler]:
    class TokenHandler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
            status, answer = provider.answer(self.headers, body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            """Quiet: the tests look at ``provider.requests``."""

    return TokenHandler
