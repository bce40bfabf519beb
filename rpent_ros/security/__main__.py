"""`rpent ros-security`: make an SROS2 keystore for RPent's nodes, print a policy, check an enclave.

    rpent ros-security init DIR                      # the shipped policy (config/security/policy.xml)
    rpent ros-security init DIR --policy my.xml      # a lab's own policy
    rpent ros-security policy --robot dual_franka --config lab.yaml > my.xml   # a policy for a lab's config
    rpent ros-security check DIR /rpent/toolkit      # would this enclave start?
    rpent ros-security policy --bundled > config/security/policy.xml          # after changing the policy's rules

Runs as `python -m rpent_ros.security` (the rpent command hands the arguments over), with ROS 2 sourced.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

PROG = "rpent ros-security"


def shipped_policy() -> Path:
    """config/security/policy.xml: beside the checkout's rpent_ros, or in the installed package's share."""
    here = Path(__file__).resolve().parents[2] / "config" / "security" / "policy.xml"
    if here.is_file():
        return here
    from ament_index_python.packages import get_package_share_directory

    return Path(get_package_share_directory("rpent")) / "config" / "security" / "policy.xml"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="SROS2 (DDS-Security) keystores for RPent's ROS 2 nodes: "
                                     "one enclave per node, permissions of least privilege (docs/ros.md, Security).")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    init = commands.add_parser("init", help="make a keystore (or complete one) for a policy",
                               description="Create the keystore DIR with sros2: CAs, governance, and for every enclave "
                               "of the policy a key, a certificate and its signed permissions.")
    init.add_argument("directory", type=Path, metavar="DIR")
    init.add_argument("--policy", type=Path, help="policy XML (default: the shipped config/security/policy.xml)")
    init.add_argument("--domain-id", type=int, help="ROS domain the keystore serves (default: $ROS_DOMAIN_ID, else 0)")
    policy = commands.add_parser("policy", help="print the policy for a robot's deployment",
                                 description="Print the policy XML for the runtime nodes that robot declares with "
                                 "these flags (e.g. a lab's own config), plus RPent's fixed nodes.")
    which = policy.add_mutually_exclusive_group(required=True)
    which.add_argument("--robot", help="the robot whose runtime nodes get enclaves")
    which.add_argument("--bundled", action="store_true",
                       help="the policy of this package's launch files, as config/security/policy.xml ships it")
    policy.add_argument("--flags", default="{}", help='the robot\'s flags as JSON, e.g. \'{"sim": true, "config": "lab.yaml"}\'')
    check = commands.add_parser("check", help="check that an enclave of a keystore can start a node")
    check.add_argument("directory", type=Path, metavar="DIR")
    check.add_argument("enclave", help="e.g. /rpent/toolkit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # sros2 (Jazzy) reads certificate dates through properties cryptography deprecates: not ours to fix.
    warnings.filterwarnings("ignore", message="Properties that return a naïve datetime", module="sros2")
    from rpent_ros.security.keystore import SecurityConfigError, check_enclave, init_keystore

    try:
        if args.command == "init":
            source = args.policy or shipped_policy()
            try:
                text = source.read_text()
            except OSError as exc:
                raise SecurityConfigError(f"--policy: cannot read {source}: {exc.strerror}") from None
            enclaves = init_keystore(args.directory, text, domain_id=args.domain_id)
            print(f"keystore {args.directory}: {len(enclaves)} enclaves ({', '.join(enclaves)}) from {source}")
            print(f"use it: ros2 launch rpent dual_franka.launch.py security:=true keystore:={args.directory.resolve()}")
        elif args.command == "policy":
            from rpent_ros.security.deployments import BUNDLED, policy_for

            try:
                flags = json.loads(args.flags)
            except json.JSONDecodeError as exc:
                raise SecurityConfigError(f"--flags: not JSON ({exc.msg})") from None
            sys.stdout.write(policy_for(BUNDLED if args.bundled else [(args.robot, flags)]))
        else:
            check_enclave(args.directory, args.enclave)
            print(f"enclave {args.enclave} of {args.directory}: every file present, certificates valid")
    except (SecurityConfigError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:  # sros2, cryptography or rclpy: ROS 2 is not sourced
        print(f"{PROG}: error: needs ROS 2 sourced (with sros2): {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
