#!/usr/bin/env python3
"""Writes the throwaway certificates of the spec.tls scenarios (run once; the
output is checked in, so the fixtures stay byte-identical):

- ca.pem: a test CA (its key is thrown away: nothing signs with it again);
- db.pem / db.key: a server certificate for *.db-headless.shop.svc (the fixtures'
  cluster `db` in namespace `shop`) signed by it;
- other.pem: the same key, signed by it, for *.other-headless.shop.svc only (a
  certificate that names none of db's servers).

All valid from 2026-01-01 to 2036-01-01 (the fixtures' time is 2026-11-29).
Needs python3-cryptography.
"""
import datetime
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HERE = os.path.dirname(os.path.abspath(__file__))
START = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
END = datetime.datetime(2036, 1, 1, tzinfo=datetime.timezone.utc)


def write(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def pem_key(k):
    return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                           serialization.NoEncryption())


def main():
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mysql-hook test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(1).not_valid_before(START).not_valid_after(END)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())

    def server(cluster, serial):
        return (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cluster)]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(serial)
                .not_valid_before(START).not_valid_after(END)
                .add_extension(x509.SubjectAlternativeName([
                    x509.DNSName(f"*.{cluster}-headless.shop.svc"),
                    x509.DNSName(f"{cluster}-primary.shop.svc")]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256()))

    write("ca.pem", ca.public_bytes(serialization.Encoding.PEM))
    write("db.pem", server("db", 2).public_bytes(serialization.Encoding.PEM))
    write("db.key", pem_key(key))
    write("other.pem", server("other", 3).public_bytes(serialization.Encoding.PEM))


if __name__ == "__main__":
    main()
