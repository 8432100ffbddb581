"""Our grpc/proto/a2a.proto against the descriptor of A2A's normative a2a.proto
that the official Python SDK ships (a2a.types.a2a_pb2), field for field.

Writes the SDK's FileDescriptorProto to a file and runs the Rust checker
(grpc/examples/descriptor_check.rs) on it: it must agree. Then changes one
field number in a copy (Task.id) and runs it again: it must report exactly
that field, so a check that could not fail would fail here.

usage: check_grpc_descriptor.py --checker PATH/TO/descriptor_check
"""

import argparse
import os
import subprocess
import sys
import tempfile

from a2a.types import a2a_pb2
from google.protobuf import descriptor_pb2


def run(checker, path):
    p = subprocess.run([checker, path], capture_output=True, text=True, timeout=60)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checker", required=True)
    args = ap.parse_args()

    theirs = descriptor_pb2.FileDescriptorProto()
    a2a_pb2.DESCRIPTOR.CopyToProto(theirs)
    print(f"a2a-sdk descriptor: {theirs.name} package {theirs.package}, "
          f"{len(theirs.message_type)} top-level messages")
    with tempfile.TemporaryDirectory() as tmp:
        same = os.path.join(tmp, "a2a-sdk.pb")
        with open(same, "wb") as f:
            f.write(theirs.SerializeToString())
        if run(args.checker, same).returncode != 0:
            print("FAILED: our a2a.proto differs from the SDK's", file=sys.stderr)
            return 1

        task = next(m for m in theirs.message_type if m.name == "Task")
        field = next(x for x in task.field if x.name == "id")
        field.number = 99
        changed = os.path.join(tmp, "a2a-sdk-renumbered.pb")
        with open(changed, "wb") as f:
            f.write(theirs.SerializeToString())
        p = run(args.checker, changed)
        want = "message lf.a2a.v1.Task field id: number is 1 here, 99 in theirs"
        if p.returncode != 1 or want not in p.stdout.splitlines():
            print(f"FAILED: one changed field number (Task.id 1 -> 99) was not "
                  f"reported (exit {p.returncode})", file=sys.stderr)
            return 1
        print("ok: a changed field number (Task.id 1 -> 99) is reported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
