"""A self-signed certificate (CN karpy-test, valid until 2126) and its key, for kubeconfigs that name a CA or a
client certificate: Python's ssl loads them for real, so a placeholder PEM would not do. Test data, not a secret."""

from __future__ import annotations

CERTIFICATE = """\
-----BEGIN CERTIFICATE-----
MIIBgjCCASegAwIBAgIUUeU8BEQ1ssvIC+6SbgS1SE7wy8cwCgYIKoZIzj0EAwIw
FTETMBEGA1UEAwwKa2FycHktdGVzdDAgFw0yNjExMjYwNzE2MDVaGA8yMTI2MTEw
MjA3MTYwNVowFTETMBEGA1UEAwwKa2FycHktdGVzdDBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABJKmnQ7rGAGu84kTfTtZa2JnQd7xGMJPhcaGDgJoCKLbX4D/Pbnf
E9dvw7ff8VYAF234eb2gGd/NtpQTvcs62j+jUzBRMB0GA1UdDgQWBBQEIFl7QJyR
9PrEBu/KNbHbyy2qYjAfBgNVHSMEGDAWgBQEIFl7QJyR9PrEBu/KNbHbyy2qYjAP
BgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0kAMEYCIQCdSaAk004zCWItWVIP
7TUk+YTkdGR1/E+oyuFW1W/tJwIhAIXkq06pvmFqbuw5fn5CI1V9LJ+q+44seHZj
gLGwGyCg
-----END CERTIFICATE-----
"""
PRIVATE_KEY = """\
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgPmIQlPB876yRP6qP
WvZ9IUffXYzVZmUsO2n9Ebf/Tz+hRANCAASSpp0O6xgBrvOJE307WWtiZ0He8RjC
T4XGhg4CaAii21+A/z253xPXb8O33/FWABdt+Hm9oBnfzbaUE73LOto/
-----END PRIVATE KEY-----
"""
SUBJECT = ((("commonName", "karpy-test"),),)
"""The subject as `ssl.SSLContext.get_ca_certs()` reports it."""
