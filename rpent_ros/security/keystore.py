"""An SROS2 keystore for a policy, made with sros2's own Python API, and the checks a node makes of it
before it joins a secured graph.

`init_keystore` creates the keystore (sros2: its identity and permissions CAs, the governance file),
one enclave per policy enclave (key, certificate) and each enclave's signed permissions from the
policy. rcl, given ROS_SECURITY_ENABLE=true and ROS_SECURITY_STRATEGY=Enforce, refuses to start a
node whose files are missing, but with a C error deep in a traceback; `check_enclave` names the file
and the command that makes it first, and also refuses certificates outside their validity (which
DDS-Security would reject only at the first handshake, as silence).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from rpent_ros.security.policy import enclaves_of

#: The files rcl and Cyclone DDS read from an enclave's folder.
ENCLAVE_FILES = ("cert.pem", "key.pem", "permissions.p7s", "governance.p7s", "identity_ca.cert.pem",
                 "permissions_ca.cert.pem")
_CERTIFICATES = ("cert.pem", "identity_ca.cert.pem", "permissions_ca.cert.pem")
INIT_COMMAND = "rpent ros-security init"


class SecurityConfigError(ValueError):
    """The keystore, an enclave or a security setting is unusable; the message names the file and the fix."""


@contextmanager
def _domain(domain_id: int | None) -> Iterator[None]:
    # sros2 writes the domain of ROS_DOMAIN_ID into the governance and permission files.
    before = os.environ.get("ROS_DOMAIN_ID")
    if domain_id is not None:
        os.environ["ROS_DOMAIN_ID"] = str(domain_id)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ROS_DOMAIN_ID", None)
        else:
            os.environ["ROS_DOMAIN_ID"] = before


def init_keystore(directory: Path, policy_xml: str, *, domain_id: int | None = None) -> list[str]:
    """Make (or complete) the keystore in `directory` for `policy_xml`; returns the enclaves written.

    A folder that holds anything but a keystore is refused. An existing keystore keeps its CAs and
    the keys of its enclaves; every policy enclave gets its permissions signed anew from the policy.
    """
    from sros2.keystore import create_enclave, create_keystore, create_permission, is_valid_keystore

    directory = Path(directory)
    if directory.exists() and any(directory.iterdir()) and not is_valid_keystore(directory):
        raise SecurityConfigError(f"keystore {directory}: the folder holds files but no keystore; name a new or "
                                  "empty folder")
    enclaves = enclaves_of(policy_xml)
    directory.mkdir(parents=True, exist_ok=True)
    policy_file = directory / "policy.xml"
    policy_file.write_text(policy_xml)  # kept beside the keys: which policy signed them
    with _domain(domain_id):
        if not is_valid_keystore(directory):
            create_keystore(directory)
        for enclave in enclaves:
            create_enclave(directory, enclave)
            create_permission(directory, enclave, policy_file)
    return enclaves


def enclave_dir(keystore: Path, enclave: str) -> Path:
    return Path(keystore) / "enclaves" / enclave.strip("/")


def check_enclave(keystore: Path, enclave: str, *, now: datetime.datetime | None = None) -> None:
    """Raise SecurityConfigError unless `enclave` of `keystore` has every file and valid certificates."""
    from cryptography import x509

    keystore = Path(keystore)
    if not keystore.is_dir():
        raise SecurityConfigError(f"keystore {keystore}: no such folder (make it: {INIT_COMMAND} {keystore})")
    folder = enclave_dir(keystore, enclave)
    for name in ENCLAVE_FILES:
        if not (folder / name).is_file():
            raise SecurityConfigError(f"enclave {enclave}: {folder / name} is missing (an enclave the keystore's policy "
                                      f"lacks: add the node to the policy, then {INIT_COMMAND} {keystore} --policy FILE)")
    now = now or datetime.datetime.now(datetime.timezone.utc)
    for name in _CERTIFICATES:
        path = folder / name
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        if now >= cert.not_valid_after_utc:
            raise SecurityConfigError(f"enclave {enclave}: certificate {path.resolve()} expired on "
                                      f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC (make new keys: "
                                      f"{INIT_COMMAND} on a new folder)")
        if now < cert.not_valid_before_utc:
            raise SecurityConfigError(f"enclave {enclave}: certificate {path.resolve()} is not valid before "
                                      f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC (is this machine's clock right?)")


def enclave_from_arguments(argv: Sequence[str]) -> str:
    """The enclave rcl will use: ROS_SECURITY_ENCLAVE_OVERRIDE, else `--enclave`/`-e` after --ros-args, else '/'."""
    override = os.environ.get("ROS_SECURITY_ENCLAVE_OVERRIDE", "")
    if override:
        return override
    args = list(argv)
    in_ros_args = False
    for i, arg in enumerate(args):
        if arg == "--ros-args":
            in_ros_args = True
        elif arg == "--":
            in_ros_args = False
        elif in_ros_args and arg in ("--enclave", "-e") and i + 1 < len(args):
            return args[i + 1]
        elif in_ros_args and arg.startswith("--enclave="):
            return arg.split("=", 1)[1]
    return "/"


def check_node_security(argv: Sequence[str]) -> bool:
    """Before rclpy.init: with ROS_SECURITY_ENABLE=true, the keystore and the node's enclave must be
    usable (SecurityConfigError otherwise) and the strategy Enforce. Returns whether security is on."""
    if os.environ.get("ROS_SECURITY_ENABLE", "").lower() != "true":
        return False
    strategy = os.environ.get("ROS_SECURITY_STRATEGY", "")
    if strategy != "Enforce":
        raise SecurityConfigError(f"ROS_SECURITY_STRATEGY: must be Enforce with ROS_SECURITY_ENABLE=true, got "
                                  f"{strategy!r} (Permissive runs the node unsecured when its files are missing)")
    keystore = os.environ.get("ROS_SECURITY_KEYSTORE", "")
    if not keystore:
        raise SecurityConfigError("ROS_SECURITY_KEYSTORE: must name the keystore with ROS_SECURITY_ENABLE=true "
                                  f"(make one: {INIT_COMMAND} DIR)")
    check_enclave(Path(keystore), enclave_from_arguments(argv))
    return True

