"""Secrets kept at rest, sealed (authenticated encryption, Fernet) with OUTFITTER_SECRET_KEYS: a
copy of the database, or a backup, then holds no console user's TOTP key in clear.

The first key seals; every listed key unseals, so a new key goes first and the old one stays listed
until `outfitter secrets reseal` has sealed everything again with the new one. Each key is any
string of 32 characters or more, turned into a Fernet key by HKDF.
"""

from __future__ import annotations

import base64
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

SEALED = "sealed:v1:"  # what a sealed value starts with; anything else is from before sealing


class UnsealFailed(RuntimeError):
    """No listed key opens the value: a key was removed from OUTFITTER_SECRET_KEYS too soon."""


@lru_cache(maxsize=8)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(_fernet_key(key)) for key in keys])


def _fernet_key(key: str) -> bytes:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"outfitter secrets at rest v1")
    return base64.urlsafe_b64encode(derived.derive(key.encode()))


def seal(value: str, keys: tuple[str, ...]) -> str:
    return SEALED + _fernet(keys).encrypt(value.encode()).decode("ascii")


def unseal(stored: str, keys: tuple[str, ...]) -> str:
    """The secret a sealed value holds; a value stored before sealing is answered as it is."""
    if not stored.startswith(SEALED):
        return stored
    try:
        return _fernet(keys).decrypt(stored.removeprefix(SEALED).encode("ascii")).decode()
    except InvalidToken:
        raise UnsealFailed(
            "a secret sealed at rest opens with none of OUTFITTER_SECRET_KEYS: put back the key "
            "it was sealed with (after the new one), then run 'outfitter secrets reseal'"
        ) from None


def is_sealed_with_first(stored: str, keys: tuple[str, ...]) -> bool:
    """Whether `stored` is sealed by the first key already (what `reseal` leaves alone)."""
    if not stored.startswith(SEALED):
        return False
    try:
        Fernet(_fernet_key(keys[0])).decrypt(stored.removeprefix(SEALED).encode("ascii"))
    except InvalidToken:
        return False
    return True
