"""Test certificates made at test time by the openssl command (Debian's
openssl): a CA, a server certificate it signs for 127.0.0.1 and localhost,
and client certificates, all PEM. For the TLS tests of the live server."""

import pathlib
import subprocess


def _openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(folder: pathlib.Path, name: str) -> pathlib.Path:
    """A self-signed CA under folder/name.crt and .key; returns the .crt."""
    crt, key = folder / f"{name}.crt", folder / f"{name}.key"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-days", "2", "-subj", f"/CN={name}", "-keyout", str(key),
             "-out", str(crt), "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return crt


def make_cert(folder: pathlib.Path, name: str, ca: pathlib.Path, server: bool):
    """A certificate signed by the CA `ca` (its .key beside it), for a server
    on 127.0.0.1 / localhost or for a client; returns (crt, key)."""
    crt, key, csr = (folder / f"{name}.crt", folder / f"{name}.key",
                     folder / f"{name}.csr")
    ext = folder / f"{name}.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
                   if server else "extendedKeyUsage=clientAuth\n")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(csr))
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca),
             "-CAkey", str(ca.with_suffix(".key")), "-CAcreateserial", "-days", "2",
             "-extfile", str(ext), "-out", str(crt))
    return crt, key
