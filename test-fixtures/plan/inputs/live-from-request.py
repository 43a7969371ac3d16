#!/usr/bin/env python3
"""The live state `kubectl get -o json` would print, from a captured Metacontroller
request: the parent, every observed child and every related object, as one List
(managedFields dropped, as kubectl drops them by default).

    python3 test-fixtures/plan/inputs/live-from-request.py REQUEST.json > LIVE.json

The plan fixtures' live states (running.json, running-8.4.3.json,
primary-not-ready.json, deleting.json) are requests a real Metacontroller sent to the
hook in one run of the full loop (real kube-apiserver, controller-manager, kwok):

    MYSQL_HOOK_K8S_LOGS=/tmp/fl python3 tests/k8s/full_loop.py --capture-fixtures
    # then, in Python from tests/k8s: full_loop.webhook_requests(Path("/tmp/fl/metacontroller.log"))
    # gives every logged (url, body); write a body to a file and run this script on it.

running-8.4.3.json: a quiet Running sync before the upgrade; running.json: a quiet
Running sync after the upgrade and its switchover (primary db-2); primary-not-ready.json:
the sync right after db-2 was made not Ready; deleting.json: the first finalize call.
The backup store claim `backups` (labelled `mysqlhook.dev/backup-store: "true"`, as the full
loop now makes it, issue 30.5) was added to each by hand, as a capture made since would hold it.
(`--capture-fixtures` itself writes test-fixtures/sync/captured-running and
finalize/captured-deleting, which is where this script's input usually comes from.)
"""
import json
import sys


def clean(o):
    o = json.loads(json.dumps(o))
    o.get("metadata", {}).pop("managedFields", None)
    return o


def main(path):
    with open(path) as f:
        req = json.load(f)
    items = [clean(req["parent"])]
    for section in ("children", "related"):
        for group in sorted(req.get(section, {})):
            for key in sorted(req[section][group]):
                items.append(clean(req[section][group][key]))
    json.dump({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}},
              sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
